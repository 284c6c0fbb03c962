//! The measured dtype-conversion matrix: for each source and target dtype, whether each
//! conversion method worked on the device, as measured by the `dtype.*` probes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use gpuprobe_model::{ProbeResult, Verdict};

use crate::style::Style;

/// One parsed `dtype.<from>.<to>.<method>.<where>` id.
pub(crate) struct Cell<'a> {
    pub(crate) from: &'a str,
    pub(crate) to: &'a str,
    pub(crate) method: &'a str,
    pub(crate) place: &'a str,
}

pub(crate) fn parse(id: &str) -> Option<Cell<'_>> {
    let mut parts = id.split('.');
    if parts.next()? != "dtype" {
        return None;
    }
    let from = parts.next()?;
    let to = parts.next()?;
    let method = parts.next()?;
    let place = parts.next()?;
    Some(Cell {
        from,
        to,
        method,
        place,
    })
}

/// Renders the matrix as a table: one row per (from, to, where), one column per method;
/// `ok`, `BROKEN (class)`, `skip`, or blank where not measured. Empty when no dtype probe ran.
pub(crate) fn render(results: &[ProbeResult], style: Style) -> String {
    let mut methods: BTreeSet<&str> = BTreeSet::new();
    let mut rows: BTreeMap<(String, &str, &str, &str), BTreeMap<&str, String>> = BTreeMap::new();
    for result in results {
        let Some(cell) = parse(result.probe.as_str()) else {
            continue;
        };
        methods.insert(cell.method);
        let text = match &result.verdict {
            Verdict::Pass => style.good("ok"),
            Verdict::Fail { class, .. } => style.bad(&format!("BROKEN ({})", class.describe())),
            Verdict::Skip { .. } | Verdict::NotTested { .. } => style.dim("-"),
            other => style.bad(other.label()),
        };
        rows.entry((result.device.to_string(), cell.from, cell.to, cell.place))
            .or_default()
            .insert(cell.method, text);
    }
    if rows.is_empty() {
        return String::new();
    }
    let mut table = comfy_table::Table::new();
    table.load_style(comfy_table::presets::UTF8_BORDERS_ONLY);
    let mut header = vec![
        "device".to_string(),
        "from".into(),
        "to".into(),
        "where".into(),
    ];
    // Each method column is a call (`.to()`, `.half()`): named as one, it is not taken for
    // the target dtype's column (`to`).
    header.extend(methods.iter().map(|m| format!(".{m}()")));
    table.set_header(header);
    for ((device, from, to, place), cells) in &rows {
        let mut row = vec![
            device.clone(),
            from.to_string(),
            to.to_string(),
            place.to_string(),
        ];
        row.extend(
            methods
                .iter()
                .map(|m| cells.get(m).cloned().unwrap_or_default()),
        );
        table.add_row(row);
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}",
        style.bold("dtype conversions, measured (bit-exact against the CPU conversion)")
    );
    let _ = writeln!(out, "{table}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::{DeviceRef, Layer, ProbeId};

    #[test]
    fn each_column_is_named_once_and_methods_read_as_calls() {
        let results: Vec<ProbeResult> =
            ["dtype.bf16.fp32.to.device", "dtype.bf16.fp32.float.device"]
                .iter()
                .map(|id| {
                    ProbeResult::new(
                        ProbeId::new(*id),
                        DeviceRef::Cpu,
                        Layer::Framework,
                        Verdict::Pass,
                    )
                })
                .collect();
        let text = render(&results, Style::PLAIN);
        let header = text.lines().find(|l| l.contains("from")).unwrap();
        let words: Vec<&str> = header
            .split(|c: char| c.is_whitespace() || c == '│')
            .filter(|w| !w.is_empty())
            .collect();
        assert_eq!(
            words,
            ["device", "from", "to", "where", ".float()", ".to()"],
            "{text}"
        );
    }
}
