//! JSON Schemas of the knowledge-base entry and catalogue files, generated from the serde
//! types. The shipped copies (`kb/kb.schema.json`, `kb/catalogue.schema.json`) are checked
//! against these by the tests, so an editor can validate entries as they are written.

use crate::catalogue::Catalogue;
use crate::entry::KbEntry;

fn pretty(schema: &schemars::Schema) -> String {
    let mut text = serde_json::to_string_pretty(schema).unwrap_or_default();
    text.push('\n');
    text
}

/// The JSON Schema of one entry file, pretty-printed with a trailing newline.
pub fn kb_schema_json() -> String {
    pretty(&schemars::schema_for!(KbEntry))
}

/// The JSON Schema of the catalogue file, pretty-printed with a trailing newline.
pub fn catalogue_schema_json() -> String {
    pretty(&schemars::schema_for!(Catalogue))
}
