//! `/sys/kernel/debug/dri/<N>/amdgpu_firmware_info` (readable by root only):
//! `MES feature version: 1, firmware version: 0x00000080`, also with a `program:` field
//! (`SMC feature version: 0, program: 0, firmware version: 0x00554d00 (85.77.0)`) and a
//! `VBIOS version: ...` line.

use gpuprobe_model::Fingerprint;
use gpuprobe_model::{FirmwareVersion, GpuInfo, Vendor};

use super::ParseError;
use crate::merge::{fill, gpus_of, push_unique, unreadable};
use crate::text::body_lines;
use crate::text::static_regex;

/// Parsed firmware listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FirmwareInfo {
    /// Components in listing order.
    pub components: Vec<FirmwareVersion>,
    /// `VBIOS version`, when listed.
    pub vbios: Option<String>,
}

impl FirmwareInfo {
    /// The entry for a component name (`MES`, `MES_KIQ`).
    pub fn component(&self, name: &str) -> Option<&FirmwareVersion> {
        self.components.iter().find(|c| c.name == name)
    }
}

/// Parses an `amdgpu_firmware_info` listing.
pub fn parse(text: &str) -> Result<FirmwareInfo, ParseError> {
    let line_re = static_regex!(
        r"^\s*(.+?) feature version: (\d+),(?: program: \d+,)? firmware version: (0x[0-9a-fA-F]+)"
    );
    let mut out = FirmwareInfo::default();
    for line in body_lines(text) {
        let t = line.text.trim();
        if let Some(c) = line_re.captures(t) {
            out.components.push(FirmwareVersion {
                name: c[1].trim().to_owned(),
                feature: c[2].parse().ok(),
                version: c[3].to_ascii_lowercase(),
            });
        } else if let Some(v) = t.strip_prefix("VBIOS version:") {
            out.vbios = Some(v.trim().to_owned()).filter(|v| !v.is_empty());
        }
    }
    if out.components.is_empty() {
        return Err(ParseError::NotRecognized {
            tool: "amdgpu_firmware_info",
            reason: "no `... feature version: N, firmware version: 0x...` line",
        });
    }
    Ok(out)
}

impl FirmwareInfo {
    /// Puts the listing on one GPU: its entries replace same-named ones (this listing is
    /// authoritative and carries feature versions, unlike sysfs `fw_version`).
    pub fn apply_to(&self, gpu: &mut GpuInfo) {
        for component in &self.components {
            gpu.firmware.retain(|f| f.name != component.name);
            gpu.firmware.push(component.clone());
        }
        fill(&mut gpu.vbios, self.vbios.clone());
        push_unique(&mut gpu.sources, "amdgpu_firmware_info".to_owned());
    }

    /// Attaches the firmware to the only AMD GPU; creates one when none is known; with
    /// several AMD GPUs it cannot tell which card the listing belongs to and says so.
    pub fn apply(&self, fp: &mut Fingerprint) {
        let target = match gpus_of(fp, Vendor::Amd).as_slice() {
            [only] => *only,
            [] => {
                fp.gpus.push(GpuInfo::new(Vendor::Amd));
                fp.gpus.len() - 1
            }
            [first, ..] => {
                let first = *first;
                unreadable(
                    fp,
                    "which GPU the firmware listing belongs to",
                    "several AMD GPUs; attached to the first",
                );
                first
            }
        };
        self.apply_to(&mut fp.gpus[target]);
    }
}
