//! Embeds the knowledge base (`kb/*.toml` at the workspace root) into the crate: writes a
//! list of `include_str!` items to `$OUT_DIR/embedded_kb.rs`, sorted by file name so the
//! build is reproducible. Entries are validated by the crate's tests, not here, so that a
//! broken entry gives a line-precise test failure rather than an opaque build error.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;

fn main() {
    let manifest_dir =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let kb_dir = manifest_dir.join("../../kb");
    println!("cargo:rerun-if-changed={}", kb_dir.display());

    let mut entries = Vec::new();
    let mut catalogue = None;
    match fs::read_dir(&kb_dir) {
        Ok(listing) => {
            for item in listing.flatten() {
                let path = item.path();
                let Some(name) = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .map(str::to_string)
                else {
                    continue;
                };
                if !name.ends_with(".toml") {
                    continue;
                }
                println!("cargo:rerun-if-changed={}", path.display());
                let absolute = fs::canonicalize(&path).unwrap_or(path);
                if name == "catalogue.toml" {
                    catalogue = Some(absolute);
                } else {
                    entries.push((name, absolute));
                }
            }
        }
        Err(error) => {
            println!(
                "cargo:warning=knowledge base directory {} unreadable: {error}",
                kb_dir.display()
            );
        }
    }
    entries.sort();

    let mut code = String::from(
        "/// Shipped entry files: (file name, contents).\npub(crate) const EMBEDDED_ENTRIES: &[(&str, &str)] = &[\n",
    );
    for (name, path) in &entries {
        let _ = writeln!(
            code,
            "    ({name:?}, include_str!({:?})),",
            path.display().to_string()
        );
    }
    code.push_str(
        "];\n\n/// The shipped workaround catalogue.\npub(crate) const EMBEDDED_CATALOGUE: &str = ",
    );
    match catalogue {
        Some(path) => {
            let _ = writeln!(code, "include_str!({:?});", path.display().to_string());
        }
        None => code.push_str("\"\";\n"),
    }
    let out =
        PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("embedded_kb.rs");
    fs::write(&out, code).expect("OUT_DIR is writable");
}
