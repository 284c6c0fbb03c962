//! The `profile` target: a profile file as `gpuprobe run --profile FILE` and
//! `gpuprobe profile` read it (`gpuprobe_doctor::profile::parse`: strict keys, catalogue-only
//! settings), then written and exported the way those commands do.

use gpuprobe_doctor::profile::{self as profiles, ExportFormat};

/// Parses one profile file.
///
/// Invariants, for an accepted profile: the TOML `gpuprobe fix` writes for it is accepted
/// again and reads back equal (a profile survives being saved); every export format
/// renders; its stack shows no differences from itself (otherwise `run --profile` would
/// refuse the very machine it was proven on).
pub fn profile(data: &[u8]) {
    let Some(text) = crate::utf8(data) else {
        return;
    };
    let Ok(profile) = profiles::parse(text, "fuzz.toml") else {
        return;
    };
    for format in [ExportFormat::Env, ExportFormat::Shell, ExportFormat::Json] {
        profiles::export(&profile, format);
    }
    let written = toml::to_string(&profile).expect("an accepted profile serialises to TOML");
    let again = profiles::parse(&written, "rewritten.toml")
        .unwrap_or_else(|e| panic!("a written profile is refused: {e}\n{written}"));
    assert_eq!(
        again, profile,
        "a profile changes when written and read back"
    );
    let differences = profile.proven_on.differences(&profile.proven_on);
    assert!(
        differences.is_empty(),
        "a stack differs from itself: {differences:?}"
    );
}
