//! `rocm-smi` output: the concise table (5.x `GPU Temp (DieEdge) ...`, 6.x
//! `Device Node IDs ...` and `Device [Model : Revision]` layouts), `--showhw`
//! (`GFX VER` column), `GPU[n] : key: value` lines of the `--show*` options, and the error
//! lines rocm-smi interleaves (`Expected integer value ...`, `ERROR: GPU[1] : ...`).
//!
//! Columns are matched by header position when the row has as many fields as the header
//! (split at runs of two or more spaces or TABs); otherwise identity facts are picked by
//! their shape (`0x744c` device id, `gfx90a`, `0000:18:00.0`), which survives pastes that
//! collapsed the spacing.

use std::collections::BTreeMap;

use gpuprobe_model::Fingerprint;
use gpuprobe_model::{GpuInfo, Vendor};
use regex::Regex;

use super::ParseError;
use crate::merge::{derive_gpu_facts, merge_gpu};
use crate::text::static_regex;
use crate::text::{body_lines, meaningful, normalize_bdf};

/// Which rocm-smi view the text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The default concise table.
    Concise,
    /// `--showhw`.
    Hardware,
    /// `GPU[n] : key: value` lines only.
    Lines,
}

/// One GPU row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gpu {
    /// rocm-smi's GPU number (its own enumeration, not the HIP index).
    pub index: u32,
    /// KFD node.
    pub node: Option<u32>,
    /// PCI device id (`0x740f`).
    pub device_id: Option<String>,
    /// PCI revision, when shown (`[0x74a1 : 0x00]`).
    pub revision: Option<String>,
    /// `GFX VER` (from the KFD topology: the native ISA).
    pub gfx_version: Option<String>,
    /// VBIOS part number.
    pub vbios: Option<String>,
    /// PCI address.
    pub pci_bus: Option<String>,
    /// Product name (6.x prints it under the row; `Card series` in `--showproductname`).
    pub name: Option<String>,
    /// Every column by header name, when the row matched the header.
    pub columns: BTreeMap<String, String>,
}

impl Gpu {
    /// Whether the row says which GPU it is (PCI address, device id, ISA or name); rows of
    /// the 5.x concise table show only rocm-smi's own number and readings.
    pub fn identified(&self) -> bool {
        self.pci_bus.is_some()
            || self.device_id.is_some()
            || self.gfx_version.is_some()
            || self.name.is_some()
    }
}

/// Parsed rocm-smi output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RocmSmi {
    /// The view.
    pub view: View,
    /// GPUs in rocm-smi order.
    pub gpus: Vec<Gpu>,
    /// Error and warning lines printed around the table.
    pub messages: Vec<String>,
    /// Driver version from `--showdriverversion`.
    pub driver_version: Option<String>,
    /// Whether `End of ROCm SMI Log` closed the output.
    pub complete: bool,
}

fn device_id_re() -> &'static Regex {
    static_regex!(r"\b0x([0-9a-fA-F]{4})\b")
}

fn model_revision_re() -> &'static Regex {
    static_regex!(r"\[\s*0x([0-9a-fA-F]{4})\s*:\s*0x([0-9a-fA-F]{2})\s*\]")
}

fn gfx_re() -> &'static Regex {
    static_regex!(r"\b(gfx[0-9a-f]{3,4})\b")
}

fn bus_re() -> &'static Regex {
    static_regex!(r"\b([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\b")
}

fn vbios_re() -> &'static Regex {
    static_regex!(r"\b(\d{3}-[0-9A-Za-z][0-9A-Za-z_-]+)\b")
}

fn gpu_line_re() -> &'static Regex {
    static_regex!(r"^(?:ERROR:\s*)?GPU\[(\d+)\]\s*:\s*(.*)$")
}

fn columns_of(line: &str) -> Vec<String> {
    static_regex!(r"\s{2,}|\t+")
        .split(line.trim())
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect()
}

fn is_header(line: &str) -> bool {
    // Word-split, so a header whose spacing a paste collapsed is still one.
    let words: Vec<&str> = line.split_whitespace().collect();
    words.len() >= 3
        && (words[0] == "GPU" || words[0] == "Device")
        && !words[1].chars().all(|c| c.is_ascii_digit())
}

/// Parses rocm-smi output.
pub fn parse(text: &str) -> Result<RocmSmi, ParseError> {
    let lines = body_lines(text);
    let mut banner = false;
    let mut complete = false;
    let mut header: Option<Vec<String>> = None;
    let mut view = View::Lines;
    let mut gpus: Vec<Gpu> = Vec::new();
    let mut messages = Vec::new();
    let mut driver_version = None;
    let mut last_row: Option<usize> = None;
    for line in &lines {
        let t = line.text.trim();
        if t.is_empty() {
            continue;
        }
        if t.contains("ROCm System Management Interface") {
            banner = true;
            continue;
        }
        if t.contains("End of ROCm SMI Log") {
            complete = true;
            continue;
        }
        if t.contains("Concise Hardware Info") {
            view = View::Hardware;
            continue;
        }
        if t.contains("Concise Info") {
            view = View::Concise;
            continue;
        }
        if t.chars().all(|c| c == '=' || c == '-') {
            last_row = None;
            continue;
        }
        if is_header(t) {
            let cols = columns_of(t);
            if cols.iter().any(|c| c == "GFX VER" || c == "VBIOS") {
                view = View::Hardware;
            } else if view == View::Lines {
                view = View::Concise;
            }
            header = Some(cols);
            last_row = None;
            continue;
        }
        if let Some(caps) = gpu_line_re().captures(t) {
            let index: u32 = caps[1].parse().unwrap_or(0);
            let rest = caps[2].trim().to_owned();
            let gpu_pos = match gpus.iter().position(|g| g.index == index) {
                Some(p) => p,
                None => {
                    gpus.push(Gpu {
                        index,
                        ..Gpu::default()
                    });
                    gpus.len() - 1
                }
            };
            apply_key_line(&mut gpus[gpu_pos], &rest, &mut messages, t);
            continue;
        }
        if let Some(version) = t.strip_prefix("Driver version:") {
            driver_version = meaningful(version);
            continue;
        }
        let first = t.split_whitespace().next().unwrap_or_default();
        if let (Some(cols), Ok(index)) = (header.as_ref(), first.parse::<u32>()) {
            let gpu = parse_row(index, t, cols);
            match gpus.iter().position(|g| g.index == index) {
                Some(p) => merge_row(&mut gpus[p], gpu),
                None => gpus.push(gpu),
            }
            last_row = gpus.iter().position(|g| g.index == index);
            continue;
        }
        // 6.x prints the product name on the line under its row.
        if let Some(p) = last_row
            && header.is_some()
            && line.text.starts_with([' ', '\t'])
            && gpus[p].name.is_none()
        {
            gpus[p].name = meaningful(t);
            last_row = None;
            continue;
        }
        // Text around the table (errors, warnings); the 6.x second header row starts with `(`.
        let around_table = header.is_some() && !t.starts_with('(');
        if around_table || (header.is_none() && banner) {
            messages.push(t.to_owned());
        }
    }
    if !banner && gpus.is_empty() {
        return Err(ParseError::NotRecognized {
            tool: "rocm-smi",
            reason: "no `ROCm System Management Interface` banner and no GPU rows",
        });
    }
    Ok(RocmSmi {
        view,
        gpus,
        messages,
        driver_version,
        complete,
    })
}

fn apply_key_line(gpu: &mut Gpu, rest: &str, messages: &mut Vec<String>, whole: &str) {
    let Some((key, value)) = rest.split_once(':') else {
        messages.push(whole.to_owned());
        return;
    };
    let value = value.trim();
    match key.trim().to_ascii_lowercase().as_str() {
        "card series" | "card model" if value.starts_with("0x") => {
            gpu.device_id = Some(value.to_ascii_lowercase())
        }
        "card series" | "marketing name" => gpu.name = meaningful(value),
        "device id" => gpu.device_id = meaningful(value).map(|v| v.to_ascii_lowercase()),
        "device rev" => gpu.revision = meaningful(value).map(|v| v.to_ascii_lowercase()),
        "gfx version" => gpu.gfx_version = meaningful(value),
        "vbios version" => gpu.vbios = meaningful(value),
        "pci bus" => gpu.pci_bus = normalize_bdf(value),
        _ => messages.push(whole.to_owned()),
    }
}

fn parse_row(index: u32, row: &str, header: &[String]) -> Gpu {
    let mut gpu = Gpu {
        index,
        ..Gpu::default()
    };
    let fields: Vec<&str> = row.split_whitespace().collect();
    if fields.len() == header.len() {
        for (name, value) in header.iter().zip(&fields) {
            gpu.columns.insert(name.clone(), (*value).to_owned());
        }
        gpu.node = header
            .iter()
            .position(|h| h.eq_ignore_ascii_case("NODE"))
            .and_then(|i| fields[i].parse().ok());
        gpu.vbios = header
            .iter()
            .position(|h| h == "VBIOS")
            .and_then(|i| meaningful(fields[i]));
    }
    if let Some(caps) = model_revision_re().captures(row) {
        gpu.device_id = Some(format!("0x{}", caps[1].to_ascii_lowercase()));
        gpu.revision = Some(format!("0x{}", caps[2].to_ascii_lowercase()));
    } else if let Some(caps) = device_id_re().captures(row) {
        gpu.device_id = Some(format!("0x{}", caps[1].to_ascii_lowercase()));
    }
    gpu.gfx_version = gfx_re().captures(row).map(|c| c[1].to_owned());
    gpu.pci_bus = bus_re().captures(row).and_then(|c| normalize_bdf(&c[1]));
    if gpu.vbios.is_none() {
        gpu.vbios = vbios_re().captures(row).map(|c| c[1].to_owned());
    }
    gpu
}

fn merge_row(existing: &mut Gpu, row: Gpu) {
    existing.node = existing.node.or(row.node);
    existing.device_id = existing.device_id.take().or(row.device_id);
    existing.revision = existing.revision.take().or(row.revision);
    existing.gfx_version = existing.gfx_version.take().or(row.gfx_version);
    existing.vbios = existing.vbios.take().or(row.vbios);
    existing.pci_bus = existing.pci_bus.take().or(row.pci_bus);
    existing.name = existing.name.take().or(row.name);
    existing.columns.extend(row.columns);
}

impl RocmSmi {
    /// Merges GPUs that carry an identity fact (address, device id, ISA or name);
    /// `GFX VER` is read from the KFD topology, so it is the native ISA.
    pub fn apply(&self, fp: &mut Fingerprint) {
        for row in &self.gpus {
            if !row.identified() {
                continue;
            }
            let mut gpu = GpuInfo::new(Vendor::Amd);
            gpu.pci_bus = row.pci_bus.clone();
            gpu.pci_device_id = row.device_id.clone();
            gpu.pci_revision = row.revision.clone();
            gpu.native_isa = row.gfx_version.clone();
            gpu.vbios = row.vbios.clone();
            gpu.name = row.name.clone();
            gpu.sources.push("rocm-smi".to_owned());
            derive_gpu_facts(&mut gpu);
            merge_gpu(fp, gpu);
        }
    }
}
