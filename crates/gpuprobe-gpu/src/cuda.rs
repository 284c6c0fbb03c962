//! The CUDA driver API (`libcuda.so.1`), loaded at run time, and the CUDA [`DeviceRuntime`].
//!
//! Only the driver API is used: it ships with the driver, so no toolkit is needed, and the
//! embedded PTX (`kernels.rs`) is JIT-compiled by the driver itself. Versioned entry points
//! (`_v2`) are bound by their real exported names, as `cuda.h` maps them.

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::Arc;

use crate::backend::{
    DeviceInfo, DevicePtr, DeviceRuntime, Handle, KernelArg, MemInfo, ModuleImage, RuntimeKind,
    RuntimeVersions,
};
use crate::error::{GpuError, GpuResult, LoadError};
use crate::ffi::{ArgPack, api_table, buffer_string, c_string};
use crate::loader::{LibraryKind, LoadOutcome, OpenedLibrary, SearchConfig, load_first};

type CuResult = c_int;
type CuDevice = c_int;
type CuPtr = u64;
type Raw = *mut c_void;

/// Oldest driver API version supported: 11.0, the first to accept PTX ISA 7.0, which the
/// embedded kernels declare.
pub(crate) const MIN_DRIVER_VERSION: i32 = 11000;

const CUDA_SUCCESS: CuResult = 0;
const CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: c_int = 16;
const CU_DEVICE_ATTRIBUTE_INTEGRATED: c_int = 18;
const CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: c_int = 39;
const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: c_int = 76;
const CU_JIT_ERROR_LOG_BUFFER: c_int = 5;
const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_int = 6;

api_table! {
    /// Entry points of the CUDA driver API used here.
    struct CudaApi {
        required {
            cuInit: fn(c_uint) -> CuResult;
            cuDriverGetVersion: fn(*mut c_int) -> CuResult;
            cuDeviceGetCount: fn(*mut c_int) -> CuResult;
            cuDeviceGet: fn(*mut CuDevice, c_int) -> CuResult;
            cuDeviceGetName: fn(*mut c_char, c_int, CuDevice) -> CuResult;
            cuDeviceTotalMem_v2: fn(*mut usize, CuDevice) -> CuResult;
            cuDeviceGetAttribute: fn(*mut c_int, c_int, CuDevice) -> CuResult;
            cuDevicePrimaryCtxRetain: fn(*mut Raw, CuDevice) -> CuResult;
            cuCtxSetCurrent: fn(Raw) -> CuResult;
            cuCtxSynchronize: fn() -> CuResult;
            cuMemGetInfo_v2: fn(*mut usize, *mut usize) -> CuResult;
            cuMemAlloc_v2: fn(*mut CuPtr, usize) -> CuResult;
            cuMemFree_v2: fn(CuPtr) -> CuResult;
            cuMemHostAlloc: fn(*mut Raw, usize, c_uint) -> CuResult;
            cuMemFreeHost: fn(Raw) -> CuResult;
            cuMemcpyHtoD_v2: fn(CuPtr, *const c_void, usize) -> CuResult;
            cuMemcpyDtoH_v2: fn(Raw, CuPtr, usize) -> CuResult;
            cuMemcpyDtoD_v2: fn(CuPtr, CuPtr, usize) -> CuResult;
            cuMemcpyHtoDAsync_v2: fn(CuPtr, *const c_void, usize, Raw) -> CuResult;
            cuMemcpyDtoHAsync_v2: fn(Raw, CuPtr, usize, Raw) -> CuResult;
            cuMemcpyDtoDAsync_v2: fn(CuPtr, CuPtr, usize, Raw) -> CuResult;
            cuMemsetD8_v2: fn(CuPtr, u8, usize) -> CuResult;
            cuStreamCreate: fn(*mut Raw, c_uint) -> CuResult;
            cuStreamDestroy_v2: fn(Raw) -> CuResult;
            cuStreamSynchronize: fn(Raw) -> CuResult;
            cuEventCreate: fn(*mut Raw, c_uint) -> CuResult;
            cuEventDestroy_v2: fn(Raw) -> CuResult;
            cuEventRecord: fn(Raw, Raw) -> CuResult;
            cuEventSynchronize: fn(Raw) -> CuResult;
            cuModuleLoadData: fn(*mut Raw, *const c_void) -> CuResult;
            cuModuleUnload: fn(Raw) -> CuResult;
            cuModuleGetFunction: fn(*mut Raw, Raw, *const c_char) -> CuResult;
            cuLaunchKernel: fn(Raw, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, Raw, *mut Raw, *mut Raw) -> CuResult;
        }
        optional {
            cuGetErrorName: fn(CuResult, *mut *const c_char) -> CuResult;
            cuGetErrorString: fn(CuResult, *mut *const c_char) -> CuResult;
            cuDeviceGetPCIBusId: fn(*mut c_char, c_int, CuDevice) -> CuResult;
            cuModuleLoadDataEx: fn(*mut Raw, *const c_void, c_uint, *mut c_int, *mut Raw) -> CuResult;
            cuEventElapsedTime_v2: fn(*mut f32, Raw, Raw) -> CuResult;
            cuEventElapsedTime: fn(*mut f32, Raw, Raw) -> CuResult;
        }
    }
}

/// The loaded CUDA driver library.
pub struct CudaDriver {
    lib: OpenedLibrary,
    api: CudaApi,
    version: i32,
}

impl std::fmt::Debug for CudaDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDriver")
            .field("lib", &self.lib)
            .field("version", &self.version)
            .finish()
    }
}

/// `13000` → `13.0`.
pub(crate) fn format_cuda_version(version: i32) -> String {
    format!("{}.{}", version / 1000, (version % 1000) / 10)
}

impl CudaDriver {
    /// Finds and opens the driver library, resolves its entry points and checks its version.
    pub fn load(cfg: &SearchConfig) -> LoadOutcome<Arc<CudaDriver>> {
        load_first(LibraryKind::CudaDriver, cfg, "cuInit", |lib| {
            let api = CudaApi::resolve(&lib)?;
            if api.cuEventElapsedTime_v2.is_none() && api.cuEventElapsedTime.is_none() {
                return Err(LoadError::MissingSymbol {
                    library: LibraryKind::CudaDriver.name(),
                    path: lib.path(),
                    symbol: "cuEventElapsedTime_v2 or cuEventElapsedTime".into(),
                });
            }
            let mut version: c_int = 0;
            // SAFETY: cuDriverGetVersion writes one int and needs no prior cuInit.
            let rc = unsafe { (api.cuDriverGetVersion)(&mut version) };
            if rc != CUDA_SUCCESS {
                return Err(LoadError::VersionMismatch {
                    library: LibraryKind::CudaDriver.name(),
                    path: lib.path(),
                    detail: format!("cuDriverGetVersion returned error {rc}"),
                });
            }
            if version < MIN_DRIVER_VERSION {
                return Err(LoadError::TooOld {
                    library: LibraryKind::CudaDriver.name(),
                    path: lib.path(),
                    found: format_cuda_version(version),
                    required: format_cuda_version(MIN_DRIVER_VERSION),
                });
            }
            Ok(Arc::new(CudaDriver { lib, api, version }))
        })
    }

    /// The library file in use.
    pub fn library(&self) -> &OpenedLibrary {
        &self.lib
    }

    /// The driver API version (`13000` for CUDA 13.0).
    pub fn version(&self) -> i32 {
        self.version
    }

    /// Turns a result code into `Ok` or a [`GpuError::Api`] with the driver's own words.
    pub(crate) fn check(&self, api: &'static str, code: CuResult) -> GpuResult<()> {
        if code == CUDA_SUCCESS {
            return Ok(());
        }
        let mut name_ptr: *const c_char = std::ptr::null();
        let mut text_ptr: *const c_char = std::ptr::null();
        // SAFETY: both functions write a pointer to a static string (or leave it null).
        let (name, description) = unsafe {
            if let Some(f) = self.api.cuGetErrorName {
                f(code, &mut name_ptr);
            }
            if let Some(f) = self.api.cuGetErrorString {
                f(code, &mut text_ptr);
            }
            (c_string(name_ptr), c_string(text_ptr))
        };
        Err(GpuError::Api {
            api,
            code,
            name: name.unwrap_or_else(|| cuda_error_name(code).to_string()),
            description: description.unwrap_or_default(),
        })
    }

    /// `cuInit(0)`, then the number of devices.
    pub fn init_and_count(&self) -> GpuResult<u32> {
        // SAFETY: plain C call, no pointers.
        self.check("cuInit", unsafe { (self.api.cuInit)(0) })?;
        let mut count: c_int = 0;
        // SAFETY: valid out-pointer.
        self.check("cuDeviceGetCount", unsafe {
            (self.api.cuDeviceGetCount)(&mut count)
        })?;
        Ok(count.max(0) as u32)
    }

    /// Queries one device (after [`CudaDriver::init_and_count`]).
    pub fn device_info(&self, ordinal: u32) -> GpuResult<DeviceInfo> {
        let device = self.device(ordinal)?;
        let attr = |attribute: c_int| -> GpuResult<i32> {
            let mut value: c_int = 0;
            // SAFETY: valid out-pointer and a device handle from cuDeviceGet.
            self.check("cuDeviceGetAttribute", unsafe {
                (self.api.cuDeviceGetAttribute)(&mut value, attribute, device)
            })?;
            Ok(value)
        };
        let mut name = [0u8; 256];
        // SAFETY: the buffer length is passed with the buffer.
        self.check("cuDeviceGetName", unsafe {
            (self.api.cuDeviceGetName)(name.as_mut_ptr().cast(), name.len() as c_int, device)
        })?;
        let mut total: usize = 0;
        // SAFETY: valid out-pointer.
        self.check("cuDeviceTotalMem_v2", unsafe {
            (self.api.cuDeviceTotalMem_v2)(&mut total, device)
        })?;
        let pci_bus_id = self.api.cuDeviceGetPCIBusId.and_then(|f| {
            let mut bus = [0u8; 64];
            // SAFETY: the buffer length is passed with the buffer.
            let rc = unsafe { f(bus.as_mut_ptr().cast(), bus.len() as c_int, device) };
            (rc == CUDA_SUCCESS).then(|| buffer_string(&bus))
        });
        let major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        Ok(DeviceInfo {
            ordinal,
            name: buffer_string(&name),
            arch: format!("sm_{major}{minor}"),
            total_memory: total as u64,
            pci_bus_id,
            multiprocessors: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(1) as u32,
            max_threads_per_multiprocessor: attr(
                CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
            )?
            .max(32) as u32,
            integrated: attr(CU_DEVICE_ATTRIBUTE_INTEGRATED)? != 0,
        })
    }

    fn device(&self, ordinal: u32) -> GpuResult<CuDevice> {
        let mut device: CuDevice = 0;
        // SAFETY: valid out-pointer.
        self.check("cuDeviceGet", unsafe {
            (self.api.cuDeviceGet)(&mut device, ordinal as c_int)
        })?;
        Ok(device)
    }
}

/// Names of the driver errors this layer meets, for drivers whose `cuGetErrorName` fails.
pub(crate) fn cuda_error_name(code: i32) -> &'static str {
    match code {
        0 => "CUDA_SUCCESS",
        1 => "CUDA_ERROR_INVALID_VALUE",
        2 => "CUDA_ERROR_OUT_OF_MEMORY",
        3 => "CUDA_ERROR_NOT_INITIALIZED",
        4 => "CUDA_ERROR_DEINITIALIZED",
        34 => "CUDA_ERROR_STUB_LIBRARY",
        35 => "CUDA_ERROR_INSUFFICIENT_DRIVER",
        100 => "CUDA_ERROR_NO_DEVICE",
        101 => "CUDA_ERROR_INVALID_DEVICE",
        200 => "CUDA_ERROR_INVALID_IMAGE",
        209 => "CUDA_ERROR_NO_BINARY_FOR_GPU",
        218 => "CUDA_ERROR_INVALID_PTX",
        222 => "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
        500 => "CUDA_ERROR_NOT_FOUND",
        700 => "CUDA_ERROR_ILLEGAL_ADDRESS",
        701 => "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
        702 => "CUDA_ERROR_LAUNCH_TIMEOUT",
        719 => "CUDA_ERROR_LAUNCH_FAILED",
        999 => "CUDA_ERROR_UNKNOWN",
        _ => "CUDA_ERROR",
    }
}

/// The CUDA implementation of [`DeviceRuntime`], bound to one device through its primary context.
pub(crate) struct CudaBackend {
    driver: Arc<CudaDriver>,
    info: DeviceInfo,
}

impl CudaBackend {
    /// Retains the device's primary context and makes it current on this thread.
    pub(crate) fn new(driver: Arc<CudaDriver>, ordinal: u32) -> GpuResult<CudaBackend> {
        let count = driver.init_and_count()?;
        if ordinal >= count {
            return Err(GpuError::DeviceOutOfRange {
                requested: ordinal,
                count,
            });
        }
        let info = driver.device_info(ordinal)?;
        let device = driver.device(ordinal)?;
        let mut context: Raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer and device handle.
        driver.check("cuDevicePrimaryCtxRetain", unsafe {
            (driver.api.cuDevicePrimaryCtxRetain)(&mut context, device)
        })?;
        // SAFETY: the context was just retained.
        driver.check("cuCtxSetCurrent", unsafe {
            (driver.api.cuCtxSetCurrent)(context)
        })?;
        Ok(CudaBackend { driver, info })
    }

    fn api(&self) -> &CudaApi {
        &self.driver.api
    }

    fn check(&self, api: &'static str, code: CuResult) -> GpuResult<()> {
        self.driver.check(api, code)
    }
}

fn raw(handle: Handle) -> Raw {
    handle.0 as Raw
}

impl DeviceRuntime for CudaBackend {
    fn kind(&self) -> RuntimeKind {
        RuntimeKind::Cuda
    }

    fn device(&self) -> &DeviceInfo {
        &self.info
    }

    fn versions(&self) -> RuntimeVersions {
        RuntimeVersions {
            driver: Some(format_cuda_version(self.driver.version)),
            runtime: Some(format_cuda_version(self.driver.version)),
            library: Some(self.driver.lib.path().display().to_string()),
        }
    }

    fn mem_info(&self) -> GpuResult<MemInfo> {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: valid out-pointers; the context is current.
        self.check("cuMemGetInfo_v2", unsafe {
            (self.api().cuMemGetInfo_v2)(&mut free, &mut total)
        })?;
        Ok(MemInfo {
            free: free as u64,
            total: total as u64,
        })
    }

    fn alloc(&self, bytes: usize) -> GpuResult<DevicePtr> {
        let mut ptr: CuPtr = 0;
        // SAFETY: valid out-pointer.
        self.check("cuMemAlloc_v2", unsafe {
            (self.api().cuMemAlloc_v2)(&mut ptr, bytes)
        })?;
        Ok(ptr)
    }

    fn free(&self, ptr: DevicePtr) -> GpuResult<()> {
        // SAFETY: the pointer came from cuMemAlloc_v2 (owned by a DeviceBuffer).
        self.check("cuMemFree_v2", unsafe { (self.api().cuMemFree_v2)(ptr) })
    }

    fn alloc_pinned(&self, bytes: usize) -> GpuResult<*mut u8> {
        let mut ptr: Raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer; flags 0 is the default page-locked allocation.
        self.check("cuMemHostAlloc", unsafe {
            (self.api().cuMemHostAlloc)(&mut ptr, bytes, 0)
        })?;
        Ok(ptr.cast())
    }

    fn free_pinned(&self, ptr: *mut u8) -> GpuResult<()> {
        // SAFETY: the pointer came from cuMemHostAlloc (owned by a PinnedBuffer).
        self.check("cuMemFreeHost", unsafe {
            (self.api().cuMemFreeHost)(ptr.cast())
        })
    }

    fn htod(&self, dst: DevicePtr, src: &[u8]) -> GpuResult<()> {
        // SAFETY: `src` is a valid slice for the duration of this synchronous copy.
        self.check("cuMemcpyHtoD_v2", unsafe {
            (self.api().cuMemcpyHtoD_v2)(dst, src.as_ptr().cast(), src.len())
        })
    }

    fn dtoh(&self, dst: &mut [u8], src: DevicePtr) -> GpuResult<()> {
        // SAFETY: `dst` is a valid, exclusively borrowed slice for this synchronous copy.
        self.check("cuMemcpyDtoH_v2", unsafe {
            (self.api().cuMemcpyDtoH_v2)(dst.as_mut_ptr().cast(), src, dst.len())
        })
    }

    fn dtod(&self, dst: DevicePtr, src: DevicePtr, bytes: usize) -> GpuResult<()> {
        // SAFETY: device addresses only; the driver validates them.
        self.check("cuMemcpyDtoD_v2", unsafe {
            (self.api().cuMemcpyDtoD_v2)(dst, src, bytes)
        })
    }

    unsafe fn htod_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        bytes: usize,
        stream: Handle,
    ) -> GpuResult<()> {
        // SAFETY: the caller keeps `src` valid until the stream is synchronized.
        self.check("cuMemcpyHtoDAsync_v2", unsafe {
            (self.api().cuMemcpyHtoDAsync_v2)(dst, src.cast(), bytes, raw(stream))
        })
    }

    unsafe fn dtoh_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        bytes: usize,
        stream: Handle,
    ) -> GpuResult<()> {
        // SAFETY: the caller keeps `dst` valid until the stream is synchronized.
        self.check("cuMemcpyDtoHAsync_v2", unsafe {
            (self.api().cuMemcpyDtoHAsync_v2)(dst.cast(), src, bytes, raw(stream))
        })
    }

    fn dtod_async(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: usize,
        stream: Handle,
    ) -> GpuResult<()> {
        // SAFETY: device addresses only.
        self.check("cuMemcpyDtoDAsync_v2", unsafe {
            (self.api().cuMemcpyDtoDAsync_v2)(dst, src, bytes, raw(stream))
        })
    }

    fn memset_d8(&self, dst: DevicePtr, value: u8, bytes: usize) -> GpuResult<()> {
        // SAFETY: device address only.
        self.check("cuMemsetD8_v2", unsafe {
            (self.api().cuMemsetD8_v2)(dst, value, bytes)
        })
    }

    fn stream_create(&self) -> GpuResult<Handle> {
        let mut stream: Raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        self.check("cuStreamCreate", unsafe {
            (self.api().cuStreamCreate)(&mut stream, 0)
        })?;
        Ok(Handle(stream as usize))
    }

    fn stream_destroy(&self, stream: Handle) -> GpuResult<()> {
        // SAFETY: handle from cuStreamCreate, destroyed once by its owner.
        self.check("cuStreamDestroy_v2", unsafe {
            (self.api().cuStreamDestroy_v2)(raw(stream))
        })
    }

    fn stream_synchronize(&self, stream: Handle) -> GpuResult<()> {
        // SAFETY: handle from cuStreamCreate (or null for the default stream).
        self.check("cuStreamSynchronize", unsafe {
            (self.api().cuStreamSynchronize)(raw(stream))
        })
    }

    fn event_create(&self) -> GpuResult<Handle> {
        let mut event: Raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer; flags 0 keeps timing enabled.
        self.check("cuEventCreate", unsafe {
            (self.api().cuEventCreate)(&mut event, 0)
        })?;
        Ok(Handle(event as usize))
    }

    fn event_destroy(&self, event: Handle) -> GpuResult<()> {
        // SAFETY: handle from cuEventCreate, destroyed once by its owner.
        self.check("cuEventDestroy_v2", unsafe {
            (self.api().cuEventDestroy_v2)(raw(event))
        })
    }

    fn event_record(&self, event: Handle, stream: Handle) -> GpuResult<()> {
        // SAFETY: handles from cuEventCreate / cuStreamCreate.
        self.check("cuEventRecord", unsafe {
            (self.api().cuEventRecord)(raw(event), raw(stream))
        })
    }

    fn event_synchronize(&self, event: Handle) -> GpuResult<()> {
        // SAFETY: handle from cuEventCreate.
        self.check("cuEventSynchronize", unsafe {
            (self.api().cuEventSynchronize)(raw(event))
        })
    }

    fn event_elapsed_ms(&self, start: Handle, end: Handle) -> GpuResult<f32> {
        let mut ms: f32 = 0.0;
        let (name, f) = match (
            self.api().cuEventElapsedTime_v2,
            self.api().cuEventElapsedTime,
        ) {
            (Some(f), _) => ("cuEventElapsedTime_v2", f),
            (None, Some(f)) => ("cuEventElapsedTime", f),
            // Checked at load time; kept as an error rather than a panic all the same.
            (None, None) => {
                return Err(GpuError::InvalidArgument(
                    "no cuEventElapsedTime entry point".into(),
                ));
            }
        };
        // SAFETY: valid out-pointer and event handles.
        self.check(name, unsafe { f(&mut ms, raw(start), raw(end)) })?;
        Ok(ms)
    }

    fn module_load(&self, image: &ModuleImage) -> GpuResult<Handle> {
        let bytes: Vec<u8> = match image {
            ModuleImage::Ptx(text) => {
                let mut bytes = text.as_bytes().to_vec();
                bytes.push(0);
                bytes
            }
            ModuleImage::Cubin(bytes) => bytes.clone(),
            ModuleImage::CodeObject(_) => {
                return Err(GpuError::InvalidArgument(
                    "an AMD code object cannot be loaded by the CUDA driver".into(),
                ));
            }
        };
        let mut module: Raw = std::ptr::null_mut();
        if let Some(load_ex) = self.api().cuModuleLoadDataEx {
            // Ask for the JIT error log, so a rejected PTX says why.
            let mut log = vec![0u8; 8192];
            let mut options = [CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
            let mut values: [Raw; 2] = [log.as_mut_ptr().cast(), log.len() as Raw];
            // SAFETY: the image is NUL-terminated PTX or a cubin; the option arrays have two
            // entries each and the log buffer outlives the call.
            let rc = unsafe {
                load_ex(
                    &mut module,
                    bytes.as_ptr().cast(),
                    options.len() as c_uint,
                    options.as_mut_ptr(),
                    values.as_mut_ptr(),
                )
            };
            return match self.check("cuModuleLoadDataEx", rc) {
                Ok(()) => Ok(Handle(module as usize)),
                Err(GpuError::Api {
                    api,
                    code,
                    name,
                    description,
                }) => {
                    let jit = buffer_string(&log);
                    Err(GpuError::Api {
                        api,
                        code,
                        name,
                        description: if jit.is_empty() {
                            description
                        } else {
                            format!("{description}; JIT log: {jit}")
                        },
                    })
                }
                Err(other) => Err(other),
            };
        }
        // SAFETY: the image is NUL-terminated PTX or a cubin that outlives the call.
        self.check("cuModuleLoadData", unsafe {
            (self.api().cuModuleLoadData)(&mut module, bytes.as_ptr().cast())
        })?;
        Ok(Handle(module as usize))
    }

    fn module_unload(&self, module: Handle) -> GpuResult<()> {
        // SAFETY: handle from cuModuleLoadData*, unloaded once by its owner.
        self.check("cuModuleUnload", unsafe {
            (self.api().cuModuleUnload)(raw(module))
        })
    }

    fn module_function(&self, module: Handle, name: &str) -> GpuResult<Handle> {
        let c_name = std::ffi::CString::new(name)
            .map_err(|_| GpuError::InvalidArgument(format!("kernel name {name:?}")))?;
        let mut function: Raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer, module handle and NUL-terminated name.
        self.check("cuModuleGetFunction", unsafe {
            (self.api().cuModuleGetFunction)(&mut function, raw(module), c_name.as_ptr())
        })?;
        Ok(Handle(function as usize))
    }

    fn launch(
        &self,
        function: Handle,
        grid: u32,
        block: u32,
        args: &[KernelArg],
        stream: Handle,
    ) -> GpuResult<()> {
        let mut pack = ArgPack::new(args);
        // SAFETY: the argument pack holds one slot per kernel parameter and lives through the
        // call (the driver copies the values at launch).
        self.check("cuLaunchKernel", unsafe {
            (self.api().cuLaunchKernel)(
                raw(function),
                grid,
                1,
                1,
                block,
                1,
                1,
                0,
                raw(stream),
                pack.as_ptr(),
                std::ptr::null_mut(),
            )
        })
    }

    fn synchronize(&self) -> GpuResult<()> {
        // SAFETY: no arguments; the context is current.
        self.check("cuCtxSynchronize", unsafe {
            (self.api().cuCtxSynchronize)()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_format_like_nvidia_smi() {
        assert_eq!(format_cuda_version(13000), "13.0");
        assert_eq!(format_cuda_version(12080), "12.8");
        assert_eq!(format_cuda_version(11040), "11.4");
    }

    #[test]
    fn error_names_cover_the_codes_we_meet() {
        assert_eq!(cuda_error_name(100), "CUDA_ERROR_NO_DEVICE");
        assert_eq!(cuda_error_name(222), "CUDA_ERROR_UNSUPPORTED_PTX_VERSION");
        assert_eq!(cuda_error_name(12345), "CUDA_ERROR");
    }
}
