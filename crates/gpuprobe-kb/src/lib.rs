//! gpuprobe's knowledge base of known issues, its matcher, the config lint and the
//! workaround catalogue.
//!
//! - [`KnowledgeBase`]: the shipped entries (`kb/RKB-NNN-*.toml`, embedded at build time)
//!   and optionally a user's directory of entries. Every file is validated with errors that
//!   name file, line and column ([`Diagnostic`]); a broken file costs only itself.
//! - [`match_all`]: which entries apply to a [`Fingerprint`](gpuprobe_model::Fingerprint)
//!   and probe results, and why ([`KbMatch`], convertible to a
//!   [`Finding`](gpuprobe_model::Finding)).
//! - [`lint()`](lint::lint): settings and stack combinations that are no-ops, deprecated, invalid,
//!   shadowed or harmful; [`lint::rules`] lists every rule.
//! - [`Catalogue`]: generic settings known to change one layer's behaviour, the source of
//!   `gpuprobe fix` candidates and the allow-list for profiles ([`is_allowed_setting`]).
//! - [`build_info`]: the build's commit and the knowledge base's revision.
//! - [`version`]: dotted and PEP 440 versions and ranges.
//!
//! Only issues a public source confirms are in the knowledge base, and folklore the research
//! shows to be false is refused by validation as a workaround.

pub mod build_info;
pub mod catalogue;
pub mod entry;
pub mod facts;
pub mod glob;
pub mod isa;
pub mod kb;
pub mod lint;
pub mod matcher;
pub mod render;
pub mod schema;
pub mod validate;
pub mod version;

pub use catalogue::{Catalogue, CatalogueEntry, SettingRefused, is_allowed_setting};
pub use entry::KbEntry;
pub use kb::{EntryOrigin, KbError, KnowledgeBase, Loaded};
pub use lint::{LintRule, lint};
pub use matcher::{KbMatch, MatchStatus, ResultEvidence, match_all, match_entry};
pub use render::{render_entry, render_list, render_list_within, render_matches};
pub use validate::Diagnostic;
