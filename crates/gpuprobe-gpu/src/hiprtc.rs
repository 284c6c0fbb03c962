//! hipRTC, HIP's run-time compiler, loaded at run time. AMD has no portable kernel IR, so
//! every HIP kernel of this crate is compiled here for the device's gcnArchName. Since ROCm
//! 6.0 hipRTC is its own library (`libhiprtc.so.N`) and ROCm 7.0 removed its symbols from
//! `libamdhip64` (ROCm/hip#3821); ROCm 5 kept them in `libamdhip64`, which is searched last.
//! The library next to the loaded HIP runtime is preferred, and a hipRTC whose major version
//! differs from the runtime's is refused.

use std::ffi::{CString, c_char, c_int, c_void};
use std::sync::Arc;

use crate::error::{GpuError, GpuResult, LoadError};
use crate::ffi::{api_table, buffer_string, c_string};
use crate::hip::{HipRuntime, hip_major};
use crate::loader::{LibraryKind, LoadOutcome, OpenedLibrary, SearchConfig, load_first};

type HiprtcResult = c_int;
type Program = *mut c_void;

api_table! {
    /// Entry points of hipRTC used here.
    struct HiprtcApi {
        required {
            hiprtcVersion: fn(*mut c_int, *mut c_int) -> HiprtcResult;
            hiprtcCreateProgram: fn(*mut Program, *const c_char, *const c_char, c_int, *const *const c_char, *const *const c_char) -> HiprtcResult;
            hiprtcCompileProgram: fn(Program, c_int, *const *const c_char) -> HiprtcResult;
            hiprtcGetCodeSize: fn(Program, *mut usize) -> HiprtcResult;
            hiprtcGetCode: fn(Program, *mut c_char) -> HiprtcResult;
            hiprtcGetProgramLogSize: fn(Program, *mut usize) -> HiprtcResult;
            hiprtcGetProgramLog: fn(Program, *mut c_char) -> HiprtcResult;
            hiprtcDestroyProgram: fn(*mut Program) -> HiprtcResult;
        }
        optional {
            hiprtcGetErrorString: fn(HiprtcResult) -> *const c_char;
        }
    }
}

/// The loaded hipRTC library.
pub struct Hiprtc {
    lib: OpenedLibrary,
    api: HiprtcApi,
    version: (i32, i32),
}

impl std::fmt::Debug for Hiprtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hiprtc")
            .field("lib", &self.lib)
            .field("version", &self.version)
            .finish()
    }
}

impl Hiprtc {
    /// Finds and opens hipRTC, preferring the directory of `runtime` and checking that the
    /// major versions agree.
    pub fn load(cfg: &SearchConfig, runtime: Option<&HipRuntime>) -> LoadOutcome<Arc<Hiprtc>> {
        let mut cfg = cfg.clone();
        let runtime_major = runtime.and_then(HipRuntime::runtime_version).map(hip_major);
        if let Some(runtime) = runtime {
            let runtime_path = runtime.library().path();
            if let Some(dir) = runtime_path.parent() {
                cfg.preferred_dirs.insert(0, dir.to_path_buf());
            }
        }
        let outcome = load_first(LibraryKind::Hiprtc, &cfg, "hiprtcVersion", |lib| {
            validate(lib, runtime_major)
        });
        // ROCm 5 carried hipRTC inside libamdhip64: try the runtime's own file last.
        match (&outcome.result, runtime) {
            (Err(LoadError::NotFound { .. }), Some(runtime))
                if runtime_major.is_none_or(|m| m < 6) =>
            {
                let mut inside = SearchConfig::isolated();
                inside
                    .overrides
                    .insert(LibraryKind::Hiprtc, runtime.library().path());
                let mut second = load_first(LibraryKind::Hiprtc, &inside, "hiprtcVersion", |lib| {
                    validate(lib, runtime_major)
                });
                let mut attempts = outcome.attempts;
                attempts.append(&mut second.attempts);
                LoadOutcome {
                    result: second.result.map_err(|_| LoadError::NotFound {
                        library: LibraryKind::Hiprtc.name(),
                        tried: attempts.clone(),
                    }),
                    attempts,
                }
            }
            _ => outcome,
        }
    }

    /// The library file in use.
    pub fn library(&self) -> &OpenedLibrary {
        &self.lib
    }

    /// `(major, minor)`.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    fn error_text(&self, code: HiprtcResult) -> String {
        self.api
            .hiprtcGetErrorString
            // SAFETY: returns a pointer to a static string.
            .and_then(|f| unsafe { c_string(f(code)) })
            .unwrap_or_else(|| format!("hipRTC error {code}"))
    }

    /// Compiles `source` with `options` (`--offload-arch=gfx…`) into a code object.
    pub fn compile(&self, source: &str, options: &[String]) -> GpuResult<Vec<u8>> {
        let compile_error = |code: i32, log: String| GpuError::Compile {
            compiler: "hipRTC",
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
            (self.api.hiprtcCreateProgram)(
                &mut program,
                c_source.as_ptr(),
                c"gpuprobe_kernels.hip".as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return Err(compile_error(rc, self.error_text(rc)));
        }
        let _guard = ProgramGuard {
            api: &self.api,
            program,
        };
        // SAFETY: live program; option pointers outlive the call.
        let rc = unsafe {
            (self.api.hiprtcCompileProgram)(
                program,
                option_ptrs.len() as c_int,
                option_ptrs.as_ptr(),
            )
        };
        if rc != 0 {
            let log = self.log(program);
            let text = if log.is_empty() {
                self.error_text(rc)
            } else {
                format!("{}: {log}", self.error_text(rc))
            };
            return Err(compile_error(rc, text));
        }
        let mut size = 0usize;
        // SAFETY: live program, valid out-pointer.
        let rc = unsafe { (self.api.hiprtcGetCodeSize)(program, &mut size) };
        if rc != 0 {
            return Err(compile_error(rc, self.error_text(rc)));
        }
        let mut code = vec![0u8; size];
        // SAFETY: the buffer has the size hipRTC asked for.
        let rc = unsafe { (self.api.hiprtcGetCode)(program, code.as_mut_ptr().cast()) };
        if rc != 0 {
            return Err(compile_error(rc, self.error_text(rc)));
        }
        Ok(code)
    }

    fn log(&self, program: Program) -> String {
        let mut size = 0usize;
        // SAFETY: live program, valid out-pointer.
        if unsafe { (self.api.hiprtcGetProgramLogSize)(program, &mut size) } != 0 || size == 0 {
            return String::new();
        }
        let mut buf = vec![0u8; size];
        // SAFETY: the buffer has the size hipRTC asked for.
        if unsafe { (self.api.hiprtcGetProgramLog)(program, buf.as_mut_ptr().cast()) } != 0 {
            return String::new();
        }
        buffer_string(&buf)
    }
}

fn validate(lib: OpenedLibrary, runtime_major: Option<i32>) -> Result<Arc<Hiprtc>, LoadError> {
    let api = HiprtcApi::resolve(&lib)?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints.
    let rc = unsafe { (api.hiprtcVersion)(&mut major, &mut minor) };
    if rc != 0 {
        return Err(LoadError::VersionMismatch {
            library: LibraryKind::Hiprtc.name(),
            path: lib.path(),
            detail: format!("hiprtcVersion returned error {rc}"),
        });
    }
    if let Some(runtime_major) = runtime_major
        && runtime_major != major
    {
        return Err(LoadError::VersionMismatch {
            library: LibraryKind::Hiprtc.name(),
            path: lib.path(),
            detail: format!(
                "hipRTC {major}.{minor} does not match HIP runtime major version {runtime_major}"
            ),
        });
    }
    Ok(Arc::new(Hiprtc {
        lib,
        api,
        version: (major, minor),
    }))
}

struct ProgramGuard<'a> {
    api: &'a HiprtcApi,
    program: Program,
}

impl Drop for ProgramGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: the program was created by hiprtcCreateProgram and is destroyed once.
        unsafe {
            (self.api.hiprtcDestroyProgram)(&mut self.program);
        }
    }
}
