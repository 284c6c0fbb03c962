//! The loaded knowledge base: the shipped entries (embedded at build time) plus, on request,
//! a user's own directory of entries (`--kb DIR`).
//!
//! Loading never stops at the first bad file: every file that validates is kept, and every
//! file that does not is reported with its line and column, so one broken user entry costs
//! nothing else.

use std::fs;
use std::path::Path;

use thiserror::Error;

use crate::entry::KbEntry;
use crate::validate::{self, Diagnostic, Strictness};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_kb.rs"));
}

pub(crate) use embedded::EMBEDDED_CATALOGUE;

/// A failure to load that is not about one entry's content.
#[derive(Debug, Error)]
pub enum KbError {
    /// The directory could not be listed.
    #[error("cannot read knowledge-base directory {path}: {source}")]
    ReadDir {
        /// The directory.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl gpuprobe_model::ClassifiedError for KbError {
    /// The directory is the one `--kb` named: the user's to fix.
    fn exit_status(&self) -> gpuprobe_model::ExitStatus {
        gpuprobe_model::ExitStatus::UsageError
    }
}

/// Where an entry came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryOrigin {
    /// Shipped with gpuprobe (file name under `kb/`).
    Embedded(String),
    /// A user's file (its path).
    User(String),
}

impl EntryOrigin {
    /// The file name or path.
    pub fn file(&self) -> &str {
        match self {
            EntryOrigin::Embedded(name) | EntryOrigin::User(name) => name,
        }
    }
}

/// The knowledge base: validated entries, ordered by id.
#[derive(Debug, Clone, Default)]
pub struct KnowledgeBase {
    entries: Vec<(KbEntry, EntryOrigin)>,
}

/// A knowledge base together with the problems met while loading it.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The entries that validated.
    pub kb: KnowledgeBase,
    /// One diagnostic per problem, each naming a file, line and column.
    pub diagnostics: Vec<Diagnostic>,
}

impl KnowledgeBase {
    /// The shipped entries. The crate's tests prove every one of them validates; should one
    /// not, it is left out (see [`KnowledgeBase::load_embedded`] for the diagnostics).
    pub fn embedded() -> KnowledgeBase {
        Self::load_embedded().kb
    }

    /// The shipped entries and any diagnostics.
    pub fn load_embedded() -> Loaded {
        let mut loaded = Loaded::default();
        for (name, text) in embedded::EMBEDDED_ENTRIES {
            loaded.add(
                name,
                text,
                Strictness::Shipped,
                EntryOrigin::Embedded((*name).to_string()),
            );
        }
        loaded
    }

    /// Entries from in-memory sources `(file name, text)`, validated with the shipped rules.
    pub fn from_sources<'a>(sources: impl IntoIterator<Item = (&'a str, &'a str)>) -> Loaded {
        let mut loaded = Loaded::default();
        for (name, text) in sources {
            loaded.add(
                name,
                text,
                Strictness::Shipped,
                EntryOrigin::Embedded(name.to_string()),
            );
        }
        loaded
    }

    /// The shipped entries plus every `*.toml` in `dir` (except `catalogue.toml`). A user
    /// entry whose id is already taken is reported and left out.
    pub fn load_with_dir(dir: &Path) -> Result<Loaded, KbError> {
        let mut loaded = Self::load_embedded();
        loaded.add_dir(dir)?;
        Ok(loaded)
    }

    /// All entries, ordered by id.
    pub fn entries(&self) -> impl ExactSizeIterator<Item = &KbEntry> {
        self.entries.iter().map(|(entry, _)| entry)
    }

    /// All entries with their origins.
    pub fn entries_with_origin(&self) -> impl ExactSizeIterator<Item = (&KbEntry, &EntryOrigin)> {
        self.entries.iter().map(|(entry, origin)| (entry, origin))
    }

    /// The entry with this id (case-insensitive).
    pub fn get(&self, id: &str) -> Option<&KbEntry> {
        self.entries
            .iter()
            .map(|(entry, _)| entry)
            .find(|entry| entry.id.eq_ignore_ascii_case(id))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn insert(&mut self, entry: KbEntry, origin: EntryOrigin) {
        let position = self
            .entries
            .partition_point(|(existing, _)| existing.id < entry.id);
        self.entries.insert(position, (entry, origin));
    }

    fn origin_of(&self, id: &str) -> Option<&EntryOrigin> {
        self.entries
            .iter()
            .find(|(entry, _)| entry.id == id)
            .map(|(_, origin)| origin)
    }
}

impl Loaded {
    /// Validates one file and adds it, or records why not.
    fn add(&mut self, file: &str, text: &str, strictness: Strictness, origin: EntryOrigin) {
        match validate::parse_entry(file, text, strictness) {
            Ok(entry) => {
                if let Some(existing) = self.kb.origin_of(&entry.id) {
                    let offset = text.find(&entry.id).unwrap_or(0);
                    self.diagnostics.push(Diagnostic::at_offset(
                        file,
                        text,
                        offset,
                        format!(
                            "duplicate id {}: already defined in {}; this file is ignored",
                            entry.id,
                            existing.file()
                        ),
                    ));
                } else {
                    self.kb.insert(entry, origin);
                }
            }
            Err(diagnostics) => self.diagnostics.extend(diagnostics),
        }
    }

    /// Adds every `*.toml` file of a user directory (sorted by name).
    pub fn add_dir(&mut self, dir: &Path) -> Result<(), KbError> {
        let listing = fs::read_dir(dir).map_err(|source| KbError::ReadDir {
            path: dir.display().to_string(),
            source,
        })?;
        let mut files: Vec<_> = listing
            .flatten()
            .map(|item| item.path())
            .filter(|path| {
                path.extension().is_some_and(|ext| ext == "toml")
                    && path
                        .file_name()
                        .is_some_and(|name| name != "catalogue.toml")
            })
            .collect();
        files.sort();
        for path in files {
            let shown = path.display().to_string();
            match fs::read_to_string(&path) {
                Ok(text) => self.add(
                    &shown,
                    &text,
                    Strictness::User,
                    EntryOrigin::User(shown.clone()),
                ),
                Err(error) => self.diagnostics.push(Diagnostic {
                    file: shown,
                    line: 1,
                    column: 1,
                    message: format!("cannot read: {error}"),
                }),
            }
        }
        Ok(())
    }
}

/// The names and texts of the shipped entry files, for tools and tests.
pub fn embedded_sources() -> &'static [(&'static str, &'static str)] {
    embedded::EMBEDDED_ENTRIES
}
