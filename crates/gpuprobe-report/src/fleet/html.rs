//! The fleet view as one offline HTML page, made as the run report's page is
//! ([`crate::html`]): minijinja with HTML autoescaping over `templates/fleet.html`
//! (embedded), no script, nothing loaded from anywhere, written atomically.

use std::path::Path;

use minijinja::{AutoEscape, Environment};
use serde::Serialize;

use super::{FleetView, terminal::flag_line};
use crate::html::{HtmlError, write};

const TEMPLATE: &str = include_str!("../../templates/fleet.html");
const TEMPLATE_NAME: &str = "fleet.html";

#[derive(Serialize)]
struct Page<'a> {
    view: &'a FleetView,
    /// One headline per flagged node, as the terminal words it.
    flag_lines: Vec<String>,
    min_peers: usize,
}

/// Renders the view as one HTML document.
pub(crate) fn render(view: &FleetView) -> Result<String, HtmlError> {
    let mut env = Environment::new();
    env.set_auto_escape_callback(|_| AutoEscape::Html);
    env.add_template(TEMPLATE_NAME, TEMPLATE)
        .map_err(HtmlError::Render)?;
    let template = env.get_template(TEMPLATE_NAME).map_err(HtmlError::Render)?;
    template
        .render(Page {
            view,
            flag_lines: view.flagged.iter().map(flag_line).collect(),
            min_peers: super::MIN_PEERS,
        })
        .map_err(HtmlError::Render)
}

/// Renders the view and writes it to `path` atomically.
pub fn write_page(path: &Path, view: &FleetView) -> Result<(), HtmlError> {
    write(path, &render(view)?)
}
