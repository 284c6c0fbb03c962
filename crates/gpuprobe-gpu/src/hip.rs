//! The HIP runtime (`libamdhip64.so.N`), loaded at run time, and the HIP [`DeviceRuntime`].
//!
//! ABI pitfalls handled here (`docs/native.md`, "HIP ABI pitfalls handled"):
//! - `hipDeviceProp_t` changed layout in ROCm 6.0 and `dlsym("hipGetDeviceProperties")` returns
//!   the legacy layout. Device facts therefore come from `hipDeviceGetAttribute`,
//!   `hipDeviceGetName` and `hipDeviceGetPCIBusId`; only the gcnArchName is read from the
//!   properties struct, through `hipGetDevicePropertiesR0600` when it exists (offset 1160,
//!   llvm/llvm-project#167695) or the legacy entry point (offset 396), and validated by its
//!   `gfx` prefix, with a scan of the struct as the last resort.
//! - The attribute numbers are those of the ROCm 5.0+ `hipDeviceAttribute_t` (stable since
//!   5.0, which keeps retired names as `Unused` placeholders).
//! - On a host with a HIP runtime but no ROCm driver (an NVIDIA machine with a distro
//!   `libamdhip64.so.5`), `hipInit`/`hipGetDeviceCount` fail: that is reported as "present,
//!   no device", never a crash of the supervisor (HIP is only initialised in the worker).

use std::ffi::{CString, c_char, c_int, c_uint, c_void};
use std::sync::Arc;

use crate::backend::{
    DeviceInfo, DevicePtr, DeviceRuntime, Handle, KernelArg, MemInfo, ModuleImage, RuntimeKind,
    RuntimeVersions,
};
use crate::error::{GpuError, GpuResult, LoadError};
use crate::ffi::{ArgPack, api_table, buffer_string, c_string};
use crate::loader::{LibraryKind, LoadOutcome, OpenedLibrary, SearchConfig, load_first};

type HipError = c_int;
type Raw = *mut c_void;

/// Oldest HIP major version supported (the attribute enum used here dates from ROCm 5.0).
pub(crate) const MIN_HIP_MAJOR: i32 = 5;

const HIP_SUCCESS: HipError = 0;
const ATTR_INTEGRATED: c_int = 16;
const ATTR_MAX_THREADS_PER_MULTIPROCESSOR: c_int = 57;
const ATTR_MULTIPROCESSOR_COUNT: c_int = 63;
/// Byte offset of `gcnArchName` in the ROCm 6.0+ (`R0600`) `hipDeviceProp_t`.
pub(crate) const GCN_ARCH_NAME_OFFSET_R0600: usize = 1160;
/// Byte offset of `gcnArchName` in the legacy (`R0000`) `hipDeviceProp_t`.
pub(crate) const GCN_ARCH_NAME_OFFSET_R0000: usize = 396;
const PROPS_BUFFER_BYTES: usize = 8192;

api_table! {
    /// Entry points of the HIP runtime used here.
    struct HipApi {
        required {
            hipInit: fn(c_uint) -> HipError;
            hipDriverGetVersion: fn(*mut c_int) -> HipError;
            hipRuntimeGetVersion: fn(*mut c_int) -> HipError;
            hipGetDeviceCount: fn(*mut c_int) -> HipError;
            hipSetDevice: fn(c_int) -> HipError;
            hipDeviceGetName: fn(*mut c_char, c_int, c_int) -> HipError;
            hipDeviceGetAttribute: fn(*mut c_int, c_int, c_int) -> HipError;
            hipDeviceTotalMem: fn(*mut usize, c_int) -> HipError;
            hipMemGetInfo: fn(*mut usize, *mut usize) -> HipError;
            hipMalloc: fn(*mut Raw, usize) -> HipError;
            hipFree: fn(Raw) -> HipError;
            hipHostFree: fn(Raw) -> HipError;
            hipMemcpyHtoD: fn(Raw, Raw, usize) -> HipError;
            hipMemcpyDtoH: fn(Raw, Raw, usize) -> HipError;
            hipMemcpyDtoD: fn(Raw, Raw, usize) -> HipError;
            hipMemcpyHtoDAsync: fn(Raw, Raw, usize, Raw) -> HipError;
            hipMemcpyDtoHAsync: fn(Raw, Raw, usize, Raw) -> HipError;
            hipMemcpyDtoDAsync: fn(Raw, Raw, usize, Raw) -> HipError;
            hipMemsetD8: fn(Raw, u8, usize) -> HipError;
            hipStreamCreate: fn(*mut Raw) -> HipError;
            hipStreamDestroy: fn(Raw) -> HipError;
            hipStreamSynchronize: fn(Raw) -> HipError;
            hipEventCreate: fn(*mut Raw) -> HipError;
            hipEventDestroy: fn(Raw) -> HipError;
            hipEventRecord: fn(Raw, Raw) -> HipError;
            hipEventSynchronize: fn(Raw) -> HipError;
            hipEventElapsedTime: fn(*mut f32, Raw, Raw) -> HipError;
            hipModuleLoadData: fn(*mut Raw, *const c_void) -> HipError;
            hipModuleUnload: fn(Raw) -> HipError;
            hipModuleGetFunction: fn(*mut Raw, Raw, *const c_char) -> HipError;
            hipModuleLaunchKernel: fn(Raw, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, Raw, *mut Raw, *mut Raw) -> HipError;
            hipDeviceSynchronize: fn() -> HipError;
        }
        optional {
            hipGetErrorName: fn(HipError) -> *const c_char;
            hipGetErrorString: fn(HipError) -> *const c_char;
            hipHostMalloc: fn(*mut Raw, usize, c_uint) -> HipError;
            hipHostAlloc: fn(*mut Raw, usize, c_uint) -> HipError;
            hipDeviceGetPCIBusId: fn(*mut c_char, c_int, c_int) -> HipError;
            hipGetDevicePropertiesR0600: fn(*mut c_void, c_int) -> HipError;
            hipGetDeviceProperties: fn(*mut c_void, c_int) -> HipError;
        }
    }
}

/// The loaded HIP runtime library.
pub struct HipRuntime {
    lib: OpenedLibrary,
    api: HipApi,
    runtime_version: Option<i32>,
}

impl std::fmt::Debug for HipRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HipRuntime")
            .field("lib", &self.lib)
            .field("runtime_version", &self.runtime_version)
            .finish()
    }
}

/// `60342134` → `6.3.42134` (HIP_VERSION = major·10⁷ + minor·10⁵ + patch).
pub(crate) fn format_hip_version(version: i32) -> String {
    format!(
        "{}.{}.{}",
        version / 10_000_000,
        (version / 100_000) % 100,
        version % 100_000
    )
}

/// The major number of a HIP_VERSION integer.
pub(crate) fn hip_major(version: i32) -> i32 {
    version / 10_000_000
}

impl HipRuntime {
    /// Finds and opens the HIP runtime, resolves its entry points and checks its version
    /// against the soname.
    pub fn load(cfg: &SearchConfig) -> LoadOutcome<Arc<HipRuntime>> {
        load_first(LibraryKind::HipRuntime, cfg, "hipInit", |lib| {
            let api = HipApi::resolve(&lib)?;
            if api.hipHostMalloc.is_none() && api.hipHostAlloc.is_none() {
                return Err(LoadError::MissingSymbol {
                    library: LibraryKind::HipRuntime.name(),
                    path: lib.path(),
                    symbol: "hipHostMalloc or hipHostAlloc".into(),
                });
            }
            let mut version: c_int = 0;
            // SAFETY: writes one int. Some runtimes initialise themselves here and fail
            // without a driver; that is not a version problem, so a failure leaves the
            // version unknown instead of rejecting the library.
            let rc = unsafe { (api.hipRuntimeGetVersion)(&mut version) };
            let runtime_version = (rc == HIP_SUCCESS && version > 0).then_some(version);
            if let Some(version) = runtime_version {
                let major = hip_major(version);
                if major < MIN_HIP_MAJOR {
                    return Err(LoadError::TooOld {
                        library: LibraryKind::HipRuntime.name(),
                        path: lib.path(),
                        found: format_hip_version(version),
                        required: format!("{MIN_HIP_MAJOR}.0"),
                    });
                }
                if let Some(soname) = lib.soname_major()
                    && soname as i32 != major
                {
                    return Err(LoadError::VersionMismatch {
                        library: LibraryKind::HipRuntime.name(),
                        path: lib.path(),
                        detail: format!(
                            "file is soname version {soname} but hipRuntimeGetVersion says {}",
                            format_hip_version(version)
                        ),
                    });
                }
            }
            Ok(Arc::new(HipRuntime {
                lib,
                api,
                runtime_version,
            }))
        })
    }

    /// The library file in use.
    pub fn library(&self) -> &OpenedLibrary {
        &self.lib
    }

    /// HIP_VERSION of the runtime, when it could be read.
    pub fn runtime_version(&self) -> Option<i32> {
        self.runtime_version
    }

    /// Turns a result code into `Ok` or a [`GpuError::Api`] with the runtime's own words.
    pub(crate) fn check(&self, api: &'static str, code: HipError) -> GpuResult<()> {
        if code == HIP_SUCCESS {
            return Ok(());
        }
        // SAFETY: both return pointers to static strings (or null).
        let (name, description) = unsafe {
            (
                self.api.hipGetErrorName.and_then(|f| c_string(f(code))),
                self.api.hipGetErrorString.and_then(|f| c_string(f(code))),
            )
        };
        Err(GpuError::Api {
            api,
            code,
            name: name.unwrap_or_else(|| hip_error_name(code).to_string()),
            description: description.unwrap_or_default(),
        })
    }

    /// `hipInit(0)`, then the number of devices.
    pub fn init_and_count(&self) -> GpuResult<u32> {
        // SAFETY: plain C call.
        self.check("hipInit", unsafe { (self.api.hipInit)(0) })?;
        let mut count: c_int = 0;
        // SAFETY: valid out-pointer.
        self.check("hipGetDeviceCount", unsafe {
            (self.api.hipGetDeviceCount)(&mut count)
        })?;
        Ok(count.max(0) as u32)
    }

    /// The driver version, when the runtime reports one.
    pub fn driver_version(&self) -> Option<i32> {
        let mut version: c_int = 0;
        // SAFETY: valid out-pointer.
        let rc = unsafe { (self.api.hipDriverGetVersion)(&mut version) };
        (rc == HIP_SUCCESS).then_some(version)
    }

    /// Queries one device (after [`HipRuntime::init_and_count`]).
    pub fn device_info(&self, ordinal: u32) -> GpuResult<DeviceInfo> {
        let device = ordinal as c_int;
        let attr = |attribute: c_int| -> GpuResult<i32> {
            let mut value: c_int = 0;
            // SAFETY: valid out-pointer.
            self.check("hipDeviceGetAttribute", unsafe {
                (self.api.hipDeviceGetAttribute)(&mut value, attribute, device)
            })?;
            Ok(value)
        };
        let mut name = [0u8; 256];
        // SAFETY: the buffer length is passed with the buffer.
        self.check("hipDeviceGetName", unsafe {
            (self.api.hipDeviceGetName)(name.as_mut_ptr().cast(), name.len() as c_int, device)
        })?;
        let mut total: usize = 0;
        // SAFETY: valid out-pointer.
        self.check("hipDeviceTotalMem", unsafe {
            (self.api.hipDeviceTotalMem)(&mut total, device)
        })?;
        let pci_bus_id = self.api.hipDeviceGetPCIBusId.and_then(|f| {
            let mut bus = [0u8; 64];
            // SAFETY: the buffer length is passed with the buffer.
            let rc = unsafe { f(bus.as_mut_ptr().cast(), bus.len() as c_int, device) };
            (rc == HIP_SUCCESS).then(|| buffer_string(&bus))
        });
        Ok(DeviceInfo {
            ordinal,
            name: buffer_string(&name),
            arch: self.gcn_arch_name(device).unwrap_or_default(),
            total_memory: total as u64,
            pci_bus_id,
            multiprocessors: attr(ATTR_MULTIPROCESSOR_COUNT)?.max(1) as u32,
            max_threads_per_multiprocessor: attr(ATTR_MAX_THREADS_PER_MULTIPROCESSOR)?.max(32)
                as u32,
            integrated: attr(ATTR_INTEGRATED)? != 0,
        })
    }

    fn gcn_arch_name(&self, device: c_int) -> Option<String> {
        let attempts = [
            (
                self.api.hipGetDevicePropertiesR0600,
                GCN_ARCH_NAME_OFFSET_R0600,
            ),
            (self.api.hipGetDeviceProperties, GCN_ARCH_NAME_OFFSET_R0000),
        ];
        for (entry, offset) in attempts {
            let Some(get_props) = entry else { continue };
            let mut props = vec![0u8; PROPS_BUFFER_BYTES];
            // SAFETY: the buffer is larger than any hipDeviceProp_t layout (about 1.5 KiB).
            let rc = unsafe { get_props(props.as_mut_ptr().cast(), device) };
            if rc != HIP_SUCCESS {
                continue;
            }
            if let Some(name) = arch_name_in_props(&props, offset) {
                return Some(name);
            }
        }
        None
    }
}

/// Reads the gcnArchName from a raw `hipDeviceProp_t`: at `offset` if the text there starts
/// with `gfx`, else the first NUL-terminated `gfx…` string in the struct.
pub(crate) fn arch_name_in_props(props: &[u8], offset: usize) -> Option<String> {
    let read_at = |at: usize| -> Option<String> {
        let tail = props.get(at..)?;
        let end = tail.iter().position(|&b| b == 0)?;
        let text = std::str::from_utf8(&tail[..end]).ok()?;
        let valid = text.len() > 3
            && text.len() < 256
            && text.starts_with("gfx")
            && text[3..]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '+' | '-' | '_'));
        valid.then(|| text.to_string())
    };
    read_at(offset).or_else(|| {
        props
            .windows(3)
            .enumerate()
            .filter(|(i, w)| *w == b"gfx" && (*i == 0 || props[i - 1] == 0))
            .find_map(|(i, _)| read_at(i))
    })
}

/// Names of the HIP errors this layer meets, for runtimes whose `hipGetErrorName` fails.
pub(crate) fn hip_error_name(code: i32) -> &'static str {
    match code {
        0 => "hipSuccess",
        1 => "hipErrorInvalidValue",
        2 => "hipErrorOutOfMemory",
        3 => "hipErrorNotInitialized",
        35 => "hipErrorInsufficientDriver",
        100 => "hipErrorNoDevice",
        101 => "hipErrorInvalidDevice",
        200 => "hipErrorInvalidImage",
        209 => "hipErrorNoBinaryForGpu",
        218 => "hipErrorInvalidKernelFile",
        500 => "hipErrorNotFound",
        700 => "hipErrorIllegalAddress",
        719 => "hipErrorLaunchFailure",
        999 => "hipErrorUnknown",
        _ => "hipError",
    }
}

/// The HIP implementation of [`DeviceRuntime`], bound to one device.
pub(crate) struct HipBackend {
    runtime: Arc<HipRuntime>,
    info: DeviceInfo,
    // HIP's current device is per thread, like CUDA's context: keep the backend on its thread.
    _not_send: std::marker::PhantomData<*mut ()>,
}

impl HipBackend {
    /// Initialises HIP and selects the device on this thread.
    pub(crate) fn new(runtime: Arc<HipRuntime>, ordinal: u32) -> GpuResult<HipBackend> {
        let count = runtime.init_and_count()?;
        if ordinal >= count {
            return Err(GpuError::DeviceOutOfRange {
                requested: ordinal,
                count,
            });
        }
        // SAFETY: plain C call with an ordinal below the device count.
        runtime.check("hipSetDevice", unsafe {
            (runtime.api.hipSetDevice)(ordinal as c_int)
        })?;
        let info = runtime.device_info(ordinal)?;
        Ok(HipBackend {
            runtime,
            info,
            _not_send: std::marker::PhantomData,
        })
    }

    fn api(&self) -> &HipApi {
        &self.runtime.api
    }

    fn check(&self, api: &'static str, code: HipError) -> GpuResult<()> {
        self.runtime.check(api, code)
    }
}

fn raw(handle: Handle) -> Raw {
    handle.0 as Raw
}

fn dptr(ptr: DevicePtr) -> Raw {
    ptr as Raw
}

impl DeviceRuntime for HipBackend {
    fn kind(&self) -> RuntimeKind {
        RuntimeKind::Hip
    }

    fn device(&self) -> &DeviceInfo {
        &self.info
    }

    fn versions(&self) -> RuntimeVersions {
        RuntimeVersions {
            driver: self.runtime.driver_version().map(|v| v.to_string()),
            runtime: self.runtime.runtime_version.map(format_hip_version),
            library: Some(self.runtime.lib.path().display().to_string()),
        }
    }

    fn mem_info(&self) -> GpuResult<MemInfo> {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: valid out-pointers.
        self.check("hipMemGetInfo", unsafe {
            (self.api().hipMemGetInfo)(&mut free, &mut total)
        })?;
        Ok(MemInfo {
            free: free as u64,
            total: total as u64,
        })
    }

    fn alloc(&self, bytes: usize) -> GpuResult<DevicePtr> {
        let mut ptr: Raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        self.check("hipMalloc", unsafe {
            (self.api().hipMalloc)(&mut ptr, bytes)
        })?;
        Ok(ptr as DevicePtr)
    }

    fn free(&self, ptr: DevicePtr) -> GpuResult<()> {
        // SAFETY: the pointer came from hipMalloc (owned by a DeviceBuffer).
        self.check("hipFree", unsafe { (self.api().hipFree)(dptr(ptr)) })
    }

    fn alloc_pinned(&self, bytes: usize) -> GpuResult<*mut u8> {
        let mut ptr: Raw = std::ptr::null_mut();
        let (name, f) = match (self.api().hipHostMalloc, self.api().hipHostAlloc) {
            (Some(f), _) => ("hipHostMalloc", f),
            (None, Some(f)) => ("hipHostAlloc", f),
            (None, None) => {
                return Err(GpuError::InvalidArgument(
                    "no pinned host allocator in this HIP runtime".into(),
                ));
            }
        };
        // SAFETY: valid out-pointer; flags 0 is the default pinned allocation.
        self.check(name, unsafe { f(&mut ptr, bytes, 0) })?;
        Ok(ptr.cast())
    }

    fn free_pinned(&self, ptr: *mut u8) -> GpuResult<()> {
        // SAFETY: the pointer came from hipHostMalloc/hipHostAlloc (owned by a PinnedBuffer).
        self.check("hipHostFree", unsafe {
            (self.api().hipHostFree)(ptr.cast())
        })
    }

    fn htod(&self, dst: DevicePtr, src: &[u8]) -> GpuResult<()> {
        // SAFETY: `src` is valid for this synchronous copy; HIP does not write through it.
        self.check("hipMemcpyHtoD", unsafe {
            (self.api().hipMemcpyHtoD)(dptr(dst), src.as_ptr() as Raw, src.len())
        })
    }

    fn dtoh(&self, dst: &mut [u8], src: DevicePtr) -> GpuResult<()> {
        // SAFETY: `dst` is valid and exclusively borrowed for this synchronous copy.
        self.check("hipMemcpyDtoH", unsafe {
            (self.api().hipMemcpyDtoH)(dst.as_mut_ptr().cast(), dptr(src), dst.len())
        })
    }

    fn dtod(&self, dst: DevicePtr, src: DevicePtr, bytes: usize) -> GpuResult<()> {
        // SAFETY: device addresses only.
        self.check("hipMemcpyDtoD", unsafe {
            (self.api().hipMemcpyDtoD)(dptr(dst), dptr(src), bytes)
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
        self.check("hipMemcpyHtoDAsync", unsafe {
            (self.api().hipMemcpyHtoDAsync)(dptr(dst), src as Raw, bytes, raw(stream))
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
        self.check("hipMemcpyDtoHAsync", unsafe {
            (self.api().hipMemcpyDtoHAsync)(dst.cast(), dptr(src), bytes, raw(stream))
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
        self.check("hipMemcpyDtoDAsync", unsafe {
            (self.api().hipMemcpyDtoDAsync)(dptr(dst), dptr(src), bytes, raw(stream))
        })
    }

    fn memset_d8(&self, dst: DevicePtr, value: u8, bytes: usize) -> GpuResult<()> {
        // SAFETY: device address only.
        self.check("hipMemsetD8", unsafe {
            (self.api().hipMemsetD8)(dptr(dst), value, bytes)
        })
    }

    fn stream_create(&self) -> GpuResult<Handle> {
        let mut stream: Raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        self.check("hipStreamCreate", unsafe {
            (self.api().hipStreamCreate)(&mut stream)
        })?;
        Ok(Handle(stream as usize))
    }

    fn stream_destroy(&self, stream: Handle) -> GpuResult<()> {
        // SAFETY: handle from hipStreamCreate, destroyed once by its owner.
        self.check("hipStreamDestroy", unsafe {
            (self.api().hipStreamDestroy)(raw(stream))
        })
    }

    fn stream_synchronize(&self, stream: Handle) -> GpuResult<()> {
        // SAFETY: handle from hipStreamCreate (or null for the default stream).
        self.check("hipStreamSynchronize", unsafe {
            (self.api().hipStreamSynchronize)(raw(stream))
        })
    }

    fn event_create(&self) -> GpuResult<Handle> {
        let mut event: Raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        self.check("hipEventCreate", unsafe {
            (self.api().hipEventCreate)(&mut event)
        })?;
        Ok(Handle(event as usize))
    }

    fn event_destroy(&self, event: Handle) -> GpuResult<()> {
        // SAFETY: handle from hipEventCreate, destroyed once by its owner.
        self.check("hipEventDestroy", unsafe {
            (self.api().hipEventDestroy)(raw(event))
        })
    }

    fn event_record(&self, event: Handle, stream: Handle) -> GpuResult<()> {
        // SAFETY: handles from hipEventCreate / hipStreamCreate.
        self.check("hipEventRecord", unsafe {
            (self.api().hipEventRecord)(raw(event), raw(stream))
        })
    }

    fn event_synchronize(&self, event: Handle) -> GpuResult<()> {
        // SAFETY: handle from hipEventCreate.
        self.check("hipEventSynchronize", unsafe {
            (self.api().hipEventSynchronize)(raw(event))
        })
    }

    fn event_elapsed_ms(&self, start: Handle, end: Handle) -> GpuResult<f32> {
        let mut ms: f32 = 0.0;
        // SAFETY: valid out-pointer and event handles.
        self.check("hipEventElapsedTime", unsafe {
            (self.api().hipEventElapsedTime)(&mut ms, raw(start), raw(end))
        })?;
        Ok(ms)
    }

    fn module_load(&self, image: &ModuleImage) -> GpuResult<Handle> {
        let ModuleImage::CodeObject(bytes) = image else {
            return Err(GpuError::InvalidArgument(
                "the HIP runtime loads AMD code objects only".into(),
            ));
        };
        let mut module: Raw = std::ptr::null_mut();
        // SAFETY: the code object outlives the call; valid out-pointer.
        self.check("hipModuleLoadData", unsafe {
            (self.api().hipModuleLoadData)(&mut module, bytes.as_ptr().cast())
        })?;
        Ok(Handle(module as usize))
    }

    fn module_unload(&self, module: Handle) -> GpuResult<()> {
        // SAFETY: handle from hipModuleLoadData, unloaded once by its owner.
        self.check("hipModuleUnload", unsafe {
            (self.api().hipModuleUnload)(raw(module))
        })
    }

    fn module_function(&self, module: Handle, name: &str) -> GpuResult<Handle> {
        let c_name = CString::new(name)
            .map_err(|_| GpuError::InvalidArgument(format!("kernel name {name:?}")))?;
        let mut function: Raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer, module handle and NUL-terminated name.
        self.check("hipModuleGetFunction", unsafe {
            (self.api().hipModuleGetFunction)(&mut function, raw(module), c_name.as_ptr())
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
        // call.
        self.check("hipModuleLaunchKernel", unsafe {
            (self.api().hipModuleLaunchKernel)(
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
        // SAFETY: no arguments.
        self.check("hipDeviceSynchronize", unsafe {
            (self.api().hipDeviceSynchronize)()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hip_versions_decode() {
        assert_eq!(format_hip_version(60342134), "6.3.42134");
        assert_eq!(hip_major(70125001), 7);
        assert_eq!(format_hip_version(50731921), "5.7.31921");
    }

    #[test]
    fn arch_name_at_r0600_offset() {
        let mut props = vec![0u8; 2048];
        props[GCN_ARCH_NAME_OFFSET_R0600..GCN_ARCH_NAME_OFFSET_R0600 + 7]
            .copy_from_slice(b"gfx1100");
        assert_eq!(
            arch_name_in_props(&props, GCN_ARCH_NAME_OFFSET_R0600).as_deref(),
            Some("gfx1100")
        );
    }

    #[test]
    fn arch_name_found_by_scan_when_layout_differs() {
        let mut props = vec![0u8; 2048];
        props[..8].copy_from_slice(b"Radeon\0\0");
        let text = b"gfx90a:sramecc+:xnack-";
        props[396..396 + text.len()].copy_from_slice(text);
        // Asked at the R0600 offset (zeros there), found by the scan.
        assert_eq!(
            arch_name_in_props(&props, GCN_ARCH_NAME_OFFSET_R0600).as_deref(),
            Some("gfx90a:sramecc+:xnack-")
        );
        // Garbage that merely contains "gfx" mid-string is not taken.
        let mut junk = vec![0u8; 64];
        junk[..10].copy_from_slice(b"xxgfx1030\0");
        assert_eq!(arch_name_in_props(&junk, 0), None);
    }

    proptest::proptest! {
        #[test]
        fn arch_scan_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..2048), offset in 0usize..4096) {
            let _ = arch_name_in_props(&bytes, offset);
        }
    }
}
