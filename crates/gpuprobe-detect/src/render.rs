//! The readable view of a fingerprint for `gpuprobe env`: plain text, one section per
//! layer (host, GPUs, drivers, ROCm, CUDA, Python, environment, kernel log, other facts,
//! not readable), keys aligned in one column. No colour here, so it pastes cleanly into
//! issues; on a terminal `gpuprobe_report::env` puts the section headings in bold.

use std::fmt::Write as _;

use gpuprobe_model::Fingerprint;
use gpuprobe_model::visible_line;
use gpuprobe_model::{
    ComponentVersion, CondaEnv, CpuDetails, DriverSource, GpuInfo, KernelEvent, LibraryInfo,
    TorchInfo, Vendor,
};

const KEY_WIDTH: usize = 16;

struct Out {
    text: String,
}

impl Out {
    fn section(&mut self, title: &str) {
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(title);
        self.text.push('\n');
    }

    /// Rows whose keys may be longer than the usual column (variable names): aligned
    /// on the longest key of the table.
    fn table<'a>(&mut self, rows: impl Iterator<Item = (&'a String, &'a String)> + Clone) {
        let width = rows
            .clone()
            .map(|(k, _)| k.len())
            .max()
            .unwrap_or(0)
            .max(KEY_WIDTH);
        for (key, value) in rows {
            let _ = writeln!(self.text, "  {key:<width$} {value}");
        }
    }

    fn row(&mut self, key: &str, value: impl AsRef<str>) {
        let mut lines = value.as_ref().lines();
        let first = lines.next().unwrap_or_default();
        let _ = writeln!(self.text, "  {key:<KEY_WIDTH$} {first}");
        for more in lines {
            let _ = writeln!(self.text, "  {:<KEY_WIDTH$} {more}", "");
        }
    }
}

/// Formats a byte count with a binary unit (`80.0 GiB`).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn vendor_name(vendor: Vendor) -> &'static str {
    match vendor {
        Vendor::Amd => "AMD",
        Vendor::Nvidia => "NVIDIA",
        Vendor::Intel => "Intel",
        Vendor::Other => "other",
    }
}

fn library_line(lib: &LibraryInfo) -> String {
    let mut line = format!("{}  {}", lib.name, lib.path);
    match (&lib.version, &lib.origin) {
        (Some(v), Some(o)) => {
            let _ = write!(line, "  (version {v}; {o})");
        }
        (Some(v), None) => {
            let _ = write!(line, "  (version {v})");
        }
        (None, Some(o)) => {
            let _ = write!(line, "  ({o})");
        }
        (None, None) => {}
    }
    line
}

fn gpu_rows(out: &mut Out, number: usize, gpu: &GpuInfo) {
    let label = match gpu.index {
        Some(i) => format!("GPU {number} (cuda:{i})"),
        None => format!("GPU {number}"),
    };
    out.row(&label, gpu.name.as_deref().unwrap_or("(name unknown)"));
    let mut identity = vendor_name(gpu.vendor).to_owned();
    if let Some(bus) = &gpu.pci_bus {
        let _ = write!(identity, " · PCI {bus}");
    }
    if let (Some(v), Some(d)) = (&gpu.pci_vendor_id, &gpu.pci_device_id) {
        let _ = write!(identity, " ({v}:{d}");
        if let Some(r) = &gpu.pci_revision {
            let _ = write!(identity, " rev {r}");
        }
        identity.push(')');
    } else if let Some(d) = &gpu.pci_device_id {
        let _ = write!(identity, " (device {d})");
    }
    out.row("", identity);
    let mut arch = Vec::new();
    match (&gpu.native_isa, &gpu.runtime_isa) {
        (Some(n), Some(r)) if n == r => arch.push(format!("ISA {n}")),
        (Some(n), Some(r)) => arch.push(format!("ISA {n} native, runtime reports {r}")),
        (Some(n), None) => arch.push(format!("ISA {n} (native)")),
        (None, Some(r)) => arch.push(format!("ISA {r} (as the runtime reports it)")),
        (None, None) => {}
    }
    if !gpu.isa_features.is_empty() {
        arch.push(format!("features {}", gpu.isa_features.join(":")));
    }
    if let Some(cc) = &gpu.compute_capability {
        arch.push(format!("compute capability {cc}"));
    }
    if let Some(cu) = gpu.compute_units {
        arch.push(format!(
            "{cu} {}",
            if gpu.vendor == Vendor::Nvidia {
                "SMs"
            } else {
                "CUs"
            }
        ));
    }
    match gpu.is_apu {
        Some(true) => arch.push("APU (shares system memory)".to_owned()),
        Some(false) => arch.push("discrete".to_owned()),
        None => {}
    }
    if !arch.is_empty() {
        out.row("", arch.join(" · "));
    }
    let mut memory = Vec::new();
    if let Some(v) = gpu.vram_total_bytes {
        let label = if gpu.is_apu == Some(true) {
            "VRAM carve-out"
        } else {
            "VRAM"
        };
        memory.push(format!("{label} {}", human_bytes(v)));
    }
    if let Some(v) = gpu.vis_vram_total_bytes {
        memory.push(format!("CPU-visible {}", human_bytes(v)));
    }
    if let Some(v) = gpu.gtt_total_bytes {
        memory.push(format!("GTT {}", human_bytes(v)));
    }
    if let Some(c) = gpu.cacheline_bytes {
        memory.push(format!("cache line {c} B"));
    }
    if !memory.is_empty() {
        out.row("", memory.join(" · "));
    }
    let mut nodes = Vec::new();
    if let Some(c) = &gpu.drm_card {
        nodes.push(c.clone());
    }
    if let Some(r) = &gpu.render_node {
        nodes.push(r.clone());
    }
    if let Some(v) = &gpu.vbios {
        nodes.push(format!("VBIOS {v}"));
    }
    if !nodes.is_empty() {
        out.row("", nodes.join(" · "));
    }
    if !gpu.firmware.is_empty() {
        let fw: Vec<String> = gpu
            .firmware
            .iter()
            .map(|f| match f.feature {
                Some(feature) => format!("{} {} (feature {feature})", f.name, f.version),
                None => format!("{} {}", f.name, f.version),
            })
            .collect();
        out.row("", format!("firmware {}", fw.join(", ")));
    }
    if !gpu.sources.is_empty() {
        out.row("", format!("from {}", gpu.sources.join(", ")));
    }
}

/// Renders the fingerprint as aligned plain text.
pub fn render_text(fp: &Fingerprint) -> String {
    let mut out = Out {
        text: String::new(),
    };
    let absent = Absent {
        live: fp.source == "live",
    };
    host_section(&mut out, fp, absent);
    gpus_section(&mut out, fp, absent);
    drivers_section(&mut out, fp, absent);
    rocm_section(&mut out, fp, absent);
    cuda_section(&mut out, fp, absent);
    python_section(&mut out, fp, absent);
    gpu_libraries_section(&mut out, fp);
    toolchain_section(&mut out, fp);
    environment_section(&mut out, fp, absent);
    trailing_sections(&mut out, fp);
    // Every value here was read from tools, files and pastes: the last guard before a
    // terminal.
    gpuprobe_model::terminal_safe(&out.text).into_owned()
}

/// How to say that something is absent. Absence means "not there" on a live machine, but
/// only "not shown" in pasted logs.
#[derive(Clone, Copy)]
struct Absent {
    live: bool,
}

impl Absent {
    fn text(self, live_text: &'static str) -> &'static str {
        if self.live {
            live_text
        } else {
            "not shown in the logs"
        }
    }
}

/// "Host (source)": name, OS, kernel, CPU, memory, platform, Secure Boot, IOMMU, access.
fn host_section(out: &mut Out, fp: &Fingerprint, absent: Absent) {
    let host = &fp.host;
    out.section(&format!(
        "Host ({})",
        if fp.source.is_empty() {
            "unknown source"
        } else {
            fp.source.as_str()
        }
    ));
    if let Some(name) = &host.hostname {
        out.row("Hostname", name);
    }
    let os = match (&host.distro_pretty, &host.os) {
        (Some(p), _) => p.clone(),
        (None, Some(os)) => os.clone(),
        (None, None) => "unknown".to_owned(),
    };
    out.row("OS", os);
    // Windows has no Linux kernel to show; its build takes the row.
    let windows = host.os.as_deref() == Some("windows");
    let kernel = match (&host.kernel_release, &host.distro_version) {
        (Some(release), _) => release.clone(),
        (None, Some(build)) if windows => format!("none (Windows build {build})"),
        (None, None) if windows => "none (Windows)".to_owned(),
        (None, _) => "unknown".to_owned(),
    };
    out.row("Kernel", kernel);
    let cpu = match (&host.cpu_model, &host.cpu_arch) {
        (Some(m), Some(a)) => format!("{m} ({a})"),
        (Some(m), None) => m.clone(),
        (None, Some(a)) => a.clone(),
        (None, None) => "unknown".to_owned(),
    };
    out.row("CPU", cpu);
    if let Some(details) = &host.cpu {
        cpu_rows(out, details);
    }
    match (&host.libc_name, &host.libc_version) {
        (Some(n), Some(v)) => out.row("libc", format!("{n} {v}")),
        (Some(n), None) => out.row("libc", n),
        _ => {}
    }
    if let Some(mem) = host.mem_total_bytes {
        out.row("Memory", human_bytes(mem));
    }
    let mut platform = Vec::new();
    match &host.virtualization {
        Some(v) => platform.push(format!("virtual machine: {v}")),
        None => platform.push(absent.text("no hypervisor detected").to_owned()),
    }
    if let Some(c) = &host.container {
        platform.push(format!("container: {c}"));
    }
    if host.wsl {
        platform.push("WSL".to_owned());
    }
    out.row("Platform", platform.join(" · "));
    out.row(
        "Secure Boot",
        match host.secure_boot {
            Some(true) => "enabled",
            Some(false) => "disabled",
            None => "unknown",
        },
    );
    out.row("IOMMU", host.iommu.as_deref().unwrap_or("unknown"));
    if let Some(uid) = host.uid {
        let access = if host.inaccessible_device_nodes.is_empty() {
            "GPU device nodes accessible".to_owned()
        } else {
            format!("cannot open {}", host.inaccessible_device_nodes.join(", "))
        };
        out.row("User", format!("uid {uid} · {access}"));
    }
    if let Some(cmdline) = &host.kernel_cmdline {
        out.row("Kernel cmdline", cmdline);
    }
}

/// The CPU's identity and topology under the model name.
fn cpu_rows(out: &mut Out, cpu: &CpuDetails) {
    let mut identity = Vec::new();
    if let Some(v) = &cpu.vendor_id {
        identity.push(v.clone());
    }
    for (label, value) in [
        ("family", &cpu.family),
        ("model", &cpu.model),
        ("stepping", &cpu.stepping),
    ] {
        if let Some(v) = value {
            identity.push(format!("{label} {v}"));
        }
    }
    let mut topology = Vec::new();
    if let Some(n) = cpu.logical_cpus {
        let online = cpu.online.as_deref().unwrap_or("?");
        topology.push(format!("{n} CPUs online ({online})"));
    }
    if let (Some(s), Some(c), Some(t)) = (cpu.sockets, cpu.cores_per_socket, cpu.threads_per_core) {
        topology.push(format!("{s} socket(s) × {c} core(s) × {t} thread(s)"));
    }
    if !cpu.numa_nodes.is_empty() {
        let nodes: Vec<String> = cpu
            .numa_nodes
            .iter()
            .map(|(n, l)| format!("{n} {l}"))
            .collect();
        topology.push(format!("NUMA {}", nodes.join(", ")));
    }
    if let Some(h) = &cpu.hypervisor_vendor {
        let kind = cpu.virtualization_type.as_deref().unwrap_or("");
        topology.push(format!("hypervisor {h} {kind}").trim_end().to_owned());
    }
    if !identity.is_empty() {
        out.row("", identity.join(" · "));
    }
    if !topology.is_empty() {
        out.row("", topology.join(" · "));
    }
    let wanted: Vec<&str> = cpu
        .flags
        .iter()
        .map(String::as_str)
        .filter(|f| {
            f.starts_with("avx")
                || f.starts_with("amx")
                || matches!(
                    *f,
                    "f16c" | "fma" | "sve" | "sve2" | "fphp" | "asimdhp" | "bf16"
                )
        })
        .collect();
    if !wanted.is_empty() {
        out.row("", format!("vector flags {}", wanted.join(" ")));
    }
}

/// "GPU libraries": versions of cuDNN, NCCL, cuBLAS, MIOpen, RCCL, rocBLAS, hipBLASLt, ...
/// from their headers and wheels; more than one source for a library is shown as found.
fn gpu_libraries_section(out: &mut Out, fp: &Fingerprint) {
    let mut components: Vec<&ComponentVersion> = fp
        .cuda
        .iter()
        .flat_map(|c| &c.components)
        .chain(fp.rocm.iter().flat_map(|r| &r.components))
        .collect();
    components.sort_by(|a, b| a.name.cmp(&b.name).then(a.source.cmp(&b.source)));
    if components.is_empty() {
        return;
    }
    out.section("GPU libraries");
    for c in components {
        out.row(&c.name, format!("{}  ({})", c.version, c.source));
    }
}

/// "Toolchain": the compilers and build tools found.
fn toolchain_section(out: &mut Out, fp: &Fingerprint) {
    let t = &fp.toolchain;
    if t.is_empty() {
        return;
    }
    out.section("Toolchain");
    for (name, tool) in [
        ("gcc", &t.gcc),
        ("clang", &t.clang),
        ("cmake", &t.cmake),
        ("nvcc", &t.nvcc),
        ("hipcc", &t.hipcc),
    ] {
        if let Some(tool) = tool {
            let version = tool.version.as_deref().unwrap_or("version unknown");
            out.row(name, format!("{version}  {}  ({})", tool.path, tool.banner));
        }
    }
}

/// "GPUs": one block per GPU.
fn gpus_section(out: &mut Out, fp: &Fingerprint, absent: Absent) {
    out.section("GPUs");
    if fp.gpus.is_empty() {
        out.row("(none)", absent.text("no GPU found"));
    }
    for (number, gpu) in fp.gpus.iter().enumerate() {
        gpu_rows(out, number, gpu);
    }
}

/// "Drivers": amdgpu (source, parameters) and nvidia.
fn drivers_section(out: &mut Out, fp: &Fingerprint, absent: Absent) {
    out.section("Drivers");
    match &fp.amdgpu {
        Some(d) if d.loaded => {
            let kind = match (d.source, &d.version) {
                (DriverSource::Dkms, Some(v)) => format!("loaded, DKMS build {v}"),
                (DriverSource::Dkms, None) => "loaded, DKMS build".to_owned(),
                (DriverSource::Inbox, _) => "loaded, in-box (shipped with the kernel)".to_owned(),
                (DriverSource::Unknown, Some(v)) => format!("loaded, version {v}"),
                (DriverSource::Unknown, None) => "loaded".to_owned(),
            };
            out.row("amdgpu", kind);
            if !d.params.is_empty() {
                let params: Vec<String> =
                    d.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
                out.row("amdgpu params", wrap(&params, 88));
            }
            if !d.ttm_params.is_empty() {
                let params: Vec<String> = d
                    .ttm_params
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                out.row("ttm params", wrap(&params, 88));
            }
        }
        Some(_) => out.row("amdgpu", "not loaded"),
        None => out.row("amdgpu", absent.text("not present")),
    }
    match &fp.nvidia {
        Some(n) => {
            let mut line = n
                .version
                .clone()
                .unwrap_or_else(|| "version unknown".to_owned());
            if let Some(flavor) = &n.flavor {
                let _ = write!(line, " ({flavor} kernel module)");
            }
            if let Some(cuda) = &n.cuda_driver_version {
                let _ = write!(line, " · supports CUDA {cuda}");
            }
            out.row("nvidia", line);
        }
        None => out.row("nvidia", absent.text("not present")),
    }
}

/// "ROCm / HIP": the installation, or the HIP files found without one.
fn rocm_section(out: &mut Out, fp: &Fingerprint, absent: Absent) {
    out.section("ROCm / HIP");
    match &fp.rocm {
        Some(r) if r.version.is_some() || r.path.is_some() || r.pip_installed => {
            let mut line = format!(
                "ROCm {}",
                r.version.as_deref().unwrap_or("(version unknown)")
            );
            if let Some(p) = &r.path {
                let _ = write!(line, " at {p}");
            }
            if r.pip_installed {
                line.push_str(" · pip/TheRock install");
            }
            out.row("Installed", line);
            if let Some(h) = &r.hip_version {
                out.row("HIP", h);
            }
            for lib in &r.libraries {
                out.row("Library", library_line(lib));
            }
        }
        Some(r) => {
            out.row(
                "Installed",
                absent.text("no ROCm installation found (no /opt/rocm, no ROCM_PATH)"),
            );
            if let Some(h) = &r.hip_version {
                out.row("HIP", h);
            }
            for lib in &r.libraries {
                out.row(
                    "HIP file",
                    format!("a HIP library file is present: {}", library_line(lib)),
                );
            }
        }
        None => out.row(
            "Installed",
            absent.text("no ROCm installation and no HIP library found"),
        ),
    }
}

/// "CUDA": the runtime and its libraries.
fn cuda_section(out: &mut Out, fp: &Fingerprint, absent: Absent) {
    out.section("CUDA");
    match &fp.cuda {
        Some(c) => {
            out.row(
                "Runtime",
                c.runtime_version.as_deref().unwrap_or("version unknown"),
            );
            for lib in &c.libraries {
                out.row("Library", library_line(lib));
            }
        }
        None => out.row("Runtime", absent.text("no CUDA library found")),
    }
}

/// "Python": the interpreter and torch.
fn python_section(out: &mut Out, fp: &Fingerprint, absent: Absent) {
    out.section("Python");
    match &fp.python {
        Some(p) => {
            let exe = if p.executable.is_empty() {
                "(interpreter path not known)"
            } else {
                p.executable.as_str()
            };
            out.row(
                "Interpreter",
                format!(
                    "{exe} · {}",
                    p.version.as_deref().unwrap_or("version unknown")
                ),
            );
            if let Some(build) = &p.build {
                let bits = p.bits.map(|b| format!(" · {b}-bit")).unwrap_or_default();
                out.row("", format!("{build}{bits}"));
            }
            if let Some(platform) = &p.platform {
                out.row("", platform);
            }
            match (&p.torch, &p.torch_error) {
                (Some(t), _) => {
                    let mut line = format!("torch {}", t.version);
                    if let Some(h) = &t.hip {
                        let _ = write!(line, " · HIP {h}");
                    }
                    if let Some(c) = &t.cuda {
                        let _ = write!(line, " · CUDA {c}");
                    }
                    let _ = write!(
                        line,
                        " · GPU {}",
                        if t.gpu_available {
                            "available"
                        } else {
                            "not available"
                        }
                    );
                    out.row("Framework", line);
                    if !t.arch_list.is_empty() {
                        out.row("Arch list", t.arch_list.join(" "));
                    }
                    if let Some(conf) = &t.allocator_conf {
                        out.row("Allocator", format!("{}={}", conf.variable, conf.value));
                    }
                    torch_build_rows(out, t);
                }
                (None, Some(err)) => out.row("Framework", format!("torch unusable: {err}")),
                (None, None) => out.row("Framework", "torch not found"),
            }
        }
        None => out.row("Interpreter", absent.text("not inspected")),
    }
    if let Some(p) = &fp.python {
        // A package conda installed is listed with conda's, in conda's own spelling.
        let by_conda = |name: &str, version: &str| {
            p.conda
                .as_ref()
                .and_then(|c| c.packages.get(name))
                .is_some_and(|record| record.version == version)
        };
        let packages: Vec<String> = p
            .packages
            .iter()
            .filter(|(n, v)| !by_conda(n, v))
            .map(|(n, v)| format!("{n}=={v}"))
            .collect();
        if !packages.is_empty() {
            out.row("Packages", wrap(&packages, 88));
        }
        if let Some(conda) = &p.conda {
            conda_rows(out, conda);
        }
    }
}

/// The conda environment: its prefix, the packages conda installed as conda names them
/// (`channel::name=version=build`), and the records that could not be read.
fn conda_rows(out: &mut Out, conda: &CondaEnv) {
    out.row(
        "Conda",
        format!(
            "{} · {} relevant package(s) installed by conda",
            visible_line(&conda.prefix),
            conda.packages.len()
        ),
    );
    let specs: Vec<String> = conda
        .packages
        .iter()
        .map(|(name, record)| {
            let channel = if record.channel.is_empty() {
                String::new()
            } else {
                format!("{}::", record.channel)
            };
            let build = if record.build.is_empty() {
                String::new()
            } else {
                format!("={}", record.build)
            };
            visible_line(&format!("{channel}{name}={}{build}", record.version)).into_owned()
        })
        .collect();
    if !specs.is_empty() {
        out.row("", wrap(&specs, 88));
    }
    for skipped in &conda.skipped {
        out.row("", format!("skipped {}", visible_line(skipped)));
    }
}

/// torch's build flags and what it was built with.
fn torch_build_rows(out: &mut Out, t: &TorchInfo) {
    let mut flags = Vec::new();
    if let Some(r) = &t.rocm {
        flags.push(format!("ROCm SDK {r}"));
    }
    if let Some(d) = t.debug {
        flags.push(if d { "debug build" } else { "release build" }.to_owned());
    }
    if let Some(x) = t.xnnpack {
        flags.push(format!("XNNPACK {}", if x { "on" } else { "off" }));
    }
    if let Some(x) = t.xpu_available {
        flags.push(format!(
            "XPU {}",
            if x { "available" } else { "not available" }
        ));
    }
    if let Some(m) = &t.cuda_module_loading {
        flags.push(format!("CUDA_MODULE_LOADING={m}"));
    }
    if let Some(g) = &t.git_version {
        flags.push(format!("commit {}", g.get(..12).unwrap_or(g)));
    }
    if !flags.is_empty() {
        out.row("Build", flags.join(" · "));
    }
    if let Some(loaded) = loaded_libraries(t) {
        out.row("Loaded", loaded);
    }
    if let Some(b) = &t.build {
        let mut built = Vec::new();
        for (label, value) in [
            ("", &b.compiler),
            ("CUDA ", &b.cuda),
            ("cuDNN ", &b.cudnn),
            ("HIP runtime ", &b.hip_runtime),
            ("MIOpen ", &b.miopen),
            ("Magma ", &b.magma),
            ("CPU capability ", &b.cpu_capability),
        ] {
            if let Some(v) = value {
                built.push(format!("{label}{v}"));
            }
        }
        if !built.is_empty() {
            out.row("Built with", built.join(" · "));
        }
    }
}

/// The DNN and collective libraries torch loaded at run time (which may differ from those it
/// was built with, "Built with"): cuDNN and NCCL, MIOpen and RCCL on a ROCm build. A
/// CPU-only torch has neither, and says so; a GPU build that reported none shows no row.
fn loaded_libraries(t: &TorchInfo) -> Option<String> {
    let (dnn, collective) = if t.hip.is_some() {
        ("MIOpen", "RCCL")
    } else {
        ("cuDNN", "NCCL")
    };
    let loaded: Vec<String> = [(dnn, &t.cudnn_runtime), (collective, &t.nccl_runtime)]
        .into_iter()
        .filter_map(|(label, version)| version.as_ref().map(|v| format!("{label} {v}")))
        .collect();
    if !loaded.is_empty() {
        Some(loaded.join(" · "))
    } else if t.cuda.is_none() && t.hip.is_none() {
        Some(format!("no {dnn} or {collective} (a CPU-only torch)"))
    } else {
        None
    }
}

/// "Environment": the GPU-related variables set.
fn environment_section(out: &mut Out, fp: &Fingerprint, absent: Absent) {
    out.section("Environment");
    if fp.env.is_empty() {
        out.row("(none)", absent.text("no GPU-related variable is set"));
    }
    out.table(fp.env.iter());
}

/// The sections shown only when they have something: kernel log, other facts, what was
/// not readable.
fn trailing_sections(out: &mut Out, fp: &Fingerprint) {
    if !fp.kernel_events.is_empty() {
        out.section("Kernel log");
        kernel_event_rows(out, &fp.kernel_events);
    }

    if !fp.extra.is_empty() {
        out.section("Other facts");
        out.table(fp.extra.iter());
    }

    if !fp.unreadable.is_empty() {
        out.section("Not readable");
        for u in &fp.unreadable {
            out.row("-", format!("{}: {}", u.what, u.reason));
        }
    }
}

/// Up to this many kernel events are listed one per row; more are summarised per class.
const MAX_LISTED_EVENTS: usize = 20;

/// The kernel events: one row each when there are few, else one row per class (kind plus
/// client, Xid number, ring, ... and device, as triage groups them) with its count and the
/// times of its first and last event, so a fault storm of hundreds of events takes a few
/// lines.
fn kernel_event_rows(out: &mut Out, events: &[KernelEvent]) {
    if events.len() <= MAX_LISTED_EVENTS {
        for event in events {
            let mut line = event.kind.clone();
            if let Some(c) = &event.client {
                let _ = write!(line, " client {c}");
            }
            if let Some(p) = &event.process {
                let _ = write!(line, " process {p}");
            }
            if let Some(pid) = event.pid {
                let _ = write!(line, " pid {pid}");
            }
            if let Some(lib) = &event.library {
                let _ = write!(line, " in {lib}");
            }
            if let Some(bus) = &event.pci_bus {
                let _ = write!(line, " on {bus}");
            }
            out.row(event.time.as_deref().unwrap_or("-"), visible_line(&line));
        }
        return;
    }
    // (label, count, first time, last time) in the order of first occurrence.
    let mut classes: Vec<(String, usize, Option<&str>, Option<&str>)> = Vec::new();
    for event in events {
        let label = crate::triage::events::class_label(event);
        let time = event.time.as_deref();
        match classes.iter_mut().find(|c| c.0 == label) {
            Some(class) => {
                class.1 += 1;
                class.3 = time.or(class.3);
            }
            None => classes.push((label, 1, time, time)),
        }
    }
    out.row(
        "events",
        format!("{} in {} classes", events.len(), classes.len()),
    );
    for (label, count, first, last) in classes {
        let when = match (first, last) {
            (Some(f), Some(l)) if count > 1 && f != l => format!(", first {f}, last {l}"),
            (Some(f), _) => format!(", at {f}"),
            _ => String::new(),
        };
        out.row(
            &format!("{count} ×"),
            format!("{}{}", visible_line(&label), visible_line(&when)),
        );
    }
}

/// Joins items into lines of at most `width` characters.
fn wrap(items: &[String], width: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut current = String::new();
    for item in items {
        if !current.is_empty() && current.len() + 1 + item.len() > width {
            lines.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push(' ');
        }
        current.push_str(item);
    }
    if !current.is_empty() {
        lines.push(current);
    }
    lines.join("\n")
}
