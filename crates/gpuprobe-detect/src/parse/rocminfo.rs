//! `rocminfo` output (ROCm 5.x to 7.x layouts).
//!
//! Layout facts this parser relies on (from real outputs in `fixtures/rocminfo/`): the
//! first line says `ROCk module version X is loaded` (the amdgpu module has a version file:
//! a DKMS build) or `ROCk module is loaded` (in-box driver); agents start at `Agent N`
//! between `*******` lines; `Name:` appears for agents *and* for their ISAs
//! (`amdgcn-amd-amdhsa--gfx1151`, `...--gfx11-generic`, with target features such as
//! `gfx90a:sramecc+:xnack-`); NPUs appear as agents (`aie2`, Device Type `DSP`); values are
//! padded with trailing spaces; newer ROCr prints `Memory Properties: APU`,
//! `XNACK enabled:` and `VMM Support:`; older ones lack `Alloc Recommended Granule`.

use gpuprobe_model::Fingerprint;
use gpuprobe_model::{DriverSource, GpuInfo, Vendor};

use super::ParseError;
use crate::isa;
use crate::merge::{derive_gpu_facts, merge_gpu, note_amdgpu};
use crate::text::{
    bdf_from_location, body_lines, leading_u64, meaningful, pci_id, split_key_value,
};

/// What the first line says about the kernel module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RockModule {
    /// `ROCk module version X is loaded`: the module has a version (DKMS build).
    LoadedWithVersion(String),
    /// `ROCk module is loaded`: in-box driver.
    Loaded,
    /// `ROCk module is NOT loaded`.
    NotLoaded,
}

/// One HSA agent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Agent {
    /// `Agent N` number.
    pub number: Option<u32>,
    /// Agent `Name:` (`gfx1151`, a CPU model, `aie2`).
    pub name: String,
    /// `Marketing Name:`.
    pub marketing_name: Option<String>,
    /// `Vendor Name:`.
    pub vendor_name: Option<String>,
    /// `Device Type:` (`CPU`, `GPU`, `DSP`).
    pub device_type: Option<String>,
    /// `Node:`.
    pub node: Option<u32>,
    /// `Chip ID:` (the PCI device id).
    pub chip_id: Option<u32>,
    /// `ASIC Revision:`.
    pub asic_revision: Option<u32>,
    /// `Cacheline Size:` in bytes.
    pub cacheline_bytes: Option<u32>,
    /// `BDFID:` (`bus << 8 | dev << 3 | fn`).
    pub bdfid: Option<u32>,
    /// `Compute Unit:`.
    pub compute_units: Option<u32>,
    /// `Memory Properties: APU` was printed.
    pub apu: bool,
    /// `Uuid:`.
    pub uuid: Option<String>,
    /// ISA names listed under `ISA Info:` (full strings, with target features).
    pub isas: Vec<String>,
}

impl Agent {
    /// Whether the agent is a GPU.
    pub fn is_gpu(&self) -> bool {
        match self.device_type.as_deref() {
            Some(t) => t.eq_ignore_ascii_case("GPU"),
            None => self.name.starts_with("gfx"),
        }
    }
}

/// Parsed `rocminfo` output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rocminfo {
    /// The ROCk module line, when present.
    pub rock_module: Option<RockModule>,
    /// `Runtime Version:` of the HSA runtime.
    pub runtime_version: Option<String>,
    /// `XNACK enabled:` (newer ROCr).
    pub xnack_enabled: Option<bool>,
    /// Agents in order.
    pub agents: Vec<Agent>,
    /// Whether `*** Done ***` closed the output (false: truncated paste).
    pub complete: bool,
    /// Error lines (`hsa api call failure`, `HSA_STATUS_ERROR_...`).
    pub errors: Vec<String>,
}

/// Parses `rocminfo` output.
pub fn parse(text: &str) -> Result<Rocminfo, ParseError> {
    let mut out = Rocminfo::default();
    let mut recognised = false;
    let mut current: Option<Agent> = None;
    let mut in_isa = false;
    for line in body_lines(text) {
        let t = line.text.trim();
        if t.is_empty() {
            continue;
        }
        if t.starts_with("ROCk module") {
            recognised = true;
            out.rock_module = Some(if t.contains("NOT loaded") {
                RockModule::NotLoaded
            } else if let Some(rest) = t.strip_prefix("ROCk module version ") {
                let version = rest
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                RockModule::LoadedWithVersion(version)
            } else {
                RockModule::Loaded
            });
            continue;
        }
        if t.contains("HSA System Attributes") || t == "HSA Agents" {
            recognised = true;
            continue;
        }
        if t.starts_with("*** Done ***") {
            out.complete = true;
            continue;
        }
        if t.contains("HSA_STATUS_ERROR")
            || t.starts_with("hsa api call failure")
            || t.contains("Failed to get")
        {
            out.errors.push(t.to_owned());
            continue;
        }
        if t.chars().all(|c| c == '*' || c == '=') {
            // Separators around `Agent N` and section titles.
            continue;
        }
        if let Some(number) = t
            .strip_prefix("Agent ")
            .and_then(|n| n.trim().parse::<u32>().ok())
        {
            recognised = true;
            if let Some(agent) = current.take() {
                out.agents.push(agent);
            }
            current = Some(Agent {
                number: Some(number),
                ..Agent::default()
            });
            in_isa = false;
            continue;
        }
        if t.starts_with("ISA Info") {
            in_isa = true;
            continue;
        }
        if t.starts_with("ISA ") && t[4..].trim().parse::<u32>().is_ok() {
            in_isa = true;
            continue;
        }
        let Some((key, value)) = split_key_value(t) else {
            continue;
        };
        match current.as_mut() {
            None => match key {
                "Runtime Version" => out.runtime_version = meaningful(value),
                "XNACK enabled" => out.xnack_enabled = yes_no(value),
                _ => {}
            },
            Some(agent) => {
                if key == "Name" {
                    if in_isa || value.starts_with("amdgcn-") {
                        agent.isas.push(value.to_owned());
                    } else if agent.name.is_empty() {
                        agent.name = value.to_owned();
                    }
                    continue;
                }
                if in_isa {
                    continue;
                }
                let number = || leading_u64(value).and_then(|n| u32::try_from(n).ok());
                match key {
                    "Marketing Name" => agent.marketing_name = meaningful(value),
                    "Vendor Name" => agent.vendor_name = meaningful(value),
                    "Device Type" => agent.device_type = meaningful(value),
                    "Node" => agent.node = number(),
                    "Chip ID" => agent.chip_id = number(),
                    "ASIC Revision" => agent.asic_revision = number(),
                    "Cacheline Size" => agent.cacheline_bytes = number(),
                    "BDFID" => agent.bdfid = number(),
                    "Compute Unit" => agent.compute_units = number(),
                    "Uuid" => agent.uuid = meaningful(value),
                    "Memory Properties" => agent.apu = value.split_whitespace().any(|w| w == "APU"),
                    _ => {}
                }
            }
        }
    }
    if let Some(agent) = current.take() {
        out.agents.push(agent);
    }
    if !recognised {
        return Err(ParseError::NotRecognized {
            tool: "rocminfo",
            reason: "no `ROCk module`, `HSA Agents` or `Agent N` line",
        });
    }
    Ok(out)
}

fn yes_no(value: &str) -> Option<bool> {
    match value.trim().to_ascii_uppercase().as_str() {
        "YES" | "TRUE" => Some(true),
        "NO" | "FALSE" => Some(false),
        _ => None,
    }
}

impl Rocminfo {
    /// GPU agents only (no CPUs, no NPUs).
    pub fn gpu_agents(&self) -> impl Iterator<Item = &Agent> {
        self.agents.iter().filter(|a| a.is_gpu())
    }

    /// Merges the facts into a fingerprint: one GPU per GPU agent (runtime ISA from the
    /// agent name, features from the ISA list, PCI address from BDFID assuming PCI domain
    /// 0, device id from Chip ID), and the amdgpu driver kind from the ROCk line.
    pub fn apply(&self, fp: &mut Fingerprint) {
        for agent in self.gpu_agents() {
            let mut gpu = GpuInfo::new(Vendor::Amd);
            let (runtime_isa, mut features) = isa::split_isa(&agent.name);
            // The agent's own ISA entry carries the target features (`gfx90a:xnack-`).
            if let Some(full) = agent
                .isas
                .iter()
                .find(|i| isa::split_isa(i).0 == runtime_isa)
            {
                features = isa::split_isa(full).1;
            }
            gpu.runtime_isa = Some(runtime_isa).filter(|s| s.starts_with("gfx"));
            gpu.isa_features = features;
            gpu.name = agent.marketing_name.clone();
            gpu.pci_device_id = agent
                .chip_id
                .filter(|id| *id != 0)
                .map(|id| pci_id(u64::from(id)));
            gpu.pci_bus = agent
                .bdfid
                .filter(|b| *b != 0)
                .and_then(|b| bdf_from_location(0, b));
            gpu.compute_units = agent.compute_units;
            gpu.cacheline_bytes = agent.cacheline_bytes;
            if agent.apu {
                gpu.is_apu = Some(true);
            }
            gpu.sources.push("rocminfo".to_owned());
            derive_gpu_facts(&mut gpu);
            merge_gpu(fp, gpu);
        }
        if let Some(module) = &self.rock_module {
            let (loaded, source, version) = match module {
                RockModule::LoadedWithVersion(v) => (true, DriverSource::Dkms, Some(v.clone())),
                RockModule::Loaded => (true, DriverSource::Inbox, None),
                RockModule::NotLoaded => (false, DriverSource::Unknown, None),
            };
            note_amdgpu(fp, loaded, source, version);
        }
    }
}
