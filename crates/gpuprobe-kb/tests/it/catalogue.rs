//! The workaround catalogue and the profile allow-list.

use gpuprobe_kb::{Catalogue, SettingRefused, is_allowed_setting};
use gpuprobe_kb::{CatalogueKind, embedded_catalogue};

#[test]
fn the_shipped_catalogue_parses_and_validates() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../kb/catalogue.toml"
    ))
    .unwrap();
    let parsed = Catalogue::parse(&text).unwrap();
    assert_eq!(parsed, embedded_catalogue());
    let problems = parsed.validate();
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_catalogue_covers_each_layer_the_design_names() {
    let catalogue = embedded_catalogue();
    for setting in [
        "HSA_ENABLE_SDMA=0",
        "HSA_ENABLE_PEER_SDMA=0",
        "AMD_SERIALIZE_COPY=3",
        "AMD_SERIALIZE_KERNEL=3",
        "HIP_LAUNCH_BLOCKING=1",
        "CUDA_LAUNCH_BLOCKING=1",
        "PYTORCH_NO_HIP_MEMORY_CACHING=1",
        "PYTORCH_NO_CUDA_MEMORY_CACHING=1",
        "PYTORCH_ALLOC_CONF=expandable_segments:False",
        "TORCH_BLAS_PREFER_HIPBLASLT=0",
        "TORCH_BLAS_PREFER_HIPBLASLT=1",
        "ROCBLAS_USE_HIPBLASLT=1",
        "MIOPEN_FIND_MODE=2",
        "MIOPEN_DEBUG_CONV_IMPLICIT_GEMM=0",
        "MIOPEN_DEBUG_CONV_GEMM=0",
        "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL=1",
        "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL=0",
        "HIP_VISIBLE_DEVICES=1",
        "ROCR_VISIBLE_DEVICES=0,1",
        "CUDA_VISIBLE_DEVICES=GPU-ea44a5c2-ba8f-5e6b-203c-23dd332e7afb",
        "NCCL_P2P_DISABLE=1",
        "HSA_DISABLE_FRAGMENT_ALLOCATOR=1",
        "HSA_OVERRIDE_GFX_VERSION",
        "HSA_OVERRIDE_GFX_VERSION=11.5.0",
    ] {
        assert!(catalogue.allows(setting), "{setting} should be allowed");
    }
    assert!(
        catalogue
            .entries
            .iter()
            .any(|e| e.kind == CatalogueKind::CodeChange && e.id == "CAT-PINNED-STAGING")
    );
    for entry in &catalogue.entries {
        if !matches!(entry.kind, CatalogueKind::Process | CatalogueKind::Switch) {
            assert!(!entry.testable, "{} is reported only", entry.id);
        }
    }
}

#[test]
fn framework_switches_are_settings_with_python_lines() {
    let catalogue = Catalogue::embedded();
    for setting in [
        "torch.backends.cuda.enable_cudnn_sdp=False",
        "torch.backends.cudnn.enabled=False",
        "torch.backends.cuda.preferred_blas_library=cublaslt",
        "torch.use_deterministic_algorithms=warn_only",
        "torch._dynamo.config.disable=True",
        "torch._functorch.config.enable_autograd_cache=False",
        "gpuprobe.inputs.contiguous=True",
    ] {
        assert!(catalogue.allows(setting), "{setting} should be allowed");
    }
    for setting in [
        // A value the entry does not list, a switch nobody catalogued, code in a value.
        "torch.backends.cuda.enable_cudnn_sdp=0",
        "torch.backends.cuda.enable_cudnn_sdp=False;import os",
        "torch.cuda.memory.set_per_process_memory_fraction=0.5",
        "torch.backends.cudnn.enabled",
        "torch._functorch.config.enable_autograd_cache=True",
        "os.system=True",
    ] {
        assert!(!catalogue.allows(setting), "{setting} should be refused");
    }
    let switches: Vec<_> = catalogue
        .entries
        .iter()
        .filter(|e| e.kind == CatalogueKind::Switch)
        .collect();
    assert!(switches.len() >= 10, "{}", switches.len());
    for entry in switches {
        assert!(entry.testable, "{}", entry.id);
        for value in &entry.allowed {
            assert!(entry.python.contains_key(value), "{} {value}", entry.id);
        }
    }
    // Only switches carry python lines.
    let mut bad = catalogue.clone();
    let process = bad
        .entries
        .iter_mut()
        .find(|e| e.kind == CatalogueKind::Process)
        .unwrap();
    process.python.insert("0".into(), "x".into());
    assert!(
        bad.validate()
            .iter()
            .any(|p| p.contains("only switches have python lines"))
    );
}

#[test]
fn profiles_refuse_everything_else() {
    for setting in [
        "LD_PRELOAD=/tmp/evil.so",
        "LD_LIBRARY_PATH=/opt/rocm/lib",
        "PYTHONPATH=/tmp",
        "PATH=/usr/bin",
        "HSA_ENABLE_SDMA=2",
        "HSA_ENABLE_SDMA=",
        "HIP_VISIBLE_DEVICES=/dev/dri/card0",
        "HIP_VISIBLE_DEVICES=0;rm",
        "PYTORCH_ALLOC_CONF=max_split_size_mb=512",
        "PYTORCH_ALLOC_CONF=made_up_key:1",
        "HSA_OVERRIDE_GFX_VERSION=gfx1100",
        "HIP_DISABLE_IPC=1",
        "PYTORCH_MAX_SPLIT_SIZE_MB=512",
        "amdgpu.cwsr_enable=0",
        "LD_PRELOAD",
        "",
    ] {
        assert!(!is_allowed_setting(setting), "{setting:?} must be refused");
    }
}

#[test]
fn refusals_say_why() {
    let catalogue = embedded_catalogue();
    assert!(matches!(
        catalogue.check_setting("LD_PRELOAD", "x.so"),
        Err(SettingRefused::NotInCatalogue(_))
    ));
    assert!(matches!(
        catalogue.check_setting("HIP_VISIBLE_DEVICES", "/dev/x"),
        Err(SettingRefused::UnsafeValue { .. })
    ));
    let refused = catalogue.check_setting("HSA_ENABLE_SDMA", "2").unwrap_err();
    assert!(refused.to_string().contains("one of 0, 1"), "{refused}");
    assert_eq!(
        catalogue.check_setting("HSA_ENABLE_SDMA", "0").unwrap().id,
        "CAT-SDMA-OFF"
    );
}

#[test]
fn validation_catches_a_dangerous_catalogue() {
    let text = r#"
[[entry]]
id = "CAT-BAD"
title = "Preload a library"
kind = "process"
variables = ["LD_PRELOAD"]
values = "enum"
allowed = ["x"]
candidates = ["LD_PRELOAD=x"]
layer = "runtime"
vendors = ["amd"]
changes = "anything"
testable = true
source = "nowhere"

[[entry]]
id = "CAT-CWSR"
title = "Kernel parameter claimed testable"
kind = "kernel_param"
candidates = ["amdgpu.cwsr_enable=0"]
layer = "system"
vendors = ["amd"]
changes = "x"
testable = true
source = "amdgpu_drv.c"
"#;
    let problems = Catalogue::parse(text).unwrap().validate();
    assert!(
        problems.iter().any(|p| p.contains("LD_PRELOAD")),
        "{problems:#?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("only process settings are testable")),
        "{problems:#?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("root and a reboot")),
        "{problems:#?}"
    );
}

#[test]
fn a_catalogue_typo_is_reported_with_its_line() {
    let error = Catalogue::parse("[[entry]]\nid = \"CAT-X\"\ntitel = \"x\"\n").unwrap_err();
    assert_eq!(error.line, 3);
}

#[test]
fn a_catalogue_cost_typo_is_reported_with_its_line() {
    let error =
        Catalogue::parse("[[entry]]\nid = \"CAT-X\"\ncost = { needs_rot = true }\n").unwrap_err();
    assert_eq!(error.line, 3);
    assert!(error.message.contains("needs_rot"), "{error}");
}
