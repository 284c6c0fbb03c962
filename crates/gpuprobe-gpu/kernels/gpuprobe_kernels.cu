/*
 * gpuprobe native kernels: one portable source, no vendor intrinsics.
 *
 * The same text is compiled three ways:
 *   - at run time by NVRTC (CUDA) or hipRTC (HIP, with --offload-arch=<gcnArchName>), after
 *     the device prelude kernels/prelude_device.h;
 *   - ahead of time into kernels/gpuprobe_kernels.ptx (embedded; see that file's header), so
 *     NVIDIA hosts need no NVRTC for the memtest and copy checks;
 *   - by the host C compiler inside the test stub library (tests/stub/fake_gpu.c), after an
 *     emulation prelude that runs a launch as one thread, so the whole engine is tested
 *     without a GPU.
 * Everything vendor-specific lives in the preludes: gp_u32, gp_u64, gp_v4 (16-byte vector
 * with fields x, y, z, w), GP_KERNEL, GP_DEVICE, GP_SHARED, GP_SYNC, GP_GLOBAL_ID,
 * GP_GLOBAL_SIZE, GP_LOCAL_ID, GP_LOCAL_SIZE and the GP_ATOMIC_* operations.
 *
 * Memory is seen as 64-bit words. Each thread moves one 16-byte vector (two words) per
 * grid-stride step, so a warp touches 512 contiguous bytes per access. The host-side mirror
 * of every pattern generator is src/kernels.rs; the two must stay bit-identical.
 */

/* Layout of the error sink (an array of 64-bit counters filled by the check kernels). */
#define GP_SINK_ERROR_WORDS 0   /* 64-bit words that differed */
#define GP_SINK_ERROR_BITS 1    /* bits that differed */
#define GP_SINK_EXAMPLE_COUNT 2 /* example slots claimed (may exceed the capacity) */
#define GP_SINK_ZERO_WORDS 3    /* differing words that read back as zero */
#define GP_SINK_HIST 4          /* 64 counters: differing bits by bit position */
#define GP_SINK_EXAMPLES 68     /* GP_SINK_MAX_EXAMPLES triples: address, expected, found */
#define GP_SINK_MAX_EXAMPLES 32

/* lowbias32 (Chris Wellons' integer hash): cheap, and every input bit reaches every output bit. */
GP_DEVICE gp_u32 gp_hash32(gp_u32 x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* Pattern generators. Each fills the two words of one vector: word index w (even) and w + 1
 * at device address addr and addr + 8, with the pattern parameter a. */

/* Constant: every word holds a (solid and moving-inversion patterns). */
GP_DEVICE void gp_gen_const(gp_u64 w, gp_u64 addr, gp_u64 a, gp_u64 *v0, gp_u64 *v1)
{
    (void)w;
    (void)addr;
    *v0 = a;
    *v1 = a;
}

/* Own address: every word holds its own device address (finds addressing faults). */
GP_DEVICE void gp_gen_addr(gp_u64 w, gp_u64 addr, gp_u64 a, gp_u64 *v0, gp_u64 *v1)
{
    (void)w;
    (void)a;
    *v0 = addr;
    *v1 = addr + 8;
}

/* Walking ones: word w holds a single one bit at position (w + a) mod 64. */
GP_DEVICE void gp_gen_walk(gp_u64 w, gp_u64 addr, gp_u64 a, gp_u64 *v0, gp_u64 *v1)
{
    (void)addr;
    *v0 = (gp_u64)1 << ((w + a) & 63);
    *v1 = (gp_u64)1 << ((w + 1 + a) & 63);
}

/* Random: 32-bit lane k = 2w + j holds hash(lo32(k) ^ key), key = hash(hi(w) ^ hi32(a)) ^ lo32(a),
 * hi(w) = w >> 31, so no two words of a test share a value for a given seed a. */
GP_DEVICE void gp_gen_rand(gp_u64 w, gp_u64 addr, gp_u64 a, gp_u64 *v0, gp_u64 *v1)
{
    gp_u32 key = gp_hash32((gp_u32)(w >> 31) ^ (gp_u32)(a >> 32)) ^ (gp_u32)a;
    gp_u32 lane = (gp_u32)(w << 1);
    (void)addr;
    *v0 = (gp_u64)gp_hash32(lane ^ key) | ((gp_u64)gp_hash32((lane + 1u) ^ key) << 32);
    *v1 = (gp_u64)gp_hash32((lane + 2u) ^ key) | ((gp_u64)gp_hash32((lane + 3u) ^ key) << 32);
}

/* Records one differing word: bit histogram (block-shared), address region statistics and,
 * while slots remain, an example. Returns the number of differing bits. Runs only on a
 * mismatch, so its atomics cost nothing on healthy memory. */
GP_DEVICE gp_u64 gp_note_error(gp_u64 *sink, gp_u32 *s_hist, gp_u64 addr, gp_u64 expected,
                               gp_u64 found, gp_u32 *region_count, gp_u64 *region_lo,
                               gp_u64 *region_hi, gp_u64 region_origin, gp_u32 region_shift)
{
    gp_u64 diff = expected ^ found;
    gp_u64 bits = 0;
    gp_u64 region = (addr - region_origin) >> region_shift;
    gp_u32 b;
    /* A data-dependent trip count: compilers keep this loop rolled. */
    for (b = 0; diff != 0; b++, diff >>= 1) {
        if (diff & 1u) {
            GP_ATOMIC_ADD_U32(&s_hist[b], 1u);
            bits++;
        }
    }
    GP_ATOMIC_ADD_U32(&region_count[region], 1u);
    GP_ATOMIC_MIN_U64(&region_lo[region], addr);
    GP_ATOMIC_MAX_U64(&region_hi[region], addr);
    if (*(volatile gp_u64 *)&sink[GP_SINK_EXAMPLE_COUNT] < GP_SINK_MAX_EXAMPLES) {
        gp_u64 slot = GP_ATOMIC_ADD_U64(&sink[GP_SINK_EXAMPLE_COUNT], 1u);
        if (slot < GP_SINK_MAX_EXAMPLES) {
            sink[GP_SINK_EXAMPLES + 3 * slot] = addr;
            sink[GP_SINK_EXAMPLES + 3 * slot + 1] = expected;
            sink[GP_SINK_EXAMPLES + 3 * slot + 2] = found;
        }
    }
    return bits;
}

/* fill: p[i] = pattern ^ x over n_vec vectors; word_base is the index of the first word. */
#define GP_DEFINE_FILL(NAME, GEN)                                                              \
    GP_KERNEL void NAME(gp_v4 *p, gp_u64 n_vec, gp_u64 word_base, gp_u64 a, gp_u64 x)          \
    {                                                                                          \
        gp_u64 i;                                                                              \
        for (i = GP_GLOBAL_ID; i < n_vec; i += GP_GLOBAL_SIZE) {                               \
            gp_u64 v0, v1;                                                                     \
            gp_v4 o;                                                                           \
            GEN(word_base + 2 * i, (gp_u64)(p + i), a, &v0, &v1);                              \
            v0 ^= x;                                                                           \
            v1 ^= x;                                                                           \
            o.x = (gp_u32)v0;                                                                  \
            o.y = (gp_u32)(v0 >> 32);                                                          \
            o.z = (gp_u32)v1;                                                                  \
            o.w = (gp_u32)(v1 >> 32);                                                          \
            p[i] = o;                                                                          \
        }                                                                                      \
    }

/* check: compares p[i] with pattern ^ x; with rewrite != 0 it then stores the complement of
 * the expected value (one step of moving inversions). Errors go to the sink and region
 * tables; counters are kept per thread and per block and flushed once at the end. */
#define GP_DEFINE_CHECK(NAME, GEN)                                                             \
    GP_KERNEL void NAME(gp_v4 *p, gp_u64 n_vec, gp_u64 word_base, gp_u64 a, gp_u64 x,          \
                        gp_u32 rewrite, gp_u64 *sink, gp_u32 *region_count,                    \
                        gp_u64 *region_lo, gp_u64 *region_hi, gp_u64 region_origin,            \
                        gp_u32 region_shift)                                                   \
    {                                                                                          \
        GP_SHARED gp_u32 s_hist[64];                                                           \
        GP_SHARED gp_u32 s_dirty;                                                              \
        gp_u64 i;                                                                              \
        gp_u32 b;                                                                              \
        gp_u64 errors = 0, bits = 0, zeros = 0;                                                \
        for (b = GP_LOCAL_ID; b < 64u; b += GP_LOCAL_SIZE)                                     \
            s_hist[b] = 0;                                                                     \
        if (GP_LOCAL_ID == 0)                                                                  \
            s_dirty = 0;                                                                       \
        GP_SYNC;                                                                               \
        for (i = GP_GLOBAL_ID; i < n_vec; i += GP_GLOBAL_SIZE) {                               \
            gp_v4 f = p[i];                                                                    \
            gp_u64 addr = (gp_u64)(p + i);                                                     \
            gp_u64 e0, e1, f0, f1;                                                             \
            GEN(word_base + 2 * i, addr, a, &e0, &e1);                                         \
            e0 ^= x;                                                                           \
            e1 ^= x;                                                                           \
            f0 = (gp_u64)f.x | ((gp_u64)f.y << 32);                                            \
            f1 = (gp_u64)f.z | ((gp_u64)f.w << 32);                                            \
            if (((f0 ^ e0) | (f1 ^ e1)) != 0) {                                                \
                s_dirty = 1;                                                                   \
                if (f0 != e0) {                                                                \
                    errors++;                                                                  \
                    zeros += (f0 == 0);                                                        \
                    bits += gp_note_error(sink, s_hist, addr, e0, f0, region_count, region_lo, \
                                          region_hi, region_origin, region_shift);             \
                }                                                                              \
                if (f1 != e1) {                                                                \
                    errors++;                                                                  \
                    zeros += (f1 == 0);                                                        \
                    bits += gp_note_error(sink, s_hist, addr + 8, e1, f1, region_count,        \
                                          region_lo, region_hi, region_origin, region_shift);  \
                }                                                                              \
            }                                                                                  \
            if (rewrite) {                                                                     \
                gp_v4 o;                                                                       \
                o.x = (gp_u32)~e0;                                                             \
                o.y = (gp_u32)(~e0 >> 32);                                                     \
                o.z = (gp_u32)~e1;                                                             \
                o.w = (gp_u32)(~e1 >> 32);                                                     \
                p[i] = o;                                                                      \
            }                                                                                  \
        }                                                                                      \
        if (errors) {                                                                          \
            GP_ATOMIC_ADD_U64(&sink[GP_SINK_ERROR_WORDS], errors);                             \
            GP_ATOMIC_ADD_U64(&sink[GP_SINK_ERROR_BITS], bits);                                \
            GP_ATOMIC_ADD_U64(&sink[GP_SINK_ZERO_WORDS], zeros);                               \
        }                                                                                      \
        GP_SYNC;                                                                               \
        if (s_dirty) {                                                                         \
            for (b = GP_LOCAL_ID; b < 64u; b += GP_LOCAL_SIZE)                                 \
                if (s_hist[b])                                                                 \
                    GP_ATOMIC_ADD_U64(&sink[GP_SINK_HIST + b], (gp_u64)s_hist[b]);             \
        }                                                                                      \
    }

GP_DEFINE_FILL(gp_fill_const, gp_gen_const)
GP_DEFINE_FILL(gp_fill_addr, gp_gen_addr)
GP_DEFINE_FILL(gp_fill_walk, gp_gen_walk)
GP_DEFINE_FILL(gp_fill_rand, gp_gen_rand)
GP_DEFINE_CHECK(gp_check_const, gp_gen_const)
GP_DEFINE_CHECK(gp_check_addr, gp_gen_addr)
GP_DEFINE_CHECK(gp_check_walk, gp_gen_walk)
GP_DEFINE_CHECK(gp_check_rand, gp_gen_rand)

/* Device-to-device copy, 16 bytes per thread per step: the bandwidth ceiling the memtest is
 * compared with (next to the runtime's own memcpy). */
GP_KERNEL void gp_copy_v4(const gp_v4 *src, gp_v4 *dst, gp_u64 n_vec)
{
    gp_u64 i;
    for (i = GP_GLOBAL_ID; i < n_vec; i += GP_GLOBAL_SIZE)
        dst[i] = src[i];
}
