//! The generated parts of `docs/lint.md` and `docs/catalogue.md` match the code
//! (regenerate with `GPUPROBE_UPDATE_DOCS=1 cargo test -p gpuprobe-kb --test it docs`).

use std::path::PathBuf;

const BEGIN: &str = "<!-- BEGIN GENERATED: do not edit by hand -->\n";
const END: &str = "<!-- END GENERATED -->";

fn check_generated(file: &str, generated: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let (Some(start), Some(end)) = (text.find(BEGIN), text.find(END)) else {
        panic!("docs/{file} lacks the generated-section markers");
    };
    let current = &text[start + BEGIN.len()..end];
    if std::env::var_os("GPUPROBE_UPDATE_DOCS").is_some() {
        let updated = format!("{}{BEGIN}{generated}{}", &text[..start], &text[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert!(
        current == generated,
        "docs/{file} is out of date.\nRegenerate it with:\n    GPUPROBE_UPDATE_DOCS=1 cargo test -p gpuprobe-kb --test it docs"
    );
}

#[test]
fn lint_reference_is_fresh() {
    check_generated("lint.md", &gpuprobe_kb::lint::rules_markdown());
}

#[test]
fn catalogue_reference_is_fresh() {
    check_generated(
        "catalogue.md",
        &gpuprobe_kb::catalogue_markdown(&gpuprobe_kb::embedded_catalogue()),
    );
}
