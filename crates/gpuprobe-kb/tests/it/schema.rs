//! The checked-in schema files match the types (regenerate with
//! `GPUPROBE_UPDATE_SCHEMA=1 cargo test -p gpuprobe-kb --test it schema`).

use std::path::PathBuf;

fn check_fresh(file: &str, generated: String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../kb")
        .join(file);
    if std::env::var_os("GPUPROBE_UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == generated,
        "kb/{file} is out of date with the Rust types.\nRegenerate it with:\n    GPUPROBE_UPDATE_SCHEMA=1 cargo test -p gpuprobe-kb --test it schema\nand commit the result."
    );
}

#[test]
fn kb_schema_is_fresh() {
    check_fresh("kb.schema.json", gpuprobe_kb::kb_schema_json());
}

#[test]
fn catalogue_schema_is_fresh() {
    check_fresh(
        "catalogue.schema.json",
        gpuprobe_kb::catalogue_schema_json(),
    );
}

#[test]
fn schema_forbids_unknown_fields() {
    let schema: serde_json::Value = serde_json::from_str(&gpuprobe_kb::kb_schema_json()).unwrap();
    assert_eq!(
        schema["additionalProperties"],
        serde_json::Value::Bool(false)
    );
    assert!(
        schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == "citations")
    );
}
