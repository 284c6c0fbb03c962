//! Small system outputs: `dkms status`, `mokutil --sb-state`, `/etc/os-release`,
//! `uname -a` / `uname -r`, `/proc/cmdline`, and module-parameter listings as printed by
//! `grep . /sys/module/amdgpu/parameters/*` (`path:value`).

use std::collections::BTreeMap;

use gpuprobe_model::DriverSource;
use gpuprobe_model::Fingerprint;

use super::ParseError;
use crate::merge::{fill, note_amdgpu};
use crate::text::body_lines;
use crate::text::static_regex;

/// One `dkms status` line: `amdgpu/6.16.13-2278356.24.04, 6.14.0-1018-oem, x86_64: installed`
/// (older dkms: `amdgpu, 6.3.6, 5.15.0-91-generic, x86_64: installed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DkmsEntry {
    /// Module name.
    pub module: String,
    /// Module version.
    pub version: String,
    /// Kernel it was built for, when listed.
    pub kernel: Option<String>,
    /// Architecture, when listed.
    pub arch: Option<String>,
    /// Status (`installed`, `built`, `added`), with any warning after it.
    pub status: String,
    /// The line as printed.
    pub line: String,
}

/// Parses `dkms status`.
pub fn parse_dkms_status(text: &str) -> Result<Vec<DkmsEntry>, ParseError> {
    let mut entries = Vec::new();
    for line in body_lines(text) {
        let t = line.text.trim();
        let Some((head, status)) = t.rsplit_once(": ") else {
            continue;
        };
        let fields: Vec<&str> = head.split(", ").map(str::trim).collect();
        let (module, version, rest) = match fields.as_slice() {
            [first, rest @ ..] if first.contains('/') => {
                let (m, v) = first.split_once('/').unwrap_or((first, ""));
                (m.to_owned(), v.to_owned(), rest.to_vec())
            }
            [module, version, rest @ ..] => {
                ((*module).to_owned(), (*version).to_owned(), rest.to_vec())
            }
            _ => continue,
        };
        if module.is_empty() || module.contains(' ') {
            continue;
        }
        entries.push(DkmsEntry {
            module,
            version,
            kernel: rest.first().map(|s| (*s).to_owned()),
            arch: rest.get(1).map(|s| (*s).to_owned()),
            status: status.trim().to_owned(),
            line: t.to_owned(),
        });
    }
    if entries.is_empty() {
        return Err(ParseError::NotRecognized {
            tool: "dkms status",
            reason: "no `module/version, kernel, arch: status` line",
        });
    }
    Ok(entries)
}

/// Applies `dkms status`: amdgpu entries are recorded as `dkms.amdgpu` (and
/// `dkms.amdgpu.N` for more) in `Fingerprint::extra`.
pub fn apply_dkms(entries: &[DkmsEntry], fp: &mut Fingerprint) {
    for (i, entry) in entries
        .iter()
        .filter(|e| e.module.starts_with("amdgpu"))
        .enumerate()
    {
        let key = if i == 0 {
            "dkms.amdgpu".to_owned()
        } else {
            format!("dkms.amdgpu.{i}")
        };
        fp.extra.entry(key).or_insert_with(|| entry.line.clone());
    }
}

/// Parses `mokutil --sb-state`: `Some(true)` / `Some(false)`; `None` when the firmware
/// does not support Secure Boot or EFI variables are unavailable.
pub fn parse_mokutil(text: &str) -> Result<Option<bool>, ParseError> {
    for line in body_lines(text) {
        let t = line.text.trim();
        if t.starts_with("SecureBoot enabled") {
            return Ok(Some(true));
        }
        if t.starts_with("SecureBoot disabled") {
            return Ok(Some(false));
        }
        if t.contains("doesn't support Secure Boot")
            || t.contains("EFI variables are not supported")
        {
            return Ok(None);
        }
    }
    Err(ParseError::NotRecognized {
        tool: "mokutil",
        reason: "no `SecureBoot enabled/disabled` line",
    })
}

/// Parses `/etc/os-release` (`KEY=value`, values optionally quoted).
pub fn parse_os_release(text: &str) -> Result<BTreeMap<String, String>, ParseError> {
    let mut map = BTreeMap::new();
    for line in body_lines(text) {
        let t = line.text.trim();
        if t.starts_with('#') {
            continue;
        }
        let Some((key, value)) = t.split_once('=') else {
            continue;
        };
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            continue;
        }
        let value = value.trim().trim_matches('"').trim_matches('\'');
        map.insert(key.to_owned(), value.to_owned());
    }
    if !map.contains_key("ID") && !map.contains_key("NAME") && !map.contains_key("PRETTY_NAME") {
        return Err(ParseError::NotRecognized {
            tool: "os-release",
            reason: "no ID, NAME or PRETTY_NAME",
        });
    }
    Ok(map)
}

/// Applies os-release facts to the host.
pub fn apply_os_release(map: &BTreeMap<String, String>, fp: &mut Fingerprint) {
    fill(&mut fp.host.distro_id, map.get("ID").cloned());
    fill(&mut fp.host.distro_version, map.get("VERSION_ID").cloned());
    fill(&mut fp.host.distro_pretty, map.get("PRETTY_NAME").cloned());
}

/// The kernel release from `uname -a` (`Linux host 6.17.0-8-generic #8-Ubuntu ...`),
/// `uname -r`, or `/proc/version` (`Linux version 6.18.44 (...)`).
pub fn parse_uname(text: &str) -> Result<String, ParseError> {
    let re = static_regex!(
        r"^Linux (?:version )?(?:\S+ )?(\d+\.\d+[\w.+~-]*) (?:#|\()|^(\d+\.\d+\.\d+[\w.+~-]*)$"
    );
    for line in body_lines(text) {
        if let Some(c) = re.captures(line.text.trim())
            && let Some(m) = c.get(1).or_else(|| c.get(2))
        {
            return Ok(m.as_str().to_owned());
        }
    }
    Err(ParseError::NotRecognized {
        tool: "uname",
        reason: "no `Linux <host> <release> #...` line",
    })
}

/// Whether a line looks like `/proc/cmdline`.
pub fn looks_like_cmdline(line: &str) -> bool {
    let t = line.trim();
    (t.starts_with("BOOT_IMAGE=") || t.contains(" root=") || t.starts_with("root="))
        && !t.contains(": ")
}

/// Parses `grep . /sys/module/<module>/parameters/*` output into (module, name, value).
pub fn parse_module_params(text: &str) -> Result<Vec<(String, String, String)>, ParseError> {
    let re = static_regex!(r"^/sys/module/([\w-]+)/parameters/([\w-]+):(.*)$");
    let params: Vec<(String, String, String)> = body_lines(text)
        .iter()
        .filter_map(|l| re.captures(l.text.trim()))
        .map(|c| (c[1].to_owned(), c[2].to_owned(), c[3].trim().to_owned()))
        .collect();
    if params.is_empty() {
        return Err(ParseError::NotRecognized {
            tool: "module parameters",
            reason: "no `/sys/module/X/parameters/Y:value` line",
        });
    }
    Ok(params)
}

/// Applies module parameters: `amdgpu` ones into `amdgpu.params`, `ttm`/`amdttm` ones into
/// `amdgpu.ttm_params`.
pub fn apply_module_params(params: &[(String, String, String)], fp: &mut Fingerprint) {
    for (module, name, value) in params {
        if !matches!(module.as_str(), "amdgpu" | "ttm" | "amdttm") {
            continue;
        }
        // amdttm only exists with the DKMS driver.
        let source = if module == "amdttm" {
            DriverSource::Dkms
        } else {
            DriverSource::Unknown
        };
        let driver = note_amdgpu(fp, true, source, None);
        if module == "amdgpu" {
            driver
                .params
                .entry(name.clone())
                .or_insert_with(|| value.clone());
        } else {
            driver
                .ttm_params
                .entry(name.clone())
                .or_insert_with(|| value.clone());
        }
    }
}
