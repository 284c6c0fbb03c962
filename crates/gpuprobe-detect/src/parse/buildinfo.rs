//! Versions of the build and runtime environment around the GPU stack, read the way
//! `torch.utils.collect_env` reads them where that is possible without running foreign
//! code: compiler banners (`gcc`, `clang`, `cmake`, `nvcc`, `hipcc` `--version`), the
//! glibc release string inside `libc.so.6`, `#define` version macros of library headers
//! (`cudnn_version.h`, `nccl.h`, `miopen/version.h`, ...), `lscpu`'s `Key: value` lines,
//! and kernel CPU lists (`0-3,8`).
//!
//! Real samples: `fixtures/env/` (each with its provenance). Every function is total: odd
//! input gives `None` or an empty result, never a panic.

use std::collections::BTreeMap;

/// A compiler or build tool whose `--version` output is understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `gcc --version`: `gcc (Debian 12.2.0-14+deb12u1) 12.2.0`.
    Gcc,
    /// `clang --version`: `Debian clang version 14.0.6`, `AMD clang version 18.0.0git (...)`.
    Clang,
    /// `cmake --version`: `cmake version 3.28.3`.
    Cmake,
    /// `nvcc --version`: `Cuda compilation tools, release 13.0, V13.0.88`.
    Nvcc,
    /// `hipcc --version`: `HIP version: 6.2.41133-dd7f95766`.
    Hipcc,
}

impl Tool {
    /// Every tool, in the order they are reported.
    pub const ALL: [Tool; 5] = [Tool::Gcc, Tool::Clang, Tool::Cmake, Tool::Nvcc, Tool::Hipcc];

    /// The program name.
    pub fn program(self) -> &'static str {
        match self {
            Tool::Gcc => "gcc",
            Tool::Clang => "clang",
            Tool::Cmake => "cmake",
            Tool::Nvcc => "nvcc",
            Tool::Hipcc => "hipcc",
        }
    }
}

/// The line of `TOOL --version` output that carries the version, and the version alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolBanner {
    /// The line as printed (trimmed).
    pub banner: String,
    /// The version picked out of it.
    pub version: Option<String>,
}

/// Reads `TOOL --version` output. The banner line is the one collect_env's regular
/// expression searches (`gcc (.*)`, `clang version (.*)`, `cmake (.*)`,
/// `release .+ V(.*)`), so both report the same line.
pub fn tool_banner(tool: Tool, output: &str) -> Option<ToolBanner> {
    let lines = || output.lines().map(str::trim).filter(|l| !l.is_empty());
    let (banner, version) = match tool {
        Tool::Gcc => {
            let line = lines().find(|l| l.contains("gcc ") || l.contains("gcc-"))?;
            // `gcc (GCC) 13.2.1 20231205 (Red Hat 13.2.1-6)`: the first dotted number after
            // the closing parenthesis of the package note.
            let after = line.split_once(") ").map_or(line, |(_, rest)| rest);
            (line, first_dotted(after))
        }
        Tool::Clang => {
            let line = lines().find(|l| l.contains("clang version "))?;
            let rest = line.split_once("clang version ")?.1;
            (line, rest.split_whitespace().next().map(str::to_owned))
        }
        Tool::Cmake => {
            let line = lines().find(|l| l.starts_with("cmake version "))?;
            (line, line.split_whitespace().nth(2).map(str::to_owned))
        }
        Tool::Nvcc => {
            let line = lines().find(|l| l.contains("release ") && l.contains(", V"))?;
            let v = line.rsplit_once(", V")?.1.trim();
            (line, (!v.is_empty()).then(|| v.to_owned()))
        }
        Tool::Hipcc => {
            let line = lines().find(|l| l.starts_with("HIP version:"))?;
            let v = line.trim_start_matches("HIP version:").trim();
            (line, (!v.is_empty()).then(|| v.to_owned()))
        }
    };
    Some(ToolBanner {
        banner: banner.to_owned(),
        version,
    })
}

/// The first word that is a dotted number (`12.2.0`), trailing punctuation dropped.
fn first_dotted(text: &str) -> Option<String> {
    text.split_whitespace().find_map(|word| {
        let word = word.trim_end_matches([',', ')', '.']);
        is_dotted(word).then(|| word.to_owned())
    })
}

fn is_dotted(word: &str) -> bool {
    word.contains('.')
        && word
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The glibc release in the bytes of `libc.so.6`: its banner reads
/// `GNU C Library (Debian GLIBC 2.36-9+deb12u13) stable release version 2.36.` (the same
/// text `/lib/x86_64-linux-gnu/libc.so.6` prints when run, read here without running it).
pub fn glibc_version(bytes: &[u8]) -> Option<String> {
    const MARK: &[u8] = b"GNU C Library";
    let start = bytes.windows(MARK.len()).position(|w| w == MARK)?;
    let tail = &bytes[start..bytes.len().min(start + 512)];
    let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
    let text = String::from_utf8_lossy(&tail[..end]);
    let rest = text.split_once("release version ")?.1;
    let version: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let version = version.trim_end_matches('.');
    is_dotted(version).then(|| version.to_owned())
}

/// `#define NAME value` lines of a C header, name → value (comments after the value cut).
pub fn header_defines(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix("#define") else {
            continue;
        };
        let mut parts = rest.trim().splitn(2, char::is_whitespace);
        let (Some(name), Some(value)) = (parts.next(), parts.next()) else {
            continue;
        };
        let value = value.split("//").next().unwrap_or_default();
        let value = value.split("/*").next().unwrap_or_default().trim();
        if !name.contains('(') && !value.is_empty() {
            out.insert(name.to_owned(), value.to_owned());
        }
    }
    out
}

/// `MAJOR.MINOR.PATCH` from three numeric `#define`s of a header (`CUDNN_MAJOR`,
/// `CUDNN_MINOR`, `CUDNN_PATCHLEVEL`); `None` unless all three are plain numbers.
pub fn header_version(text: &str, macros: [&str; 3]) -> Option<String> {
    let defines = header_defines(text);
    let parts: Option<Vec<u64>> = macros
        .iter()
        .map(|m| defines.get(*m)?.trim_matches(['(', ')']).parse().ok())
        .collect();
    let parts = parts?;
    Some(format!("{}.{}.{}", parts[0], parts[1], parts[2]))
}

/// `lscpu` output: `Key: value` per line, the key trimmed of its indentation (newer lscpu
/// nests keys under section headers such as `Caches (sum of all):`, which have no value and
/// are dropped).
pub fn lscpu(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        if !key.is_empty() && !value.is_empty() && !out.contains_key(key) {
            out.insert(key.to_owned(), value.to_owned());
        }
    }
    out
}

/// The CPUs of a kernel CPU list (`0-3,8,10-11`), in order; `None` for a malformed list or
/// one naming more than 65,536 CPUs.
pub fn cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?),
            None => {
                let n = part.trim().parse::<u32>().ok()?;
                (n, n)
            }
        };
        if last < first || cpus.len() + (last - first) as usize >= 65_536 {
            return None;
        }
        cpus.extend(first..=last);
    }
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcc_banners() {
        let red_hat = "gcc (GCC) 13.2.1 20231205 (Red Hat 13.2.1-6)\nCopyright (C) 2023";
        assert_eq!(
            tool_banner(Tool::Gcc, red_hat).and_then(|b| b.version),
            Some("13.2.1".to_owned())
        );
        assert_eq!(tool_banner(Tool::Gcc, ""), None);
        assert_eq!(tool_banner(Tool::Cmake, "cmake version"), None);
        assert_eq!(
            tool_banner(Tool::Nvcc, "release 1, V"),
            Some(ToolBanner {
                banner: "release 1, V".into(),
                version: None
            })
        );
    }

    #[test]
    fn glibc_banner_is_found_among_other_bytes() {
        assert_eq!(
            glibc_version(b"\0\0GNU C Library stable release version 2.17, by"),
            Some("2.17".into())
        );
        assert_eq!(glibc_version(b"GNU C Library"), None);
        assert_eq!(glibc_version(b""), None);
    }

    #[test]
    fn header_macros() {
        let text =
            "#define X_MAJOR 2 // major\n#define X_MINOR (30)\n#define X_PATCH 7\n#define F(a) a\n";
        assert_eq!(
            header_version(text, ["X_MAJOR", "X_MINOR", "X_PATCH"]),
            Some("2.30.7".into())
        );
        assert_eq!(header_version(text, ["X_MAJOR", "X_MINOR", "NONE"]), None);
        assert_eq!(
            header_version("#define X_MAJOR two\n", ["X_MAJOR", "X_MAJOR", "X_MAJOR"]),
            None
        );
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list("0-3,8"), Some(vec![0, 1, 2, 3, 8]));
        assert_eq!(cpu_list("0,1\n"), Some(vec![0, 1]));
        assert_eq!(cpu_list("3-1"), None);
        assert_eq!(cpu_list("0-4294967295"), None);
        assert_eq!(cpu_list("a"), None);
        assert_eq!(cpu_list(""), Some(vec![]));
    }
}
