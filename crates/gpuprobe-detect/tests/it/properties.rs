//! Parsers and triage never panic, whatever the input.

use gpuprobe_detect::parse::{
    amd_smi, collect_env, firmware_info, kernel_log, nvidia_smi, rocm_smi, rocminfo, system,
};
use gpuprobe_detect::{TriageInput, normalize_bdf, parse_amdgpu_ids, triage};
use proptest::prelude::*;

use crate::common::{all_fixtures, fixture};

fn run_everything(text: &str) {
    let _ = rocminfo::parse(text);
    let _ = rocm_smi::parse(text);
    let _ = amd_smi::parse(text);
    let _ = nvidia_smi::parse(text);
    let _ = collect_env::parse(text);
    let _ = kernel_log::parse(text);
    let _ = firmware_info::parse(text);
    let _ = system::parse_dkms_status(text);
    let _ = system::parse_mokutil(text);
    let _ = system::parse_os_release(text);
    let _ = system::parse_uname(text);
    let _ = system::parse_module_params(text);
    let _ = gpuprobe_model::decode_override(text);
    let _ = parse_amdgpu_ids(text);
    let _ = normalize_bdf(text);
    let outcome = triage(&[TriageInput {
        name: "p".to_owned(),
        text: text.to_owned(),
    }]);
    let _ = gpuprobe_detect::render_text(&outcome.fingerprint);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
        run_everything(&text);
    }

    #[test]
    fn line_soup_never_panics(lines in prop::collection::vec(prop_oneof![
        Just("ROCk module version 6.8.5 is loaded".to_owned()),
        Just("*** Done ***".to_owned()),
        Just("Agent 1".to_owned()),
        Just("  Name: gfx1100".to_owned()),
        Just("| AMD-SMI 26.2.0  amdgpu version: 6.16.6 ROCm version: 7.1.1 |".to_owned()),
        Just("+-------+".to_owned()),
        Just("| NVIDIA-SMI 580.1  Driver Version: 580.1  CUDA Version: 13.0 |".to_owned()),
        Just("==============NVSMI LOG==============".to_owned()),
        Just("GPU: 0".to_owned()),
        Just("    ASIC:".to_owned()),
        Just("{\"gpu_data\": [".to_owned()),
        Just("]}".to_owned()),
        Just("[  1.0] amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:1 vmid:1 pasid:1)".to_owned()),
        Just("MES feature version: 1, firmware version: 0x00000083".to_owned()),
        Just("$ rocminfo".to_owned()),
        Just("```".to_owned()),
        Just("index, name, pci.bus_id".to_owned()),
        Just("PyTorch version: 2.1".to_owned()),
        Just("GPU models and configuration: ".to_owned()),
        "\\PC{0,60}",
    ], 0..40)) {
        run_everything(&lines.join("\n"));
        run_everything(&lines.join("\r\n"));
    }

    #[test]
    fn truncated_and_mangled_fixtures_never_panic(index in 0usize..64, cut in 0usize..20_000, tabs in any::<bool>()) {
        let files = all_fixtures();
        let text = fixture(&files[index % files.len()]);
        let mut end = cut.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let mut piece = text[..end].to_owned();
        if tabs {
            piece = piece.replace("    ", "\t");
        }
        run_everything(&piece);
    }
}
