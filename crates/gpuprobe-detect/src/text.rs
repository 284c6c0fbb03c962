//! Text helpers shared by every parser: cleaning pasted text (ANSI colour codes, CRLF,
//! provenance headers), splitting `key: value` lines, reading numbers that tools print
//! with decoration (`5510(0x1586)`, `81559 MiB`), and normalising PCI addresses.
//!
//! Nothing here panics on any input; every function is total.

/// A `&'static Regex` compiled on first use from a pattern fixed in the source.
macro_rules! static_regex {
    ($pattern:expr) => {{
        static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
        RE.get_or_init(|| regex::Regex::new($pattern).expect("static regex"))
    }};
}
pub(crate) use static_regex;

/// One line of cleaned input with its 1-based number in the original text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Line {
    /// 1-based line number in the original text.
    pub no: usize,
    /// The line without ANSI escapes, carriage returns or trailing whitespace.
    pub text: String,
}

/// Removes ANSI escape sequences and stray carriage returns from one line.
pub(crate) fn strip_ansi(line: &str) -> String {
    let without_escapes = if line.contains('\x1b') {
        // CSI sequences (colours, cursor moves), OSC sequences (titles, links), lone ESC codes.
        static_regex!(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
            .replace_all(line, "")
            .into_owned()
    } else {
        line.to_owned()
    };
    without_escapes.replace('\r', "")
}

/// Splits text into cleaned lines, keeping original line numbers.
pub(crate) fn clean_lines(text: &str) -> Vec<Line> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    text.split('\n')
        .enumerate()
        .map(|(i, raw)| Line {
            no: i + 1,
            text: strip_ansi(raw).trim_end().to_owned(),
        })
        .collect()
}

/// Whether a line is one of the two provenance header lines fixtures carry.
pub(crate) fn is_provenance(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("# source:") || t.starts_with("# note:")
}

/// Cleaned lines with the leading provenance header (`# source:` / `# note:`) removed.
pub(crate) fn body_lines(text: &str) -> Vec<Line> {
    let mut lines = clean_lines(text);
    let header = lines.iter().take_while(|l| is_provenance(&l.text)).count();
    lines.drain(..header);
    lines
}

/// Splits `Key: value` at the first colon; the value loses leading colons and spaces
/// (rocminfo prints `Packet Processor uCode:: 32` and `WatchPts on Addr. Ranges:1`).
pub(crate) fn split_key_value(line: &str) -> Option<(&str, &str)> {
    let (key, value) = line.split_once(':')?;
    let key = key.trim();
    if key.is_empty() {
        return None;
    }
    Some((key, value.trim_start_matches(':').trim()))
}

/// `None` for the placeholders tools print when they have no value.
pub(crate) fn meaningful(value: &str) -> Option<String> {
    let v = value.trim();
    let lower = v.to_ascii_lowercase();
    let placeholder = matches!(
        lower.as_str(),
        "" | "n/a"
            | "[n/a]"
            | "na"
            | "none"
            | "unknown"
            | "unsupported"
            | "not supported"
            | "[not supported]"
            | "could not collect"
            | "not available"
            | "-"
    );
    if placeholder {
        None
    } else {
        Some(v.to_owned())
    }
}

/// Reads the leading unsigned integer of a value such as `5510(0x1586)` or `40`.
pub(crate) fn leading_u64(value: &str) -> Option<u64> {
    let digits: String = value
        .trim()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Reads a number that may be decimal or `0x`-prefixed hexadecimal.
pub(crate) fn parse_int(value: &str) -> Option<u64> {
    let v = value.trim();
    if let Some(hex) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else {
        v.parse().ok()
    }
}

/// Formats a 16-bit PCI id the way sysfs prints it (`0x1586`).
pub(crate) fn pci_id(value: u64) -> String {
    format!("0x{value:04x}")
}

/// Normalises a PCI address to `dddd:bb:dd.f` in lower case.
///
/// Accepts sysfs (`0000:c5:00.0`), nvidia-smi (`00000000:00:06.0`) and short
/// (`c5:00.0`, domain 0) forms, and NVIDIA Xid's `0000:00:06` (function 0).
pub fn normalize_bdf(value: &str) -> Option<String> {
    let v = value.trim().trim_start_matches("PCI:").trim();
    let parts: Vec<&str> = v.split(':').collect();
    let (domain, bus, devfn) = match parts.as_slice() {
        [d, b, df] => (u32::from_str_radix(d, 16).ok()?, *b, *df),
        [b, df] => (0, *b, *df),
        _ => return None,
    };
    let bus = u8::from_str_radix(bus, 16).ok()?;
    let (dev, func) = match devfn.split_once('.') {
        Some((d, f)) => (
            u8::from_str_radix(d, 16).ok()?,
            u8::from_str_radix(f, 16).ok()?,
        ),
        None => (u8::from_str_radix(devfn, 16).ok()?, 0),
    };
    if dev > 0x1f || func > 7 || domain > 0xffff {
        return None;
    }
    Some(format!("{domain:04x}:{bus:02x}:{dev:02x}.{func:x}"))
}

/// Converts a KFD `location_id` / rocminfo `BDFID` (`bus << 8 | dev << 3 | fn`) and a PCI
/// domain into a normalised address.
pub fn bdf_from_location(domain: u32, location: u32) -> Option<String> {
    if domain > 0xffff || location > 0xffff {
        return None;
    }
    let bus = (location >> 8) & 0xff;
    let dev = (location >> 3) & 0x1f;
    let func = location & 0x7;
    Some(format!("{domain:04x}:{bus:02x}:{dev:02x}.{func:x}"))
}

/// Converts a size with a unit (`81559 MiB`, `512 MB`, `16 GB`, `49152 KB`) to bytes.
/// `MB`/`KB`/`GB` are read as binary units, as the GPU tools mean them.
pub(crate) fn size_to_bytes(value: &str) -> Option<u64> {
    let v = value.trim();
    let number: String = v
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let amount: f64 = number.parse().ok()?;
    let unit = v[number.len()..].trim().to_ascii_lowercase();
    let factor: u64 = match unit.as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return None,
    };
    if !amount.is_finite() || amount < 0.0 {
        return None;
    }
    let bytes = amount * factor as f64;
    if bytes > u64::MAX as f64 {
        None
    } else {
        Some(bytes as u64)
    }
}

/// Width of leading whitespace, counting a TAB as four columns.
pub(crate) fn indent_width(line: &str) -> usize {
    let mut width = 0;
    for c in line.chars() {
        match c {
            ' ' => width += 1,
            '\t' => width += 4,
            _ => break,
        }
    }
    width
}

/// One node of an indentation tree (`nvidia-smi -q`, `amd-smi static`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KvNode {
    /// The key (text before the colon, or the whole line for a section header).
    pub key: String,
    /// The value after the colon, when the line has one.
    pub value: Option<String>,
    /// Line number in the original text.
    pub line: usize,
    /// Deeper-indented lines that follow.
    pub children: Vec<KvNode>,
}

impl KvNode {
    /// The first child with this key (case-insensitive).
    pub(crate) fn child(&self, key: &str) -> Option<&KvNode> {
        self.children
            .iter()
            .find(|c| c.key.eq_ignore_ascii_case(key))
    }

    /// The meaningful value of a child.
    pub(crate) fn child_value(&self, key: &str) -> Option<String> {
        self.child(key)
            .and_then(|c| c.value.as_deref())
            .and_then(meaningful)
    }

    /// The meaningful value at a path of child keys.
    pub(crate) fn path_value(&self, path: &[&str]) -> Option<String> {
        let mut node = self;
        for key in path {
            node = node.child(key)?;
        }
        node.value.as_deref().and_then(meaningful)
    }
}

/// Builds an indentation tree from `key : value` lines. Blank lines are ignored; a line
/// without a colon is a section header.
pub(crate) fn kv_tree(lines: &[Line]) -> Vec<KvNode> {
    // A stack of (indent, node); finished nodes are attached to their parent on pop.
    let mut roots: Vec<KvNode> = Vec::new();
    let mut stack: Vec<(usize, KvNode)> = Vec::new();
    fn pop_into(stack: &mut Vec<(usize, KvNode)>, roots: &mut Vec<KvNode>) {
        if let Some((_, node)) = stack.pop() {
            match stack.last_mut() {
                Some((_, parent)) => parent.children.push(node),
                None => roots.push(node),
            }
        }
    }
    for line in lines {
        if line.text.trim().is_empty() {
            continue;
        }
        let indent = indent_width(&line.text);
        let content = line.text.trim();
        // Split at the first ": " (or a trailing colon) so that values and headers that
        // contain colons themselves (`BDF: 0000:01:00.0`, `GPU 00000000:00:06.0`) survive.
        let (key, value) = match content.split_once(": ") {
            Some((k, v)) if !k.trim().is_empty() => {
                let v = v.trim();
                (
                    k.trim().to_owned(),
                    if v.is_empty() {
                        None
                    } else {
                        Some(v.to_owned())
                    },
                )
            }
            _ => match content.strip_suffix(':') {
                Some(k) if !k.trim().is_empty() => (k.trim().to_owned(), None),
                _ => (content.to_owned(), None),
            },
        };
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            pop_into(&mut stack, &mut roots);
        }
        stack.push((
            indent,
            KvNode {
                key,
                value,
                line: line.no,
                children: Vec::new(),
            },
        ));
    }
    while !stack.is_empty() {
        pop_into(&mut stack, &mut roots);
    }
    roots
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdf_forms_normalise() {
        assert_eq!(
            normalize_bdf("00000000:00:06.0").as_deref(),
            Some("0000:00:06.0")
        );
        assert_eq!(
            normalize_bdf("0000:C5:00.0").as_deref(),
            Some("0000:c5:00.0")
        );
        assert_eq!(
            normalize_bdf("PCI:0000:3b:00").as_deref(),
            Some("0000:3b:00.0")
        );
        assert_eq!(normalize_bdf("c5:00.0").as_deref(), Some("0000:c5:00.0"));
        assert_eq!(normalize_bdf("garbage"), None);
        assert_eq!(normalize_bdf("0000:00:40.0"), None);
    }

    #[test]
    fn location_ids_decode() {
        assert_eq!(bdf_from_location(0, 62464).as_deref(), Some("0000:f4:00.0"));
        assert_eq!(bdf_from_location(0, 3328).as_deref(), Some("0000:0d:00.0"));
        assert_eq!(
            bdf_from_location(0, 0x0b0b).as_deref(),
            Some("0000:0b:01.3")
        );
    }

    #[test]
    fn sizes_convert() {
        assert_eq!(size_to_bytes("81559 MiB"), Some(81559 << 20));
        assert_eq!(size_to_bytes("512 MB"), Some(512 << 20));
        assert_eq!(size_to_bytes("1.5 GB"), Some(3 << 29));
        assert_eq!(size_to_bytes("lots"), None);
    }

    #[test]
    fn ansi_and_cr_are_removed() {
        assert_eq!(strip_ansi("\x1b[1;31mERROR\x1b[0m: x\r"), "ERROR: x");
    }

    #[test]
    fn tree_nests_by_indent() {
        let lines =
            clean_lines("GPU 0\n    FB Memory Usage\n        Total : 10 MiB\n    Name : X\n");
        let tree = kv_tree(&lines);
        assert_eq!(tree.len(), 1);
        assert_eq!(
            tree[0].path_value(&["FB Memory Usage", "Total"]).as_deref(),
            Some("10 MiB")
        );
        assert_eq!(tree[0].child_value("Name").as_deref(), Some("X"));
    }
}
