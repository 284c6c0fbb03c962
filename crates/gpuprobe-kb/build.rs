//! Embeds the knowledge base (`kb/*.toml` at the workspace root, reached through the
//! crate's `kb` symlink so that `cargo package` and `maturin sdist` ship it inside the crate)
//! and records what the build was made from:
//!
//! - `$OUT_DIR/embedded_kb.rs`: a list of `include_str!` items, sorted by file name so the
//!   build is reproducible. Entries are validated by the crate's tests, not here, so that a
//!   broken entry gives a line-precise test failure rather than an opaque build error. A
//!   missing or empty knowledge base, though, stops the build: a tool built without it
//!   reports "0 known issues" and looks healthy.
//! - `GPUPROBE_KB_REVISION`: the entry count and the first 12 hex digits of the SHA-256 of
//!   `sha256sum`'s listing of the embedded files (`cd kb && LC_ALL=C sha256sum *.toml |
//!   sha256sum` gives the same digits), e.g. `53.1f0c2d3e4b5a`.
//! - `GPUPROBE_COMMIT`: the source commit, from `GPUPROBE_BUILD_COMMIT`, else git when the
//!   crate sits in its own repository's checkout, else the `BUILD_COMMIT` file a source
//!   archive carries, else the `.cargo_vcs_info.json` of a crates.io package, else
//!   `unknown`.
//!
//! docs/packaging.md describes both values.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The variable a packaging build sets to name the commit when there is no git checkout
/// (`gpuprobe_model::env_vars::GPUPROBE_BUILD_COMMIT`; a build script cannot use the crate).
const COMMIT_VAR: &str = "GPUPROBE_BUILD_COMMIT";
/// The file `scripts/build-sdist.sh` writes into the crate for a source archive.
const COMMIT_FILE: &str = "BUILD_COMMIT";
/// How many hex digits of a commit or a digest a version line shows.
const SHORT: usize = 12;

fn main() {
    let manifest_dir =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let kb_dir = manifest_dir.join("kb");
    println!("cargo:rerun-if-changed={}", kb_dir.display());

    let (entries, catalogue) = list_kb(&kb_dir);
    let mut listing = String::new();
    let mut files: Vec<&(String, PathBuf)> = entries.iter().chain(catalogue.iter()).collect();
    // `LC_ALL=C sha256sum *.toml` lists the files in byte order.
    files.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    for (name, path) in files {
        let text = fs::read(path).unwrap_or_else(|error| {
            missing(
                &kb_dir,
                &format!("{} cannot be read: {error}", path.display()),
            )
        });
        let _ = writeln!(listing, "{}  {name}", hex(&sha256(&text)));
    }
    let digest = hex(&sha256(listing.as_bytes()));
    println!(
        "cargo:rustc-env=GPUPROBE_KB_REVISION={}.{}",
        entries.len(),
        &digest[..SHORT]
    );
    println!("cargo:rustc-env=GPUPROBE_COMMIT={}", commit(&manifest_dir));

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
    if let Some((_, path)) = &catalogue {
        let _ = writeln!(code, "include_str!({:?});", path.display().to_string());
    }
    let out =
        PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("embedded_kb.rs");
    fs::write(&out, code).expect("OUT_DIR is writable");
}

/// (file name, absolute path) of one embedded file.
type File = (String, PathBuf);

/// The entry files, sorted by name, and the catalogue; stops the build when either is
/// missing.
fn list_kb(kb_dir: &Path) -> (Vec<File>, Option<File>) {
    let listing = fs::read_dir(kb_dir)
        .unwrap_or_else(|error| missing(kb_dir, &format!("the directory cannot be read: {error}")));
    let mut entries = Vec::new();
    let mut catalogue = None;
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
            catalogue = Some((name, absolute));
        } else {
            entries.push((name, absolute));
        }
    }
    entries.sort();
    if entries.is_empty() {
        missing(kb_dir, "it holds no entry files (*.toml)");
    }
    if catalogue.is_none() {
        missing(kb_dir, "it holds no catalogue.toml");
    }
    (entries, catalogue)
}

/// Stops the build, saying what is missing and how to get it.
fn missing(kb_dir: &Path, what: &str) -> ! {
    eprintln!(
        "error: gpuprobe-kb: the knowledge base is missing: {} ({what}).\n\
         It is the repository's kb/ directory, which crates/gpuprobe-kb/kb links to and \
         which every source archive must carry; a build without it would report \
         \"0 known issues\" on every machine.\n\
         Fix: build from a git checkout of gpuprobe (git clone, then cargo build or pip \
         install .), or restore the link with `git checkout -- crates/gpuprobe-kb/kb kb`; \
         make source archives with scripts/build-sdist.sh, which checks that they carry it.",
        kb_dir.display()
    );
    std::process::exit(1);
}

/// The commit the build was made from (see the module header for the order).
fn commit(manifest_dir: &Path) -> String {
    println!("cargo:rerun-if-env-changed={COMMIT_VAR}");
    if let Ok(value) = env::var(COMMIT_VAR) {
        let value = value.trim();
        if !value.is_empty() && value.chars().all(|c| c.is_ascii_alphanumeric()) {
            return short(value);
        }
    }
    if let Some(hash) = git_commit(manifest_dir) {
        return hash;
    }
    let file = manifest_dir.join(COMMIT_FILE);
    if file.exists() {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    if let Ok(text) = fs::read_to_string(&file) {
        let text = text.trim();
        if !text.is_empty() && text.chars().all(|c| c.is_ascii_hexdigit()) {
            return short(text);
        }
    }
    // A crates.io package: cargo records the commit it was packaged from.
    if let Ok(text) = fs::read_to_string(manifest_dir.join(".cargo_vcs_info.json"))
        && let Some(rest) = text.split("\"sha1\"").nth(1)
    {
        let hash: String = rest
            .trim_start_matches([' ', ':', '"'])
            .chars()
            .take_while(char::is_ascii_hexdigit)
            .collect();
        if !hash.is_empty() {
            return short(&hash);
        }
    }
    "unknown".to_string()
}

fn short(hash: &str) -> String {
    hash.chars().take(SHORT).collect()
}

/// HEAD's commit when the crate is in its own repository's checkout (not in an unpacked
/// archive that happens to lie inside some other repository), with the files whose change
/// means a new commit registered for a rebuild.
fn git_commit(manifest_dir: &Path) -> Option<String> {
    let output = Command::new("git")
        .current_dir(manifest_dir)
        .args([
            "rev-parse",
            "--show-toplevel",
            "--git-dir",
            "--git-common-dir",
            "HEAD",
        ])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    let lines: Vec<&str> = text.lines().collect();
    let [top, git_dir, common_dir, head] = lines[..] else {
        return None;
    };
    let workspace = fs::canonicalize(manifest_dir.join("../..")).ok()?;
    if fs::canonicalize(top).ok()? != workspace {
        return None;
    }
    let git_dir = manifest_dir.join(git_dir);
    let common_dir = manifest_dir.join(common_dir);
    let head_file = git_dir.join("HEAD");
    let mut watched = vec![head_file.clone(), common_dir.join("packed-refs")];
    if let Ok(head_ref) = fs::read_to_string(&head_file)
        && let Some(name) = head_ref.trim().strip_prefix("ref: ")
    {
        watched.push(common_dir.join(name));
    }
    for path in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    Some(short(head))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// SHA-256 (FIPS 180-4), so that the revision is the digest `sha256sum` prints without a
/// build dependency.
fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut message = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    message.extend_from_slice(&bit_len.to_be_bytes());
    for block in message.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (state, value) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *state = state.wrapping_add(value);
        }
    }
    let mut out = [0u8; 32];
    for (chunk, word) in out.chunks_exact_mut(4).zip(h) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}
