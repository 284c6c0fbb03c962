/* Emulation prelude: maps the portable kernel macros onto plain C so the kernels run on the
 * CPU inside the test stub. A launch runs as a single thread (global id 0, grid size 1,
 * block size 1); the kernels' grid-stride loops then cover the whole buffer, and their
 * block-shared counters are zeroed and flushed by that one thread. */
#include <stdint.h>

typedef uint32_t gp_u32;
typedef unsigned long long gp_u64;
typedef struct __attribute__((aligned(16))) {
    gp_u32 x, y, z, w;
} gp_v4;

#define GP_KERNEL static
#define GP_DEVICE static inline
#define GP_SHARED static
#define GP_SYNC ((void)0)
#define GP_GLOBAL_ID ((gp_u64)0)
#define GP_GLOBAL_SIZE ((gp_u64)1)
#define GP_LOCAL_ID ((gp_u32)0)
#define GP_LOCAL_SIZE ((gp_u32)1)

static inline gp_u64 gp_emu_add_u64(gp_u64 *p, gp_u64 v)
{
    gp_u64 old = *p;
    *p = old + v;
    return old;
}
static inline gp_u32 gp_emu_add_u32(gp_u32 *p, gp_u32 v)
{
    gp_u32 old = *p;
    *p = old + v;
    return old;
}
static inline gp_u64 gp_emu_min_u64(gp_u64 *p, gp_u64 v)
{
    gp_u64 old = *p;
    if (v < old)
        *p = v;
    return old;
}
static inline gp_u64 gp_emu_max_u64(gp_u64 *p, gp_u64 v)
{
    gp_u64 old = *p;
    if (v > old)
        *p = v;
    return old;
}
#define GP_ATOMIC_ADD_U64(p, v) gp_emu_add_u64((p), (gp_u64)(v))
#define GP_ATOMIC_ADD_U32(p, v) gp_emu_add_u32((p), (gp_u32)(v))
#define GP_ATOMIC_MIN_U64(p, v) gp_emu_min_u64((p), (gp_u64)(v))
#define GP_ATOMIC_MAX_U64(p, v) gp_emu_max_u64((p), (gp_u64)(v))
