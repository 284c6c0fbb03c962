//! NVRTC, NVIDIA's run-time compiler, loaded at run time. Optional: the memtest and copy
//! checks use the embedded PTX; NVRTC only serves the `native.rtc.compile` probe (and the
//! regeneration of the embedded PTX). An NVRTC newer than the driver emits PTX the driver
//! rejects (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION`), so a cubin for the device's exact
//! architecture is preferred when this NVRTC can produce one.

use std::ffi::{CString, c_char, c_int, c_void};
use std::sync::Arc;

use crate::error::{GpuError, GpuResult};
use crate::ffi::{api_table, c_string};
use crate::loader::{LibraryKind, LoadOutcome, OpenedLibrary, SearchConfig, load_first};

type NvrtcResult = c_int;
type Program = *mut c_void;

api_table! {
    /// Entry points of NVRTC used here.
    struct NvrtcApi {
        required {
            nvrtcVersion: fn(*mut c_int, *mut c_int) -> NvrtcResult;
            nvrtcCreateProgram: fn(*mut Program, *const c_char, *const c_char, c_int, *const *const c_char, *const *const c_char) -> NvrtcResult;
            nvrtcCompileProgram: fn(Program, c_int, *const *const c_char) -> NvrtcResult;
            nvrtcGetPTXSize: fn(Program, *mut usize) -> NvrtcResult;
            nvrtcGetPTX: fn(Program, *mut c_char) -> NvrtcResult;
            nvrtcGetProgramLogSize: fn(Program, *mut usize) -> NvrtcResult;
            nvrtcGetProgramLog: fn(Program, *mut c_char) -> NvrtcResult;
            nvrtcDestroyProgram: fn(*mut Program) -> NvrtcResult;
        }
        optional {
            nvrtcGetErrorString: fn(NvrtcResult) -> *const c_char;
            nvrtcGetCUBINSize: fn(Program, *mut usize) -> NvrtcResult;
            nvrtcGetCUBIN: fn(Program, *mut c_char) -> NvrtcResult;
        }
    }
}

/// The loaded NVRTC library.
pub struct Nvrtc {
    lib: OpenedLibrary,
    api: NvrtcApi,
    version: (i32, i32),
}

impl std::fmt::Debug for Nvrtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvrtc")
            .field("lib", &self.lib)
            .field("version", &self.version)
            .finish()
    }
}

/// What NVRTC produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NvrtcOutput {
    /// PTX text.
    Ptx(String),
    /// A cubin for one architecture.
    Cubin(Vec<u8>),
}

impl Nvrtc {
    /// Finds and opens NVRTC.
    pub fn load(cfg: &SearchConfig) -> LoadOutcome<Arc<Nvrtc>> {
        load_first(LibraryKind::Nvrtc, cfg, "nvrtcVersion", |lib| {
            let api = NvrtcApi::resolve(&lib)?;
            let (mut major, mut minor) = (0, 0);
            // SAFETY: nvrtcVersion writes two ints.
            let rc = unsafe { (api.nvrtcVersion)(&mut major, &mut minor) };
            if rc != 0 {
                return Err(crate::error::LoadError::VersionMismatch {
                    library: LibraryKind::Nvrtc.name(),
                    path: lib.path(),
                    detail: format!("nvrtcVersion returned error {rc}"),
                });
            }
            Ok(Arc::new(Nvrtc {
                lib,
                api,
                version: (major, minor),
            }))
        })
    }

    /// The library file in use.
    pub fn library(&self) -> &OpenedLibrary {
        &self.lib
    }

    /// `(major, minor)`.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// Whether this NVRTC can emit cubins.
    pub fn can_emit_cubin(&self) -> bool {
        self.api.nvrtcGetCUBINSize.is_some() && self.api.nvrtcGetCUBIN.is_some()
    }

    fn error_text(&self, code: NvrtcResult) -> String {
        self.api
            .nvrtcGetErrorString
            // SAFETY: returns a pointer to a static string.
            .and_then(|f| unsafe { c_string(f(code)) })
            .unwrap_or_else(|| format!("NVRTC error {code}"))
    }

    /// Compiles `source` with `options`. `cubin` asks for a cubin (needs `-arch=sm_XY`)
    /// instead of PTX.
    pub fn compile(&self, source: &str, options: &[String], cubin: bool) -> GpuResult<NvrtcOutput> {
        let compile_error = |code: i32, log: String| GpuError::Compile {
            compiler: "NVRTC",
            code,
            log,
        };
        let c_source = CString::new(source)
            .map_err(|_| GpuError::InvalidArgument("kernel source contains NUL".into()))?;
        let c_options: Vec<CString> = options
            .iter()
            .map(|o| CString::new(o.as_str()))
            .collect::<Result<_, _>>()
            .map_err(|_| GpuError::InvalidArgument("compiler option contains NUL".into()))?;
        let option_ptrs: Vec<*const c_char> = c_options.iter().map(|o| o.as_ptr()).collect();
        let mut program: Program = std::ptr::null_mut();
        // SAFETY: NUL-terminated source and name; no headers.
        let rc = unsafe {
            (self.api.nvrtcCreateProgram)(
                &mut program,
                c_source.as_ptr(),
                c"gpuprobe_kernels.cu".as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return Err(compile_error(rc, self.error_text(rc)));
        }
        let guard = ProgramGuard {
            api: &self.api,
            program,
        };
        // SAFETY: the program is live; option pointers outlive the call.
        let rc = unsafe {
            (self.api.nvrtcCompileProgram)(
                program,
                option_ptrs.len() as c_int,
                option_ptrs.as_ptr(),
            )
        };
        if rc != 0 {
            let log = self.log(program);
            drop(guard);
            let text = if log.is_empty() {
                self.error_text(rc)
            } else {
                format!("{}: {log}", self.error_text(rc))
            };
            return Err(compile_error(rc, text));
        }
        let output = if cubin {
            let (Some(size_fn), Some(get_fn)) =
                (self.api.nvrtcGetCUBINSize, self.api.nvrtcGetCUBIN)
            else {
                return Err(compile_error(-1, "this NVRTC cannot emit cubins".into()));
            };
            let mut size = 0usize;
            // SAFETY: live program, valid out-pointer.
            let rc = unsafe { size_fn(program, &mut size) };
            if rc != 0 {
                return Err(compile_error(rc, self.error_text(rc)));
            }
            let mut buf = vec![0u8; size];
            // SAFETY: the buffer has the size NVRTC asked for.
            let rc = unsafe { get_fn(program, buf.as_mut_ptr().cast()) };
            if rc != 0 {
                return Err(compile_error(rc, self.error_text(rc)));
            }
            NvrtcOutput::Cubin(buf)
        } else {
            let mut size = 0usize;
            // SAFETY: live program, valid out-pointer.
            let rc = unsafe { (self.api.nvrtcGetPTXSize)(program, &mut size) };
            if rc != 0 {
                return Err(compile_error(rc, self.error_text(rc)));
            }
            let mut buf = vec![0u8; size];
            // SAFETY: the buffer has the size NVRTC asked for.
            let rc = unsafe { (self.api.nvrtcGetPTX)(program, buf.as_mut_ptr().cast()) };
            if rc != 0 {
                return Err(compile_error(rc, self.error_text(rc)));
            }
            NvrtcOutput::Ptx(crate::ffi::buffer_string(&buf))
        };
        drop(guard);
        Ok(output)
    }

    fn log(&self, program: Program) -> String {
        let mut size = 0usize;
        // SAFETY: live program, valid out-pointer.
        if unsafe { (self.api.nvrtcGetProgramLogSize)(program, &mut size) } != 0 || size == 0 {
            return String::new();
        }
        let mut buf = vec![0u8; size];
        // SAFETY: the buffer has the size NVRTC asked for.
        if unsafe { (self.api.nvrtcGetProgramLog)(program, buf.as_mut_ptr().cast()) } != 0 {
            return String::new();
        }
        crate::ffi::buffer_string(&buf)
    }
}

struct ProgramGuard<'a> {
    api: &'a NvrtcApi,
    program: Program,
}

impl Drop for ProgramGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: the program was created by nvrtcCreateProgram and is destroyed once.
        unsafe {
            (self.api.nvrtcDestroyProgram)(&mut self.program);
        }
    }
}
