/* gpuprobe device prelude: maps the portable kernel macros onto CUDA C++ (NVRTC) and HIP
 * (hipRTC). Both compilers provide these builtins without any include. The launch bounds
 * (up to 1024 threads a block, two such blocks an SM) cap registers at 32 a thread, so a
 * multiprocessor can hold its full 2048 threads and keep enough loads in flight. */
typedef unsigned int gp_u32;
typedef unsigned long long gp_u64;
typedef struct __attribute__((aligned(16))) {
    gp_u32 x, y, z, w;
} gp_v4;
#define GP_KERNEL extern "C" __global__ __launch_bounds__(1024, 2)
#define GP_DEVICE static __device__ inline
#define GP_SHARED __shared__
#define GP_SYNC __syncthreads()
#define GP_GLOBAL_ID ((gp_u64)blockIdx.x * (gp_u64)blockDim.x + (gp_u64)threadIdx.x)
#define GP_GLOBAL_SIZE ((gp_u64)gridDim.x * (gp_u64)blockDim.x)
#define GP_LOCAL_ID ((gp_u32)threadIdx.x)
#define GP_LOCAL_SIZE ((gp_u32)blockDim.x)
#define GP_ATOMIC_ADD_U64(p, v) atomicAdd((p), (gp_u64)(v))
#define GP_ATOMIC_ADD_U32(p, v) atomicAdd((p), (gp_u32)(v))
#define GP_ATOMIC_MIN_U64(p, v) atomicMin((p), (gp_u64)(v))
#define GP_ATOMIC_MAX_U64(p, v) atomicMax((p), (gp_u64)(v))
