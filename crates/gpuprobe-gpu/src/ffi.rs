//! The function-table macro shared by the four runtime loaders, and small utilities for C
//! strings and kernel argument arrays.

use std::ffi::{CStr, c_char, c_void};

use crate::backend::KernelArg;

/// Declares a table of C entry points and its eager resolver. Required symbols are looked
/// up at load time, so a missing one is a single [`crate::error::LoadError::MissingSymbol`]
/// naming it; optional ones become `Option`s for the caller to check.
macro_rules! api_table {
    (
        $(#[$meta:meta])*
        struct $name:ident {
            required { $( $req:ident : fn($($rarg:ty),* $(,)?) $(-> $rret:ty)? ; )* }
            optional { $( $opt:ident : fn($($oarg:ty),* $(,)?) $(-> $oret:ty)? ; )* }
        }
    ) => {
        $(#[$meta])*
        #[allow(non_snake_case)]
        pub(crate) struct $name {
            $( pub(crate) $req: unsafe extern "C" fn($($rarg),*) $(-> $rret)?, )*
            $( pub(crate) $opt: Option<unsafe extern "C" fn($($oarg),*) $(-> $oret)?>, )*
        }

        impl $name {
            /// Resolves every entry point of the table from `lib`.
            pub(crate) fn resolve(
                lib: &$crate::loader::OpenedLibrary,
            ) -> Result<Self, $crate::error::LoadError> {
                // SAFETY: each field's type is the C prototype of the symbol of the same name,
                // transcribed from the vendor headers (cuda.h, nvrtc.h, hip_runtime_api.h,
                // hiprtc.h).
                unsafe {
                    Ok($name {
                        $( $req: lib.required(stringify!($req))?, )*
                        $( $opt: lib.optional(stringify!($opt)), )*
                    })
                }
            }
        }
    };
}

pub(crate) use api_table;

/// Copies a C string returned by a runtime into an owned string.
///
/// # Safety
/// `ptr` must be null or point to a NUL-terminated string that stays valid for the call.
pub(crate) unsafe fn c_string(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated per the caller's contract.
    Some(
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// Text of a NUL-terminated byte buffer the runtime filled in.
pub(crate) fn buffer_string(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).trim().to_string()
}

/// Kernel arguments laid out as the launch APIs want them: one 8-byte slot per argument
/// (a 4-byte argument is read from the slot's first bytes, little endian) and an array of
/// pointers to the slots.
pub(crate) struct ArgPack {
    slots: Vec<u64>,
    pointers: Vec<*mut c_void>,
}

impl ArgPack {
    pub(crate) fn new(args: &[KernelArg]) -> ArgPack {
        let slots: Vec<u64> = args
            .iter()
            .map(|a| match *a {
                KernelArg::U32(v) => u64::from(v),
                KernelArg::U64(v) | KernelArg::Ptr(v) => v,
            })
            .collect();
        let mut pack = ArgPack {
            slots,
            pointers: Vec::new(),
        };
        pack.pointers = pack
            .slots
            .iter_mut()
            .map(|slot| (slot as *mut u64).cast::<c_void>())
            .collect();
        pack
    }

    /// The `void**` the launch call takes; valid while `self` lives (the slots live on the
    /// heap, so moving the pack does not move them).
    pub(crate) fn as_ptr(&mut self) -> *mut *mut c_void {
        if self.pointers.is_empty() {
            std::ptr::null_mut()
        } else {
            self.pointers.as_mut_ptr()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arg_pack_points_at_little_endian_slots() {
        let mut pack = ArgPack::new(&[
            KernelArg::U32(0xdead_beef),
            KernelArg::U64(7),
            KernelArg::Ptr(0x1000),
        ]);
        let base = pack.as_ptr();
        // SAFETY: the pack holds three live slots; reading through its own pointers.
        unsafe {
            let first = *(*base).cast::<u32>();
            assert_eq!(first, 0xdead_beef);
            assert_eq!(*(*base.add(1)).cast::<u64>(), 7);
            assert_eq!(*(*base.add(2)).cast::<u64>(), 0x1000);
        }
        assert!(ArgPack::new(&[]).as_ptr().is_null());
    }

    #[test]
    fn buffer_string_stops_at_nul() {
        assert_eq!(buffer_string(b"NVIDIA H100\0garbage"), "NVIDIA H100");
        assert_eq!(buffer_string(b"no nul"), "no nul");
    }
}
