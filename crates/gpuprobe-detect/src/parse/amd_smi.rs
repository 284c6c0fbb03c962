//! `amd-smi` output in its three shapes: the default text dashboard (AMD-SMI 25.x+:
//! a box with `AMD-SMI <ver>  amdgpu version: <v>  ROCm version: <v>` and two lines per
//! GPU), the `static` / `list` / `firmware` text views (`GPU: 0` followed by indented
//! `KEY: value` sections), and `--json` (a list of per-GPU objects, or
//! `{"gpu_data": [...]}` in newer releases; values are plain or `{"value", "unit"}`).
//!
//! `TARGET_GRAPHICS_VERSION` comes from the KFD topology, so it is the native ISA. On an
//! APU the memory shown is the BIOS carve-out only (real sample:
//! `fixtures/amd-smi/gfx1151-strix-halo-inbox-kernel-rocm-issue5553.txt`), and the
//! dashboard's `amdgpu version` is the kernel release with the in-box driver.

use gpuprobe_model::Fingerprint;
use gpuprobe_model::{DriverSource, FirmwareVersion, GpuInfo, RocmInfo, Vendor};
use serde_json::Value;

use super::ParseError;
use crate::isa;
use crate::merge::{derive_gpu_facts, fill, merge_gpu, note_amdgpu};
use crate::text::static_regex;
use crate::text::{KvNode, Line, body_lines, kv_tree, meaningful, normalize_bdf, size_to_bytes};

/// Which amd-smi output the text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The default dashboard (`amd-smi` with no arguments).
    Dashboard,
    /// `amd-smi static` / `list` / `firmware` text.
    Text,
    /// Any `--json` output.
    Json,
}

/// One GPU as amd-smi reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gpu {
    /// amd-smi's GPU number.
    pub gpu: Option<u32>,
    /// HIP device index (`HIP-ID` in the dashboard, `HIP_ID` in `list -e`).
    pub hip_id: Option<u32>,
    /// PCI address.
    pub bdf: Option<String>,
    /// `MARKET_NAME` / dashboard GPU-Name.
    pub market_name: Option<String>,
    /// `DEVICE_ID` (`0x74a0`).
    pub device_id: Option<String>,
    /// `REV_ID`.
    pub revision: Option<String>,
    /// `NUM_COMPUTE_UNITS`.
    pub compute_units: Option<u32>,
    /// `TARGET_GRAPHICS_VERSION` (native ISA).
    pub target_graphics_version: Option<String>,
    /// VRAM size in bytes (the carve-out on an APU).
    pub vram_total_bytes: Option<u64>,
    /// VRAM in use in bytes (dashboard).
    pub vram_used_bytes: Option<u64>,
    /// VBIOS version.
    pub vbios_version: Option<String>,
    /// VBIOS part number.
    pub vbios_part_number: Option<String>,
    /// `DRIVER: VERSION`.
    pub driver_version: Option<String>,
    /// `UUID`.
    pub uuid: Option<String>,
    /// `KFD_ID`.
    pub kfd_id: Option<String>,
    /// `NODE_ID` (KFD node).
    pub node_id: Option<u32>,
    /// Firmware list (`amd-smi firmware`).
    pub firmware: Vec<FirmwareVersion>,
}

/// Parsed amd-smi output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmdSmi {
    /// The shape of the output.
    pub format: Format,
    /// amd-smi version (`26.2.0+021c61fc`).
    pub tool_version: Option<String>,
    /// The dashboard's `amdgpu version` (DKMS version, or the kernel release in-box).
    pub amdgpu_version: Option<String>,
    /// `ROCm version`.
    pub rocm_version: Option<String>,
    /// `Platform` (`Linux Baremetal`, `Linux Guest`).
    pub platform: Option<String>,
    /// GPUs.
    pub gpus: Vec<Gpu>,
    /// The dashboard's `VBIOS version` header line.
    pub vbios_version: Option<String>,
    /// Whether the dashboard's processes table was present.
    pub has_process_table: bool,
}

impl AmdSmi {
    fn empty(format: Format) -> AmdSmi {
        AmdSmi {
            format,
            tool_version: None,
            amdgpu_version: None,
            rocm_version: None,
            platform: None,
            gpus: Vec::new(),
            vbios_version: None,
            has_process_table: false,
        }
    }
}

/// Parses any of the amd-smi output shapes.
pub fn parse(text: &str) -> Result<AmdSmi, ParseError> {
    let lines = body_lines(text);
    let first = lines
        .iter()
        .map(|l| l.text.trim())
        .find(|t| !t.is_empty())
        .unwrap_or_default();
    if first.starts_with('{') || first.starts_with('[') {
        return parse_json(&lines);
    }
    if lines
        .iter()
        .any(|l| l.text.contains("AMD-SMI ") && l.text.trim_start().starts_with('|'))
    {
        return Ok(parse_dashboard(&lines));
    }
    let text_view = parse_text(&lines);
    if text_view.gpus.is_empty() && text_view.tool_version.is_none() {
        return Err(ParseError::NotRecognized {
            tool: "amd-smi",
            reason: "no AMD-SMI dashboard, no `GPU: N` sections and no JSON",
        });
    }
    Ok(text_view)
}

fn parse_dashboard(lines: &[Line]) -> AmdSmi {
    let first_row = static_regex!(
        r"^\|\s*([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(.*?)\s*\|"
    );
    let second_row = static_regex!(
        r"^\|\s*(\d+)\s+(\d+|N/A)\s+(\S+)\s+(\S+)\s*\|(?:.*?(\d+|N/A)\s*/\s*(\d+)\s*MB\s*\|)?"
    );
    let mut out = AmdSmi::empty(Format::Dashboard);
    let mut pending: Option<Gpu> = None;
    for line in lines {
        let t = line.text.trim();
        if let Some(pos) = t.find("AMD-SMI ") {
            out.tool_version = t[pos + 8..].split_whitespace().next().map(str::to_owned);
        }
        if let Some(pos) = t.find("amdgpu version:") {
            out.amdgpu_version = t[pos + 15..].split_whitespace().next().and_then(meaningful);
        }
        if let Some(pos) = t.find("ROCm version:") {
            out.rocm_version = t[pos + 13..].split_whitespace().next().and_then(meaningful);
        }
        if let Some(rest) = t.strip_prefix("| VBIOS version:") {
            out.vbios_version = meaningful(rest.trim_end_matches('|'));
        }
        if let Some(rest) = t.strip_prefix("| Platform:") {
            out.platform = meaningful(rest.trim_end_matches('|'));
        }
        if t.contains("Processes:") {
            out.has_process_table = true;
            if let Some(gpu) = pending.take() {
                out.gpus.push(gpu);
            }
            continue;
        }
        if out.has_process_table {
            continue;
        }
        if let Some(caps) = first_row.captures(t) {
            if let Some(gpu) = pending.take() {
                out.gpus.push(gpu);
            }
            pending = Some(Gpu {
                bdf: normalize_bdf(&caps[1]),
                market_name: meaningful(&caps[2]),
                ..Gpu::default()
            });
            continue;
        }
        if let Some(caps) = second_row.captures(t)
            && let Some(gpu) = pending.as_mut()
        {
            gpu.gpu = caps[1].parse().ok();
            gpu.hip_id = caps[2].parse().ok();
            gpu.vram_used_bytes = caps
                .get(5)
                .and_then(|m| m.as_str().parse::<u64>().ok())
                .map(|mb| mb << 20);
            gpu.vram_total_bytes = caps
                .get(6)
                .and_then(|m| m.as_str().parse::<u64>().ok())
                .map(|mb| mb << 20);
            if let Some(gpu) = pending.take() {
                out.gpus.push(gpu);
            }
        }
    }
    if let Some(gpu) = pending.take() {
        out.gpus.push(gpu);
    }
    out
}

fn parse_text(lines: &[Line]) -> AmdSmi {
    let mut out = AmdSmi::empty(Format::Text);
    for root in kv_tree(lines) {
        if root.key.eq_ignore_ascii_case("GPU") {
            let mut gpu = Gpu {
                gpu: root.value.as_deref().and_then(|v| v.trim().parse().ok()),
                ..Gpu::default()
            };
            fill_from_tree(&mut gpu, &root);
            out.gpus.push(gpu);
        } else if root.key.starts_with("AMDSMI Tool")
            || root.key.eq_ignore_ascii_case("AMDSMI_TOOL")
        {
            out.tool_version = root.value.as_deref().and_then(meaningful);
        } else if root.key.eq_ignore_ascii_case("ROCm version") {
            out.rocm_version = root.value.as_deref().and_then(meaningful);
        }
    }
    out
}

fn fill_from_tree(gpu: &mut Gpu, node: &KvNode) {
    for child in &node.children {
        let key = child.key.to_ascii_uppercase();
        let value = child.value.as_deref().and_then(meaningful);
        match key.as_str() {
            "BDF" => gpu.bdf = value.as_deref().and_then(normalize_bdf),
            "UUID" => gpu.uuid = value,
            "KFD_ID" => gpu.kfd_id = value,
            "NODE_ID" => gpu.node_id = value.and_then(|v| v.parse().ok()),
            "HIP_ID" => gpu.hip_id = value.and_then(|v| v.parse().ok()),
            "ASIC" => {
                gpu.market_name = child.child_value("MARKET_NAME");
                gpu.device_id = child
                    .child_value("DEVICE_ID")
                    .map(|v| v.to_ascii_lowercase());
                gpu.revision = child.child_value("REV_ID").map(|v| v.to_ascii_lowercase());
                gpu.compute_units = child
                    .child_value("NUM_COMPUTE_UNITS")
                    .and_then(|v| v.parse().ok());
                gpu.target_graphics_version = child.child_value("TARGET_GRAPHICS_VERSION");
            }
            "BUS" => {
                gpu.bdf = gpu
                    .bdf
                    .take()
                    .or(child.child_value("BDF").as_deref().and_then(normalize_bdf))
            }
            "VBIOS" => {
                gpu.vbios_version = child.child_value("VERSION");
                gpu.vbios_part_number = child.child_value("PART_NUMBER");
            }
            "DRIVER" => gpu.driver_version = child.child_value("VERSION"),
            "VRAM" => {
                gpu.vram_total_bytes = child.child_value("SIZE").as_deref().and_then(size_to_bytes)
            }
            "FW_LIST" => {
                for fw in &child.children {
                    if let (Some(id), Some(version)) =
                        (fw.child_value("FW_ID"), fw.child_value("FW_VERSION"))
                    {
                        gpu.firmware.push(FirmwareVersion {
                            name: id,
                            feature: None,
                            version,
                        });
                    }
                }
            }
            _ => {}
        }
    }
}

fn parse_json(lines: &[Line]) -> Result<AmdSmi, ParseError> {
    let joined: String = lines
        .iter()
        .map(|l| l.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let value: Value = serde_json::from_str(joined.trim()).map_err(|e| ParseError::Json {
        tool: "amd-smi",
        message: e.to_string(),
    })?;
    let mut out = AmdSmi::empty(Format::Json);
    let entries: Vec<&Value> = match &value {
        Value::Array(items) => items.iter().collect(),
        Value::Object(map) => match map.get("gpu_data") {
            Some(Value::Array(items)) => items.iter().collect(),
            _ => vec![&value],
        },
        _ => Vec::new(),
    };
    for entry in entries {
        let Value::Object(map) = entry else { continue };
        // `amd-smi version --json`.
        if map.contains_key("rocm_version") || map.contains_key("tool") {
            out.rocm_version = map.get("rocm_version").and_then(json_text);
            out.tool_version = map
                .get("version")
                .or_else(|| map.get("amdsmi_library_version"))
                .and_then(json_text);
            continue;
        }
        let mut gpu = Gpu {
            gpu: map
                .get("gpu")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok()),
            ..Gpu::default()
        };
        gpu.bdf = map
            .get("bdf")
            .and_then(json_text)
            .as_deref()
            .and_then(normalize_bdf);
        gpu.uuid = map.get("uuid").and_then(json_text);
        gpu.kfd_id = map.get("kfd_id").and_then(json_text);
        gpu.node_id = map
            .get("node_id")
            .and_then(json_text)
            .and_then(|v| v.parse().ok());
        gpu.hip_id = map
            .get("hip_id")
            .and_then(json_text)
            .and_then(|v| v.parse().ok());
        if let Some(asic) = map.get("asic") {
            gpu.market_name = asic.get("market_name").and_then(json_text);
            gpu.device_id = asic
                .get("device_id")
                .and_then(json_text)
                .map(|v| v.to_ascii_lowercase());
            gpu.revision = asic
                .get("rev_id")
                .and_then(json_text)
                .map(|v| v.to_ascii_lowercase());
            gpu.compute_units = asic
                .get("num_compute_units")
                .and_then(json_text)
                .and_then(|v| v.parse().ok());
            gpu.target_graphics_version = asic.get("target_graphics_version").and_then(json_text);
        }
        if let Some(bus) = map.get("bus") {
            gpu.bdf = gpu.bdf.take().or(bus
                .get("bdf")
                .and_then(json_text)
                .as_deref()
                .and_then(normalize_bdf));
        }
        if let Some(vbios) = map.get("vbios") {
            gpu.vbios_version = vbios.get("version").and_then(json_text);
            gpu.vbios_part_number = vbios.get("part_number").and_then(json_text);
        }
        if let Some(driver) = map.get("driver") {
            gpu.driver_version = driver.get("version").and_then(json_text);
        }
        if let Some(vram) = map.get("vram") {
            gpu.vram_total_bytes = vram.get("size").and_then(json_size);
        }
        if let Some(Value::Array(list)) = map.get("fw_list") {
            for fw in list {
                if let (Some(id), Some(version)) = (
                    fw.get("fw_id").and_then(json_text),
                    fw.get("fw_version").and_then(json_text),
                ) {
                    gpu.firmware.push(FirmwareVersion {
                        name: id,
                        feature: None,
                        version,
                    });
                }
            }
        }
        out.gpus.push(gpu);
    }
    Ok(out)
}

/// A JSON scalar as meaningful text (`{"value": 16, "unit": "GT/s"}` → `16 GT/s`).
fn json_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => meaningful(s),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Object(map) => {
            let amount = map.get("value").and_then(json_text)?;
            match map.get("unit").and_then(json_text) {
                Some(unit) => Some(format!("{amount} {unit}")),
                None => Some(amount),
            }
        }
        _ => None,
    }
}

fn json_size(value: &Value) -> Option<u64> {
    let text = json_text(value)?;
    // A bare number is in MB, as amd-smi prints VRAM sizes.
    if text.chars().all(|c| c.is_ascii_digit()) {
        return text
            .parse::<u64>()
            .ok()
            .and_then(|mb| mb.checked_mul(1 << 20));
    }
    size_to_bytes(&text)
}

/// Whether a driver version string looks like a kernel release (`6.17.0-5`,
/// `6.8.0-47-generic`) rather than a DKMS package version (`6.16.6`).
pub(crate) fn looks_like_kernel_release(version: &str) -> bool {
    version.contains('-')
        || version.contains("generic")
        || version.contains(".fc")
        || version.contains(".el")
}

impl AmdSmi {
    /// Merges GPUs, the ROCm version, and what the `amdgpu version` says about the driver.
    pub fn apply(&self, fp: &mut Fingerprint) {
        if let Some(rocm) = self.rocm_version.as_deref() {
            let info = fp.rocm.get_or_insert_with(RocmInfo::default);
            fill(&mut info.version, Some(rocm.to_owned()));
        }
        if let Some(tool) = &self.tool_version {
            fp.extra
                .entry("amd-smi.version".to_owned())
                .or_insert_with(|| tool.clone());
        }
        if let Some(platform) = &self.platform {
            fp.extra
                .entry("amd-smi.platform".to_owned())
                .or_insert_with(|| platform.clone());
        }
        let driver_version = self
            .amdgpu_version
            .clone()
            .or_else(|| self.gpus.iter().find_map(|g| g.driver_version.clone()));
        if let Some(version) = driver_version {
            fp.extra
                .entry("amd-smi.amdgpu_version".to_owned())
                .or_insert_with(|| version.clone());
            // With the in-box driver amd-smi shows the kernel release; a DKMS build shows
            // its own version, which cannot be told apart from a bare upstream kernel
            // version by the string alone, so only the in-box case is concluded.
            let source = if looks_like_kernel_release(&version) {
                DriverSource::Inbox
            } else {
                DriverSource::Unknown
            };
            note_amdgpu(fp, true, source, None);
        }
        for row in &self.gpus {
            let mut gpu = GpuInfo::new(Vendor::Amd);
            gpu.index = row.hip_id;
            gpu.pci_bus = row.bdf.clone();
            gpu.name = row.market_name.clone();
            gpu.pci_device_id = row.device_id.clone();
            gpu.pci_revision = row.revision.clone();
            gpu.compute_units = row.compute_units;
            if let Some(target) = row.target_graphics_version.as_deref() {
                let (name, _) = isa::split_isa(target);
                gpu.native_isa = Some(name).filter(|n| n.starts_with("gfx"));
            }
            gpu.vram_total_bytes = row.vram_total_bytes;
            gpu.vbios = row
                .vbios_version
                .clone()
                .or_else(|| row.vbios_part_number.clone())
                .or_else(|| self.vbios_version.clone());
            gpu.firmware = row.firmware.clone();
            gpu.sources.push("amd-smi".to_owned());
            derive_gpu_facts(&mut gpu);
            merge_gpu(fp, gpu);
        }
    }
}
