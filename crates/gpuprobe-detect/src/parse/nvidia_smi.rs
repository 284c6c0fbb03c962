//! `nvidia-smi` output: the default dashboard, `nvidia-smi -q`, and
//! `nvidia-smi --query-gpu=... --format=csv` (with or without `noheader`/`nounits`).
//! Real samples from an H100 host are in `fixtures/nvidia-smi/`.
//!
//! nvidia-smi's GPU index is PCI order; CUDA's default order (`CUDA_DEVICE_ORDER`
//! unset = fastest first) may differ, so it is never used as the framework index.

use std::collections::BTreeMap;

use gpuprobe_model::Fingerprint;
use gpuprobe_model::{GpuInfo, Vendor};

use super::ParseError;
use crate::merge::{derive_gpu_facts, fill, merge_gpu, nvidia_driver};
use crate::text::static_regex;
use crate::text::{Line, body_lines, kv_tree, meaningful, normalize_bdf, size_to_bytes};

/// Which nvidia-smi output the text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The default dashboard.
    Dashboard,
    /// `nvidia-smi -q`.
    Query,
    /// `--query-gpu ... --format=csv`.
    Csv,
}

/// One GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gpu {
    /// nvidia-smi index (PCI order).
    pub index: Option<u32>,
    /// Product name.
    pub name: Option<String>,
    /// PCI address, normalised.
    pub pci_bus: Option<String>,
    /// Total framebuffer memory in bytes.
    pub memory_total_bytes: Option<u64>,
    /// Compute capability (`9.0`, csv `compute_cap`).
    pub compute_cap: Option<String>,
    /// VBIOS version.
    pub vbios: Option<String>,
    /// GPU UUID.
    pub uuid: Option<String>,
    /// Product architecture (`Hopper`).
    pub architecture: Option<String>,
    /// Virtualization mode (`Pass-Through`, `None`, `VGPU`).
    pub virtualization_mode: Option<String>,
    /// PCI device id (`0x2330`), from `Device Id : 0x233010DE`.
    pub device_id: Option<String>,
    /// Every csv column by header name.
    pub columns: BTreeMap<String, String>,
}

/// Parsed nvidia-smi output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvidiaSmi {
    /// Shape of the output.
    pub format: Format,
    /// Driver version.
    pub driver_version: Option<String>,
    /// Highest CUDA version the driver supports.
    pub cuda_version: Option<String>,
    /// GPUs in nvidia-smi order.
    pub gpus: Vec<Gpu>,
}

/// Parses any of the nvidia-smi output shapes.
pub fn parse(text: &str) -> Result<NvidiaSmi, ParseError> {
    let lines = body_lines(text);
    if lines.iter().any(|l| l.text.contains("NVSMI LOG")) {
        return Ok(parse_query(&lines));
    }
    if lines.iter().any(|l| l.text.contains("NVIDIA-SMI ")) {
        return Ok(parse_dashboard(&lines));
    }
    if let Some(csv) = parse_csv(&lines) {
        return Ok(csv);
    }
    Err(ParseError::NotRecognized {
        tool: "nvidia-smi",
        reason: "no NVIDIA-SMI dashboard, no NVSMI LOG and no --query-gpu csv header",
    })
}

fn parse_dashboard(lines: &[Line]) -> NvidiaSmi {
    let header =
        static_regex!(r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s*(\S+)(?:\s+CUDA Version:\s*(\S+))?");
    let row = static_regex!(
        r"^\|\s*(\d+)\s+(.+?)\s+(On|Off|WDDM|TCC|N/A)\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
    );
    let memory = static_regex!(r"(\d+)MiB\s*/\s*(\d+)MiB");
    let mut out = NvidiaSmi {
        format: Format::Dashboard,
        driver_version: None,
        cuda_version: None,
        gpus: Vec::new(),
    };
    let mut awaiting_memory = false;
    for line in lines {
        let t = line.text.trim();
        if let Some(c) = header.captures(t) {
            out.driver_version = meaningful(&c[2]);
            out.cuda_version = c.get(3).and_then(|m| meaningful(m.as_str()));
            continue;
        }
        if t.contains("Processes:") {
            break;
        }
        if let Some(c) = row.captures(t) {
            out.gpus.push(Gpu {
                index: c[1].parse().ok(),
                name: meaningful(&c[2]),
                pci_bus: normalize_bdf(&c[4]),
                ..Gpu::default()
            });
            awaiting_memory = true;
            continue;
        }
        if awaiting_memory
            && let Some(c) = memory.captures(t)
            && let Some(gpu) = out.gpus.last_mut()
        {
            gpu.memory_total_bytes = c[2].parse::<u64>().ok().map(|mib| mib << 20);
            awaiting_memory = false;
        }
    }
    out
}

/// The PCI device id from nvidia-smi's combined id: `0x233010DE` is device 0x2330 of
/// vendor 0x10de.
fn device_id_of(combined: &str) -> Option<String> {
    let hex = combined
        .trim()
        .trim_start_matches("0x")
        .trim_start_matches("0X");
    (hex.len() == 8 && hex.is_ascii()).then(|| format!("0x{}", hex[..4].to_ascii_lowercase()))
}

fn parse_query(lines: &[Line]) -> NvidiaSmi {
    let mut out = NvidiaSmi {
        format: Format::Query,
        driver_version: None,
        cuda_version: None,
        gpus: Vec::new(),
    };
    for node in kv_tree(lines) {
        match node.key.as_str() {
            "Driver Version" => out.driver_version = node.value.as_deref().and_then(meaningful),
            "CUDA Version" => out.cuda_version = node.value.as_deref().and_then(meaningful),
            key if key.starts_with("GPU ") => {
                let device_id = node
                    .path_value(&["PCI", "Device Id"])
                    .and_then(|v| device_id_of(&v));
                out.gpus.push(Gpu {
                    index: node
                        .child_value("Minor Number")
                        .and_then(|v| v.parse().ok()),
                    name: node.child_value("Product Name"),
                    pci_bus: node
                        .path_value(&["PCI", "Bus Id"])
                        .or_else(|| Some(key[4..].to_owned()))
                        .as_deref()
                        .and_then(normalize_bdf),
                    memory_total_bytes: node
                        .path_value(&["FB Memory Usage", "Total"])
                        .as_deref()
                        .and_then(size_to_bytes),
                    compute_cap: None,
                    vbios: node.child_value("VBIOS Version"),
                    uuid: node.child_value("GPU UUID"),
                    architecture: node.child_value("Product Architecture"),
                    virtualization_mode: node
                        .path_value(&["GPU Virtualization Mode", "Virtualization Mode"]),
                    device_id,
                    columns: BTreeMap::new(),
                });
            }
            _ => {}
        }
    }
    out
}

/// Known `--query-gpu` field names (a subset is enough to recognise a header).
const CSV_FIELDS: &[&str] = &[
    "index",
    "name",
    "pci.bus_id",
    "driver_version",
    "memory.total",
    "compute_cap",
    "uuid",
    "vbios_version",
    "serial",
    "count",
    "pci.device_id",
    "memory.used",
    "memory.free",
    "temperature.gpu",
    "utilization.gpu",
    "power.draw",
    "persistence_mode",
];

fn csv_field_name(column: &str) -> String {
    // `memory.total [MiB]` → `memory.total`.
    column
        .split(" [")
        .next()
        .unwrap_or(column)
        .trim()
        .to_owned()
}

fn parse_csv(lines: &[Line]) -> Option<NvidiaSmi> {
    let mut iter = lines.iter().filter(|l| !l.text.trim().is_empty());
    let header_line = iter.find(|l| {
        let fields: Vec<String> = l.text.split(',').map(csv_field_name).collect();
        fields.len() >= 2
            && fields
                .iter()
                .filter(|f| CSV_FIELDS.contains(&f.as_str()))
                .count()
                >= 2
    })?;
    let header: Vec<String> = header_line.text.split(',').map(csv_field_name).collect();
    let mut out = NvidiaSmi {
        format: Format::Csv,
        driver_version: None,
        cuda_version: None,
        gpus: Vec::new(),
    };
    for line in iter {
        let values: Vec<&str> = line.text.split(',').map(str::trim).collect();
        if values.len() != header.len() {
            continue;
        }
        let columns: BTreeMap<String, String> = header
            .iter()
            .cloned()
            .zip(values.iter().map(|v| (*v).to_owned()))
            .collect();
        let get = |k: &str| columns.get(k).and_then(|v| meaningful(v));
        if let Some(driver) = get("driver_version") {
            out.driver_version.get_or_insert(driver);
        }
        out.gpus.push(Gpu {
            index: get("index").and_then(|v| v.parse().ok()),
            name: get("name"),
            pci_bus: get("pci.bus_id").as_deref().and_then(normalize_bdf),
            memory_total_bytes: get("memory.total").as_deref().and_then(|v| {
                // `--format=csv,nounits` drops the unit; the header says MiB.
                if v.chars().all(|c| c.is_ascii_digit()) {
                    v.parse::<u64>().ok().map(|m| m << 20)
                } else {
                    size_to_bytes(v)
                }
            }),
            compute_cap: get("compute_cap"),
            vbios: get("vbios_version"),
            uuid: get("uuid"),
            architecture: None,
            virtualization_mode: None,
            device_id: get("pci.device_id").and_then(|v| device_id_of(&v)),
            columns,
        });
    }
    Some(out)
}

impl NvidiaSmi {
    /// Merges the driver, CUDA driver version and GPUs.
    pub fn apply(&self, fp: &mut Fingerprint) {
        if self.driver_version.is_some() || self.cuda_version.is_some() {
            let driver = nvidia_driver(fp);
            fill(&mut driver.version, self.driver_version.clone());
            fill(&mut driver.cuda_driver_version, self.cuda_version.clone());
        }
        for row in &self.gpus {
            let mut gpu = GpuInfo::new(Vendor::Nvidia);
            gpu.name = row.name.clone();
            gpu.pci_bus = row.pci_bus.clone();
            gpu.pci_vendor_id = row.device_id.as_ref().map(|_| "0x10de".to_owned());
            gpu.pci_device_id = row.device_id.clone();
            gpu.vram_total_bytes = row.memory_total_bytes;
            gpu.compute_capability = row.compute_cap.clone();
            gpu.vbios = row.vbios.clone();
            gpu.sources.push("nvidia-smi".to_owned());
            derive_gpu_facts(&mut gpu);
            merge_gpu(fp, gpu);
            if let Some(mode) = &row.virtualization_mode
                && let Some(bus) = &row.pci_bus
            {
                fp.extra
                    .entry(format!("gpu.{bus}.virtualization_mode"))
                    .or_insert_with(|| mode.clone());
            }
        }
    }
}
