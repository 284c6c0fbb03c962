/*
 * A fake GPU runtime for tests without a GPU: one shared library that exports the CUDA
 * driver, NVRTC, HIP runtime and hipRTC entry points gpuprobe binds. Tests copy it under
 * the vendor file names (libcuda.so.1, libnvrtc.so.12, libamdhip64.so.6, libhiprtc.so.6)
 * into a temporary directory; each copy is a separate instance with its own state.
 *
 * "Device memory" is an anonymous mapping of `vram` bytes with a first-fit allocator, so
 * addresses are stable and allocation fails with out-of-memory like a real device. Kernels
 * are the real portable kernels (../../kernels/gpuprobe_kernels.cu) compiled for the CPU
 * through emu_prelude.h and dispatched by name. Behaviour comes from `fake-gpu.cfg` next to
 * the library file (key=value lines):
 *   init_error, count_error     error code of cuInit/hipInit, cuDeviceGetCount/hipGetDeviceCount
 *   device_count                devices (default 1)
 *   driver_version              cuDriverGetVersion (default 12080)
 *   runtime_version             hipRuntimeGetVersion (default 60342134)
 *   hiprtc_major                hiprtcVersion major (default: the runtime's)
 *   vram                        device memory bytes (default 256 MiB)
 *   free_report                 what MemGetInfo calls free (default: the truth)
 *   alloc_error, memcpy_error   error code returned by every allocation / copy
 *   h2d_zero_max                host-to-device copies of at most this many bytes write zeros
 *   stuck_offset, stuck_bit     a bit stuck at 1 at this byte offset of the memory
 *   rtc_error                   compile result of nvrtcCompileProgram/hiprtcCompileProgram
 *   arch                        gcnArchName (default gfx1100)
 * Build with -DFAKE_OMIT_MEMALLOC to drop cuMemAlloc_v2 and hipMalloc (missing-symbol tests).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "emu_prelude.h"
#include "gpuprobe_kernels.cu"

#define EXPORT __attribute__((visibility("default")))

/* ---- configuration ---- */

static int cfg_loaded;
static long long cfg_init_error, cfg_count_error, cfg_device_count = 1;
static long long cfg_driver_version = 12080, cfg_runtime_version = 60342134, cfg_hiprtc_major = -1;
static long long cfg_vram = 256ll << 20, cfg_free_report = -1;
static long long cfg_alloc_error, cfg_memcpy_error, cfg_h2d_zero_max = -1;
static long long cfg_stuck_offset = -1, cfg_stuck_bit, cfg_rtc_error;
static char cfg_arch[128] = "gfx1100";

static void load_config(void)
{
    Dl_info info;
    char path[4096];
    char line[256];
    FILE *f;
    if (cfg_loaded)
        return;
    cfg_loaded = 1;
    if (!dladdr((void *)&load_config, &info) || !info.dli_fname)
        return;
    snprintf(path, sizeof path, "%s", info.dli_fname);
    char *slash = strrchr(path, '/');
    if (!slash)
        return;
    snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "fake-gpu.cfg");
    f = fopen(path, "r");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        char key[64], value[128];
        if (sscanf(line, "%63[^=]=%127s", key, value) != 2)
            continue;
        long long v = strtoll(value, NULL, 0);
#define KEY(name)                                                                              \
    if (!strcmp(key, #name))                                                                   \
        cfg_##name = v;
        KEY(init_error) KEY(count_error) KEY(device_count) KEY(driver_version)
        KEY(runtime_version) KEY(hiprtc_major) KEY(vram) KEY(free_report) KEY(alloc_error)
        KEY(memcpy_error) KEY(h2d_zero_max) KEY(stuck_offset) KEY(stuck_bit) KEY(rtc_error)
        if (!strcmp(key, "arch"))
            snprintf(cfg_arch, sizeof cfg_arch, "%s", value);
#undef KEY
    }
    fclose(f);
}

/* ---- device memory ---- */

#define MAX_BLOCKS 4096
struct block {
    uint64_t offset, size;
};
static unsigned char *arena;
static struct block blocks[MAX_BLOCKS]; /* live allocations, sorted by offset */
static int nblocks;
static uint64_t used;

static int arena_ready(void)
{
    load_config();
    if (!arena) {
        void *p = mmap(NULL, (size_t)cfg_vram, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return 0;
        arena = p;
    }
    return 1;
}

static uint64_t arena_alloc(uint64_t size)
{
    uint64_t at = 0;
    int i;
    size = (size + 255) & ~(uint64_t)255;
    if (!arena_ready() || size == 0 || nblocks == MAX_BLOCKS)
        return 0;
    for (i = 0; i <= nblocks; i++) {
        uint64_t end = i < nblocks ? blocks[i].offset : (uint64_t)cfg_vram;
        if (end - at >= size) {
            memmove(&blocks[i + 1], &blocks[i], (size_t)(nblocks - i) * sizeof blocks[0]);
            blocks[i].offset = at;
            blocks[i].size = size;
            nblocks++;
            used += size;
            return (uint64_t)(uintptr_t)(arena + at);
        }
        if (i < nblocks)
            at = blocks[i].offset + blocks[i].size;
    }
    return 0;
}

static int arena_free(uint64_t ptr)
{
    int i;
    for (i = 0; i < nblocks; i++) {
        if ((uint64_t)(uintptr_t)(arena + blocks[i].offset) == ptr) {
            used -= blocks[i].size;
            memmove(&blocks[i], &blocks[i + 1], (size_t)(nblocks - i - 1) * sizeof blocks[0]);
            nblocks--;
            return 0;
        }
    }
    return 1;
}

static void apply_stuck_bit(void)
{
    if (arena && cfg_stuck_offset >= 0 && cfg_stuck_offset + 8 <= cfg_vram) {
        uint64_t *word = (uint64_t *)(arena + (cfg_stuck_offset & ~7ll));
        *word |= 1ull << (cfg_stuck_bit & 63);
    }
}

static int do_copy(void *dst, const void *src, size_t n, int to_device)
{
    load_config();
    if (cfg_memcpy_error)
        return (int)cfg_memcpy_error;
    if (to_device && cfg_h2d_zero_max >= 0 && (long long)n <= cfg_h2d_zero_max)
        memset(dst, 0, n);
    else
        memmove(dst, src, n);
    apply_stuck_bit();
    return 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- kernels ---- */

#define P(i, T) (*(T *)params[i])
typedef void (*fill_fn)(gp_v4 *, gp_u64, gp_u64, gp_u64, gp_u64);
typedef void (*check_fn)(gp_v4 *, gp_u64, gp_u64, gp_u64, gp_u64, gp_u32, gp_u64 *, gp_u32 *,
                         gp_u64 *, gp_u64 *, gp_u64, gp_u32);
static const struct {
    const char *name;
    fill_fn fill;
    check_fn check;
} kernels[] = {
    {"gp_fill_const", gp_fill_const, 0}, {"gp_fill_addr", gp_fill_addr, 0},
    {"gp_fill_walk", gp_fill_walk, 0},   {"gp_fill_rand", gp_fill_rand, 0},
    {"gp_check_const", 0, gp_check_const}, {"gp_check_addr", 0, gp_check_addr},
    {"gp_check_walk", 0, gp_check_walk},   {"gp_check_rand", 0, gp_check_rand},
    {"gp_copy_v4", 0, 0},
};
#define NKERNELS (sizeof kernels / sizeof kernels[0])

static int find_kernel(void **out, const char *name)
{
    size_t i;
    for (i = 0; i < NKERNELS; i++) {
        if (!strcmp(kernels[i].name, name)) {
            *out = (void *)(uintptr_t)(i + 1);
            return 0;
        }
    }
    return 500; /* not found */
}

static int launch(void *f, void **params)
{
    size_t i = (size_t)(uintptr_t)f - 1;
    if (i >= NKERNELS)
        return 400; /* invalid handle */
    if (kernels[i].fill)
        kernels[i].fill(P(0, gp_v4 *), P(1, gp_u64), P(2, gp_u64), P(3, gp_u64), P(4, gp_u64));
    else if (kernels[i].check)
        kernels[i].check(P(0, gp_v4 *), P(1, gp_u64), P(2, gp_u64), P(3, gp_u64), P(4, gp_u64),
                         P(5, gp_u32), P(6, gp_u64 *), P(7, gp_u32 *), P(8, gp_u64 *),
                         P(9, gp_u64 *), P(10, gp_u64), P(11, gp_u32));
    else
        gp_copy_v4(P(0, const gp_v4 *), P(1, gp_v4 *), P(2, gp_u64));
    apply_stuck_bit();
    return 0;
}

static const char *error_name(int code, int hip)
{
    switch (code) {
    case 0: return hip ? "hipSuccess" : "CUDA_SUCCESS";
    case 1: return hip ? "hipErrorInvalidValue" : "CUDA_ERROR_INVALID_VALUE";
    case 2: return hip ? "hipErrorOutOfMemory" : "CUDA_ERROR_OUT_OF_MEMORY";
    case 100: return hip ? "hipErrorNoDevice" : "CUDA_ERROR_NO_DEVICE";
    case 101: return hip ? "hipErrorInvalidDevice" : "CUDA_ERROR_INVALID_DEVICE";
    case 700: return hip ? "hipErrorIllegalAddress" : "CUDA_ERROR_ILLEGAL_ADDRESS";
    default: return hip ? "hipErrorUnknown" : "CUDA_ERROR_UNKNOWN";
    }
}

static int count_devices(int *count)
{
    load_config();
    if (cfg_count_error)
        return (int)cfg_count_error;
    *count = (int)cfg_device_count;
    return 0;
}

/* ---- CUDA driver API ---- */

EXPORT int cuInit(unsigned flags) { (void)flags; load_config(); return (int)cfg_init_error; }
EXPORT int cuDriverGetVersion(int *v) { load_config(); *v = (int)cfg_driver_version; return 0; }
EXPORT int cuDeviceGetCount(int *c) { return count_devices(c); }
EXPORT int cuDeviceGet(int *d, int ordinal)
{
    int n = 0, rc = count_devices(&n);
    if (rc) return rc;
    if (ordinal < 0 || ordinal >= n) return 101;
    *d = ordinal;
    return 0;
}
EXPORT int cuDeviceGetName(char *name, int len, int d) { snprintf(name, (size_t)len, "Fake GPU %d", d); return 0; }
EXPORT int cuDeviceTotalMem_v2(size_t *bytes, int d) { (void)d; load_config(); *bytes = (size_t)cfg_vram; return 0; }
EXPORT int cuDeviceGetAttribute(int *v, int attr, int d)
{
    (void)d;
    switch (attr) {
    case 16: *v = 2; break;   /* multiprocessors */
    case 39: *v = 256; break; /* threads per multiprocessor */
    case 75: *v = 9; break;   /* compute capability */
    case 76: *v = 0; break;
    default: *v = 0;
    }
    return 0;
}
EXPORT int cuDeviceGetPCIBusId(char *bus, int len, int d) { snprintf(bus, (size_t)len, "0000:00:%02x.0", 6 + d); return 0; }
EXPORT int cuDevicePrimaryCtxRetain(void **ctx, int d) { (void)d; *ctx = (void *)0x1; return 0; }
EXPORT int cuCtxSetCurrent(void *ctx) { (void)ctx; return 0; }
EXPORT int cuCtxSynchronize(void) { return 0; }
EXPORT int cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    arena_ready();
    *free_bytes = cfg_free_report >= 0 ? (size_t)cfg_free_report : (size_t)(cfg_vram - (long long)used);
    *total = (size_t)cfg_vram;
    return 0;
}
#ifndef FAKE_OMIT_MEMALLOC
EXPORT int cuMemAlloc_v2(uint64_t *ptr, size_t n)
{
    load_config();
    if (cfg_alloc_error) return (int)cfg_alloc_error;
    *ptr = arena_alloc(n);
    return *ptr ? 0 : 2;
}
#endif
EXPORT int cuMemFree_v2(uint64_t ptr) { return arena_free(ptr); }
EXPORT int cuMemHostAlloc(void **p, size_t n, unsigned flags) { (void)flags; *p = malloc(n ? n : 1); return *p ? 0 : 2; }
EXPORT int cuMemFreeHost(void *p) { free(p); return 0; }
EXPORT int cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t n) { return do_copy((void *)(uintptr_t)dst, src, n, 1); }
EXPORT int cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n) { return do_copy(dst, (void *)(uintptr_t)src, n, 0); }
EXPORT int cuMemcpyDtoD_v2(uint64_t dst, uint64_t src, size_t n) { return do_copy((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n, 0); }
EXPORT int cuMemcpyHtoDAsync_v2(uint64_t dst, const void *src, size_t n, void *s) { (void)s; return cuMemcpyHtoD_v2(dst, src, n); }
EXPORT int cuMemcpyDtoHAsync_v2(void *dst, uint64_t src, size_t n, void *s) { (void)s; return cuMemcpyDtoH_v2(dst, src, n); }
EXPORT int cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, size_t n, void *s) { (void)s; return cuMemcpyDtoD_v2(dst, src, n); }
EXPORT int cuMemsetD8_v2(uint64_t dst, unsigned char v, size_t n) { memset((void *)(uintptr_t)dst, v, n); apply_stuck_bit(); return 0; }
EXPORT int cuStreamCreate(void **s, unsigned flags) { (void)flags; *s = (void *)0x2; return 0; }
EXPORT int cuStreamDestroy_v2(void *s) { (void)s; return 0; }
EXPORT int cuStreamSynchronize(void *s) { (void)s; return 0; }
EXPORT int cuEventCreate(void **e, unsigned flags) { (void)flags; *e = calloc(1, sizeof(double)); return 0; }
EXPORT int cuEventDestroy_v2(void *e) { free(e); return 0; }
EXPORT int cuEventRecord(void *e, void *s) { (void)s; *(double *)e = now_ms(); return 0; }
EXPORT int cuEventSynchronize(void *e) { (void)e; return 0; }
EXPORT int cuEventElapsedTime(float *ms, void *a, void *b)
{
    double d = *(double *)b - *(double *)a;
    *ms = (float)(d > 0 ? d : 1e-3);
    return 0;
}
EXPORT int cuModuleLoadData(void **m, const void *image) { *m = (void *)0x3; return image ? 0 : 1; }
EXPORT int cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *o, void **v) { (void)n; (void)o; (void)v; return cuModuleLoadData(m, image); }
EXPORT int cuModuleUnload(void *m) { (void)m; return 0; }
EXPORT int cuModuleGetFunction(void **f, void *m, const char *name) { (void)m; return find_kernel(f, name); }
EXPORT int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned shmem, void *s, void **params, void **extra)
{
    (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shmem; (void)s; (void)extra;
    return launch(f, params);
}
EXPORT int cuGetErrorName(int code, const char **s) { *s = error_name(code, 0); return 0; }
EXPORT int cuGetErrorString(int code, const char **s) { *s = code == 2 ? "out of memory" : "fake error"; return 0; }

/* ---- HIP runtime ---- */

EXPORT int hipInit(unsigned flags) { (void)flags; load_config(); return (int)cfg_init_error; }
EXPORT int hipDriverGetVersion(int *v) { load_config(); *v = (int)cfg_runtime_version; return 0; }
EXPORT int hipRuntimeGetVersion(int *v) { load_config(); *v = (int)cfg_runtime_version; return 0; }
EXPORT int hipGetDeviceCount(int *c) { return count_devices(c); }
EXPORT int hipSetDevice(int d) { int n = 0; count_devices(&n); return d < n ? 0 : 101; }
EXPORT int hipDeviceGetName(char *name, int len, int d) { snprintf(name, (size_t)len, "Fake Radeon %d", d); return 0; }
EXPORT int hipDeviceGetAttribute(int *v, int attr, int d)
{
    (void)d;
    switch (attr) {
    case 63: *v = 2; break;   /* multiprocessors */
    case 57: *v = 256; break; /* threads per multiprocessor */
    case 16: *v = 1; break;   /* integrated */
    default: *v = 0;
    }
    return 0;
}
EXPORT int hipDeviceTotalMem(size_t *bytes, int d) { return cuDeviceTotalMem_v2(bytes, d); }
EXPORT int hipDeviceGetPCIBusId(char *bus, int len, int d) { return cuDeviceGetPCIBusId(bus, len, d); }
EXPORT int hipGetDevicePropertiesR0600(void *props, int d)
{
    (void)d;
    load_config();
    memset(props, 0, 1500);
    snprintf((char *)props + 1160, 256, "%s", cfg_arch);
    return 0;
}
EXPORT int hipMemGetInfo(size_t *free_bytes, size_t *total) { return cuMemGetInfo_v2(free_bytes, total); }
#ifndef FAKE_OMIT_MEMALLOC
EXPORT int hipMalloc(void **p, size_t n)
{
    uint64_t ptr = 0;
    int rc = cuMemAlloc_v2(&ptr, n);
    *p = (void *)(uintptr_t)ptr;
    return rc;
}
#endif
EXPORT int hipFree(void *p) { return cuMemFree_v2((uint64_t)(uintptr_t)p); }
EXPORT int hipHostMalloc(void **p, size_t n, unsigned flags) { return cuMemHostAlloc(p, n, flags); }
EXPORT int hipHostFree(void *p) { free(p); return 0; }
EXPORT int hipMemcpyHtoD(void *dst, void *src, size_t n) { return do_copy(dst, src, n, 1); }
EXPORT int hipMemcpyDtoH(void *dst, void *src, size_t n) { return do_copy(dst, src, n, 0); }
EXPORT int hipMemcpyDtoD(void *dst, void *src, size_t n) { return do_copy(dst, src, n, 0); }
EXPORT int hipMemcpyHtoDAsync(void *dst, void *src, size_t n, void *s) { (void)s; return do_copy(dst, src, n, 1); }
EXPORT int hipMemcpyDtoHAsync(void *dst, void *src, size_t n, void *s) { (void)s; return do_copy(dst, src, n, 0); }
EXPORT int hipMemcpyDtoDAsync(void *dst, void *src, size_t n, void *s) { (void)s; return do_copy(dst, src, n, 0); }
EXPORT int hipMemsetD8(void *dst, unsigned char v, size_t n) { return cuMemsetD8_v2((uint64_t)(uintptr_t)dst, v, n); }
EXPORT int hipStreamCreate(void **s) { return cuStreamCreate(s, 0); }
EXPORT int hipStreamDestroy(void *s) { (void)s; return 0; }
EXPORT int hipStreamSynchronize(void *s) { (void)s; return 0; }
EXPORT int hipEventCreate(void **e) { return cuEventCreate(e, 0); }
EXPORT int hipEventDestroy(void *e) { return cuEventDestroy_v2(e); }
EXPORT int hipEventRecord(void *e, void *s) { return cuEventRecord(e, s); }
EXPORT int hipEventSynchronize(void *e) { (void)e; return 0; }
EXPORT int hipEventElapsedTime(float *ms, void *a, void *b) { return cuEventElapsedTime(ms, a, b); }
EXPORT int hipModuleLoadData(void **m, const void *image) { return cuModuleLoadData(m, image); }
EXPORT int hipModuleUnload(void *m) { (void)m; return 0; }
EXPORT int hipModuleGetFunction(void **f, void *m, const char *name) { (void)m; return find_kernel(f, name); }
EXPORT int hipModuleLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned shmem, void *s, void **params,
                                 void **extra)
{
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}
EXPORT int hipDeviceSynchronize(void) { return 0; }
EXPORT const char *hipGetErrorName(int code) { return error_name(code, 1); }
EXPORT const char *hipGetErrorString(int code) { return code == 100 ? "no ROCm-capable device is detected" : "fake error"; }

/* ---- NVRTC and hipRTC ---- */

struct program {
    char log[128];
};
static const char fake_code[] = "// fake code object\n";

static int rtc_create(void **prog) { *prog = calloc(1, sizeof(struct program)); return *prog ? 0 : 1; }
static int rtc_compile(void *prog)
{
    load_config();
    if (cfg_rtc_error)
        snprintf(((struct program *)prog)->log, sizeof ((struct program *)prog)->log,
                 "fake_kernels.cu(1): error: this compiler is fake");
    return (int)cfg_rtc_error;
}
static int rtc_log_size(void *prog, size_t *n) { *n = strlen(((struct program *)prog)->log) + 1; return 0; }
static int rtc_log(void *prog, char *out) { strcpy(out, ((struct program *)prog)->log); return 0; }
static int rtc_code_size(void *prog, size_t *n) { (void)prog; *n = sizeof fake_code; return 0; }
static int rtc_code(void *prog, char *out) { (void)prog; memcpy(out, fake_code, sizeof fake_code); return 0; }
static int rtc_destroy(void **prog) { free(*prog); *prog = NULL; return 0; }

EXPORT int nvrtcVersion(int *major, int *minor) { *major = 12; *minor = 9; return 0; }
EXPORT int nvrtcCreateProgram(void **prog, const char *src, const char *name, int n,
                              const char *const *headers, const char *const *names)
{
    (void)src; (void)name; (void)n; (void)headers; (void)names;
    return rtc_create(prog);
}
EXPORT int nvrtcCompileProgram(void *prog, int n, const char *const *options) { (void)n; (void)options; return rtc_compile(prog); }
EXPORT int nvrtcGetPTXSize(void *prog, size_t *n) { return rtc_code_size(prog, n); }
EXPORT int nvrtcGetPTX(void *prog, char *out) { return rtc_code(prog, out); }
EXPORT int nvrtcGetCUBINSize(void *prog, size_t *n) { return rtc_code_size(prog, n); }
EXPORT int nvrtcGetCUBIN(void *prog, char *out) { return rtc_code(prog, out); }
EXPORT int nvrtcGetProgramLogSize(void *prog, size_t *n) { return rtc_log_size(prog, n); }
EXPORT int nvrtcGetProgramLog(void *prog, char *out) { return rtc_log(prog, out); }
EXPORT int nvrtcDestroyProgram(void **prog) { return rtc_destroy(prog); }
EXPORT const char *nvrtcGetErrorString(int code) { return code ? "NVRTC_ERROR_COMPILATION" : "NVRTC_SUCCESS"; }

EXPORT int hiprtcVersion(int *major, int *minor)
{
    load_config();
    *major = cfg_hiprtc_major >= 0 ? (int)cfg_hiprtc_major : (int)(cfg_runtime_version / 10000000);
    *minor = 3;
    return 0;
}
EXPORT int hiprtcCreateProgram(void **prog, const char *src, const char *name, int n,
                               const char *const *headers, const char *const *names)
{
    return nvrtcCreateProgram(prog, src, name, n, headers, names);
}
EXPORT int hiprtcCompileProgram(void *prog, int n, const char *const *options) { (void)n; (void)options; return rtc_compile(prog); }
EXPORT int hiprtcGetCodeSize(void *prog, size_t *n) { return rtc_code_size(prog, n); }
EXPORT int hiprtcGetCode(void *prog, char *out) { return rtc_code(prog, out); }
EXPORT int hiprtcGetProgramLogSize(void *prog, size_t *n) { return rtc_log_size(prog, n); }
EXPORT int hiprtcGetProgramLog(void *prog, char *out) { return rtc_log(prog, out); }
EXPORT int hiprtcDestroyProgram(void **prog) { return rtc_destroy(prog); }
EXPORT const char *hiprtcGetErrorString(int code) { return code ? "HIPRTC_ERROR_COMPILATION" : "HIPRTC_SUCCESS"; }
