//! Every condition kind at once, so that the order in which the matcher, the validator and
//! `kb show` handle conditions stays what it was before `Conditions::walk` (each keeps its
//! own order; these pin it).

use gpuprobe_kb::{KbEntry, match_entry, render_entry};
use gpuprobe_kb::{Strictness, parse_entry};

use crate::fixtures::{env, strix_halo_mes_0x83};

/// An entry with every condition set, each holding on `host()` where it can.
const EVERY_CONDITION: &str = r#"id = "TEST-001"
title = "Every condition"
kind = "crash"
severity = "warning"
layer = "runtime"
summary = "Sets every condition."
citations = ["nowhere#1"]

[conditions]
vendor = "amd"
arch = ["gfx115*"]
apu = true
firmware = [{ component = "MES", version = "==0x83" }]
torch_supports_arch = true
override_differs = true
override_sibling = true
os = ["linux"]
kernel = ">=6.17"
rocm = ">=7.0"
hip = ">=7.0"
torch = ">=2.10"
torch_local = ["rocm7"]
amdgpu_driver = { source = "inbox" }
nvidia_driver = ">=500"
env = [{ name = "HSA_OVERRIDE_GFX_VERSION", decodes_to = ["gfx1150"] }]
module_params = [{ name = "amdgpu.cwsr_enable", one_of = ["1"], default = "1" }]
cmdline_has = ["ro"]
cmdline_lacks = ["pci=noacs"]
min_gpus = 1
container = false
secure_boot = true
uid = "==1000"
packages = [{ name = "torch", version = ">=2.10" }]
alloc_conf = [{ key = "expandable_segments", one_of = ["True"] }]

[[conditions.any_of]]
kernel = "<6.0"

[[conditions.any_of]]
uid = ">=1000"
nvidia_driver = ">=1"
"#;

fn entry(text: &str) -> Result<KbEntry, Vec<gpuprobe_kb::Diagnostic>> {
    parse_entry("TEST-001.toml", text, Strictness::User)
}

#[test]
fn kb_show_lists_every_condition_in_its_order() {
    let entry = entry(EVERY_CONDITION).expect("valid");
    let text = render_entry(&entry);
    let start = text.find("applies when\n").expect("conditions");
    let end = text.find("citations\n").expect("citations");
    assert_eq!(
        &text[start..end],
        concat!(
            "applies when\n",
            "  vendor               amd\n",
            "  arch (native ISA)    gfx115*\n",
            "  APU                  true\n",
            "  firmware             MES ==0x83\n",
            "  ISA in torch wheel   true\n",
            "  override differs     true\n",
            "  override is sibling  true\n",
            "  os                   linux\n",
            "  kernel               >=6.17\n",
            "  ROCm                 >=7.0\n",
            "  HIP                  >=7.0\n",
            "  torch                >=2.10\n",
            "  NVIDIA driver        >=500\n",
            "  uid                  ==1000\n",
            "  torch local tag      rocm7*\n",
            "  amdgpu driver        inbox\n",
            "  env                  HSA_OVERRIDE_GFX_VERSION decodes to gfx1150\n",
            "  module parameter     amdgpu.cwsr_enable = 1\n",
            "  cmdline has          ro\n",
            "  cmdline lacks        pci=noacs\n",
            "  GPUs                 at least 1\n",
            "  container            false\n",
            "  Secure Boot          true\n",
            "  package              torch >=2.10\n",
            "  allocator conf       expandable_segments:True\n",
            "  and at least one alternative 1:\n",
            "      kernel               <6.0\n",
            "  or alternative 2:\n",
            "      NVIDIA driver        >=1\n",
            "      uid                  >=1000\n",
        )
    );
}

#[test]
fn validation_reports_every_condition_in_its_order() {
    let broken = EVERY_CONDITION
        .replace("\"gfx115*\"", "\"115*\"")
        .replace("==0x83", "==?")
        .replace(">=6.17", ">=?6.17")
        .replace("rocm = \">=7.0\"", "rocm = \">=?7\"")
        .replace("hip = \">=7.0\"", "hip = \">=?7\"")
        .replace("torch = \">=2.10\"", "torch = \"2?\"")
        .replace("[\"rocm7\"]", "[\"rocm 7\"]")
        .replace("{ source = \"inbox\" }", "{ version = \"x?\" }")
        .replace(">=500", ">=?500")
        .replace("name = \"HSA_OVERRIDE_GFX_VERSION\"", "name = \"HSA-X\"")
        .replace("amdgpu.cwsr_enable", "cwsr")
        .replace("[\"ro\"]", "[\"r o\"]")
        .replace("[\"pci=noacs\"]", "[\"\"]")
        .replace("min_gpus = 1", "min_gpus = 0")
        .replace("==1000", "=?1000")
        .replace(
            "{ name = \"torch\", version = \">=2.10\" }",
            "{ name = \" \", version = \"?\" }",
        )
        .replace("key = \"expandable_segments\"", "key = \"nope\"")
        .replace("kernel = \"<6.0\"", "kernel = \"<?\"")
        .replace("uid = \">=1000\"", "uid = \"?\"");
    let messages: Vec<String> = entry(&broken)
        .expect_err("invalid")
        .iter()
        .map(|d| {
            let message = format!("{}:{} {}", d.line, d.column, d.message);
            // The list of known keys is the lint's business, not this test's.
            match message.split_once("; known: ") {
                Some((head, _)) => format!("{head}; known: ..."),
                None => message,
            }
        })
        .collect();
    assert_eq!(
        messages,
        vec![
            "11:9 arch pattern \"115*\" must name a gfx ISA (gfx1151, gfx11*)",
            "13:44 invalid version range \"==?\": version \"?\" does not start with a number",
            "18:10 invalid version range \">=?6.17\": version \"?6.17\" does not start with a number",
            "19:8 invalid version range \">=?7\": version \"?7\" does not start with a number",
            "20:7 invalid version range \">=?7\": version \"?7\" does not start with a number",
            "24:17 invalid version range \">=?500\": version \"?500\" does not start with a number",
            "32:7 invalid version range \"=?1000\": version \"?1000\" does not start with a number",
            "21:9 invalid PEP 440 range \"2?\": \"2?\" is not a PEP 440 version (expected e.g. 2.11.0, 2.11.0a0+rocm7.2, 2.12.0.dev20260101)",
            "22:16 \"rocm 7\" is not a local-tag prefix (e.g. rocm7.2, cu13)",
            "23:29 invalid version range \"x?\": version \"x?\" does not start with a number",
            "25:17 \"HSA-X\" is not a variable name",
            "25:39 decodes_to applies only to HSA_OVERRIDE_GFX_VERSION",
            "26:27 \"cwsr\" is not of the form module.parameter",
            "27:16 \"r o\" is not one command-line token",
            "28:18 \"\" is not one command-line token",
            "29:12 min_gpus = 0 always holds; leave it out",
            "33:22 package name must not be empty",
            "33:37 invalid PEP 440 range \"?\": \"?\" is not a PEP 440 version (expected e.g. 2.11.0, 2.11.0a0+rocm7.2, 2.12.0.dev20260101)",
            "34:23 unknown allocator key \"nope\"; known: ...",
            "37:10 invalid version range \"<?\": version \"?\" does not start with a number",
            "40:7 invalid version range \"?\": version \"?\" does not start with a number",
        ]
    );
}

fn host() -> gpuprobe_model::Fingerprint {
    let mut fp = strix_halo_mes_0x83();
    fp.env = env(&[
        ("HSA_OVERRIDE_GFX_VERSION", "11.5.0"),
        ("PYTORCH_ALLOC_CONF", "expandable_segments:True"),
    ]);
    fp
}

#[test]
fn the_matcher_evaluates_every_condition_in_its_order() {
    let entry = entry(EVERY_CONDITION).expect("valid");
    let m = match_entry(&entry, &host(), &[]).expect("matches");
    assert_eq!(
        m.held,
        vec![
            "GPU 0 vendor amd is amd",
            "GPU 0 native ISA gfx1151 matches gfx115*",
            "GPU 0 is an APU (reported)",
            "GPU 0 MES firmware 0x00000083 matches ==0x83",
            "GPU 0 ISA gfx1151 is in torch's arch list (gfx1151)",
            "HSA_OVERRIDE_GFX_VERSION=11.5.0 (gfx1150) is an ISA-compatible sibling of GPU 0's native ISA gfx1151",
            "HSA_OVERRIDE_GFX_VERSION=11.5.0 decodes to gfx1150, which differs from GPU 0's native ISA gfx1151",
            "OS is linux",
            "kernel 6.17.0-19-generic is in >=6.17",
            "ROCm 7.2 (local tag of torch 2.11.0+rocm7.2) is in >=7.0",
            "HIP 7.2.26015 (torch.version.hip) is in >=7.0",
            "torch 2.11.0+rocm7.2 is in >=2.10",
            "torch 2.11.0+rocm7.2 local tag starts with rocm7",
            "amdgpu driver is the inbox driver",
            "HSA_OVERRIDE_GFX_VERSION=11.5.0 decodes to gfx1150, matching gfx1150",
            "amdgpu.cwsr_enable=1 (driver default; not on the command line)",
            "kernel command line has ro",
            "kernel command line lacks pci=noacs",
            "1 GPU(s) found (needed: at least 1)",
            "not running inside a container",
            "uid 1000 is in ==1000",
            "package torch 2.11.0+rocm7.2 is in >=2.10",
            "PYTORCH_ALLOC_CONF has expandable_segments:True",
        ]
    );
    assert_eq!(
        m.unchecked,
        vec![
            "NVIDIA driver version unknown (needed: >=500)",
            "Secure Boot state unknown",
            "no alternative could be confirmed: NVIDIA driver version unknown (needed: >=1)",
        ]
    );
}

#[test]
fn from_pasted_logs_without_facts_every_condition_is_unchecked_in_its_order() {
    // Without GPUs, `min_gpus` would fail.
    let entry = entry(&EVERY_CONDITION.replace("min_gpus = 1\n", "")).expect("valid");
    let mut fp = gpuprobe_model::Fingerprint {
        source: "triage".into(),
        ..host()
    };
    fp.gpus.clear();
    fp.host = Default::default();
    fp.python = None;
    fp.amdgpu = None;
    let m = match_entry(&entry, &fp, &[]).expect("matches");
    assert_eq!(
        m.held,
        vec![
            "HSA_OVERRIDE_GFX_VERSION=11.5.0 decodes to gfx1150, matching gfx1150",
            "not running inside a container",
            "PYTORCH_ALLOC_CONF has expandable_segments:True",
        ]
    );
    // The command line is said to be unknown once for `cmdline_has` and `cmdline_lacks`.
    assert_eq!(
        m.unchecked,
        vec![
            "no GPU facts in the fingerprint",
            "operating system unknown (needed: linux)",
            "kernel release unknown (needed: >=6.17)",
            "ROCm version unknown (needed: >=7.0)",
            "HIP version unknown (needed: >=7.0)",
            "torch version unknown (needed: >=2.10)",
            "torch version unknown (needed local tag: rocm7)",
            "amdgpu driver facts missing",
            "NVIDIA driver version unknown (needed: >=500)",
            "amdgpu.cwsr_enable unknown (needed: 1)",
            "kernel command line unknown",
            "Secure Boot state unknown",
            "user id unknown (needed: ==1000)",
            "Python environment unknown (needed: package torch)",
            "no alternative could be confirmed: kernel release unknown (needed: <6.0); NVIDIA driver version unknown (needed: >=1); user id unknown (needed: >=1000)",
        ]
    );
}

#[test]
fn the_walk_yields_each_condition_once_in_declaration_order() {
    use gpuprobe_kb::ConditionKind;
    let entry = entry(EVERY_CONDITION).expect("valid");
    let kinds: Vec<ConditionKind> = entry.conditions.walk().iter().map(|c| c.kind()).collect();
    assert_eq!(kinds.len(), 25, "{kinds:?}");
    assert!(kinds.windows(2).all(|pair| pair[0] < pair[1]), "{kinds:?}");
    assert!(entry.conditions.has_gpu_conditions());
    assert!(!entry.conditions.any_of[1].has_gpu_conditions());
    assert!(gpuprobe_kb::Conditions::default().walk().is_empty());
}
