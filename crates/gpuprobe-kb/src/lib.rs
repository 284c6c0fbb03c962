//! gpuprobe's knowledge base of known issues, its matcher, the config lint and the
//! workaround catalogue.
//!
//! The modules are private; the surface is what the crate root re-exports:
//!
//! - [`KnowledgeBase`]: the shipped entries (`kb/RKB-NNN-*.toml`, embedded at build time,
//!   listed raw by [`embedded_sources`]) and optionally a user's directory of entries
//!   ([`Loaded`], [`EntryOrigin`], [`KbError`]). Every file is validated with errors that
//!   name file, line and column ([`Diagnostic`]); a broken file costs only itself.
//!   [`parse_entry`] validates one file at a [`Strictness`].
//! - [`KbEntry`] and the parts of it callers name: [`Conditions`] (walked as
//!   [`ConditionRef`]s, each of a [`ConditionKind`]), [`LogSignature`], [`OsName`],
//!   [`RemedyKind`] and [`WorkaroundEvidence`].
//! - [`match_all`] and [`match_entry`]: which entries apply to a
//!   [`Fingerprint`](gpuprobe_model::Fingerprint) and probe results, and why ([`KbMatch`],
//!   [`MatchStatus`], [`ResultEvidence`], convertible to a
//!   [`Finding`](gpuprobe_model::Finding)); [`Facts`] is the matcher's reading of a
//!   fingerprint, shared with `gpuprobe fix`.
//! - [`lint()`]: settings and stack combinations that are no-ops, deprecated, invalid,
//!   shadowed or harmful. [`lint`](mod@lint) stays a public module because its rule table is
//!   a namespace of its own ([`lint::rules`], [`lint::rule`], [`lint::rules_markdown`],
//!   [`LintRule`]).
//! - [`Catalogue`]: generic settings known to change one layer's behaviour, the source of
//!   `gpuprobe fix` candidates and the allow-list for profiles ([`is_allowed_setting`],
//!   [`embedded_catalogue`], [`CatalogueEntry`], [`CatalogueKind`], [`SettingRefused`],
//!   [`catalogue_markdown`]).
//! - [`render_list`], [`render_list_within`], [`render_entry`], [`render_matches`]: the
//!   plain-text views.
//! - [`kb_schema_json`] and [`catalogue_schema_json`]: the JSON Schemas of the file formats.
//! - [`build_info()`], [`COMMIT`], [`KB_REVISION`], [`LONG_VERSION`]: the build's commit and
//!   the knowledge base's revision.
//! - [`DottedVersion`], [`Pep440Version`] and their ranges [`DottedReq`], [`Pep440Req`].
//! - [`wildcard_matches`] and [`first_match`]: the `*`/`?` patterns entries use for probe ids
//!   and ISAs.
//!
//! Only issues a public source confirms are in the knowledge base, and folklore the research
//! shows to be false is refused by validation as a workaround.

mod build_info;
mod catalogue;
mod entry;
mod facts;
mod glob;
mod isa;
mod kb;
pub mod lint;
mod matcher;
mod render;
mod schema;
mod validate;
mod version;

pub use build_info::{COMMIT, KB_REVISION, LONG_VERSION, build_info};
pub use catalogue::{
    Catalogue, CatalogueEntry, CatalogueKind, SettingRefused, catalogue_markdown,
    embedded as embedded_catalogue, is_allowed_setting,
};
pub use entry::{
    ConditionKind, ConditionRef, Conditions, KbEntry, LogSignature, OsName, RemedyKind,
    WorkaroundEvidence,
};
pub use facts::Facts;
pub use glob::{first_match, wildcard_matches};
pub use kb::{EntryOrigin, KbError, KnowledgeBase, Loaded, embedded_sources};
pub use lint::{LintRule, lint};
pub use matcher::{KbMatch, MatchStatus, ResultEvidence, match_all, match_entry};
pub use render::{render_entry, render_list, render_list_within, render_matches};
pub use schema::{catalogue_schema_json, kb_schema_json};
pub use validate::{Diagnostic, Strictness, parse_entry};
pub use version::{DottedReq, DottedVersion, Pep440Req, Pep440Version};
