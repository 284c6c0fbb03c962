//! Reading triage inputs in bounded memory: files, standard input, pipes and devices.
//!
//! A run reads at most a byte cap (64 MiB unless raised), shared by its inputs, because
//! what people hand to triage is not always a finished paste: `/dev/zero`, `journalctl -f |
//! gpuprobe triage -`, or a log of months of boots. Reading stops at the cap, promptly and
//! without ever holding more than the cap.
//!
//! What is kept when an input is larger than its share:
//! - a regular file (its size is known and it can be seeked): its first quarter of the
//!   share (the boot, where the driver and the GPUs announce themselves) and the rest from
//!   its end (the latest events, which are what a user asks about). The lines between are
//!   counted, not kept, so line numbers in the tail are the file's own;
//! - a stream (stdin, a pipe, a device): what came first, because an endless stream has no
//!   end to keep, and waiting for one would hang.
//!
//! A line cut by the cap is dropped: a cut line can state a wrong fact (`Xid ... 7` for
//! `79`). What was left out is described in a [`Truncation`], never dropped silently.
//!
//! The cap is shared by water-filling: inputs whose size is known and small are read whole
//! first, and what remains is split evenly between the large ones and the streams, so a
//! huge log next to a rocminfo paste cannot crowd the rocminfo out.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::LineRange;

/// The default cap on the bytes one run reads, all inputs together. A kernel ring buffer
/// holds at most 32 MiB (`CONFIG_LOG_BUF_SHIFT` 25; usually well under 1 MiB) and a paste
/// of every other supported tool is under 1 MiB, so 64 MiB holds any whole `dmesg` with
/// room to spare, while triage's working memory (about two and a half times what it reads)
/// stays a few hundred MiB on any host.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;

/// The smallest cap accepted: less would not hold one tool's output (a rocminfo of a few
/// GPUs is 20 to 50 KiB).
pub(crate) const MIN_MAX_BYTES: u64 = 64 << 10;

/// Bytes read per `read` call while streaming.
const CHUNK: usize = 1 << 20;

/// A byte size that is not one, or is below [`MIN_MAX_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ByteSizeError {
    /// Not a number with an optional unit.
    #[error("expected a size such as 64M, 512M or 2G (K, M, G and T are powers of 1024)")]
    Malformed,
    /// Larger than 16 EiB.
    #[error("too large")]
    TooLarge,
    /// Zero or less than the minimum.
    #[error("at least 64K is needed to hold one tool's output")]
    TooSmall,
}

/// Parses a byte size: a whole number with an optional unit `K`, `M`, `G` or `T` (powers
/// of 1024; `KB`, `KiB` and a trailing `B` are read alike): `1048576`, `256M`, `2G`.
pub fn parse_byte_size(text: &str) -> Result<u64, ByteSizeError> {
    let text = text.trim();
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    if digits.is_empty() {
        return Err(ByteSizeError::Malformed);
    }
    let unit = unit.trim().to_ascii_lowercase();
    let shift = match unit.as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(ByteSizeError::Malformed),
    };
    let number: u64 = digits.parse().map_err(|_| ByteSizeError::TooLarge)?;
    let bytes = number
        .checked_mul(1 << shift)
        .ok_or(ByteSizeError::TooLarge)?;
    if bytes < MIN_MAX_BYTES {
        return Err(ByteSizeError::TooSmall);
    }
    Ok(bytes)
}

/// Splits `cap` between inputs of the given sizes (`None`: unknown, a stream): smallest
/// first, each getting at most an even share of what is left, so small inputs are read
/// whole and the rest is split evenly between the large ones.
pub(crate) fn share_cap(cap: u64, sizes: &[Option<u64>]) -> Vec<u64> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| sizes[i].unwrap_or(u64::MAX));
    let mut shares = vec![0; sizes.len()];
    let mut left = cap;
    for (done, &i) in order.iter().enumerate() {
        let even = left / (sizes.len() - done) as u64;
        let share = sizes[i].map_or(even, |size| size.min(even));
        shares[i] = share;
        left -= share;
    }
    shares
}

/// One text to triage, with the number its first line has in the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InputPart {
    /// 1-based number of the text's first line in the input.
    pub first_line: usize,
    /// The text (invalid UTF-8 replaced).
    pub text: String,
}

/// What was left out of an input larger than its share of the cap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Truncation {
    /// Input name (file path, `stdin`).
    pub input: String,
    /// The input's share of the cap, in bytes.
    pub share_bytes: u64,
    /// The input's size, when known (a regular file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// Bytes triaged.
    pub kept_bytes: u64,
    /// Lines triaged: the head, and for a file the tail.
    pub kept_lines: Vec<LineRange>,
    /// Lines of a file between its head and tail that were counted but not triaged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted_lines: Option<LineRange>,
    /// Whether the rest of a stream was left unread (it may never have ended).
    pub rest_unread: bool,
}

impl Truncation {
    /// What was kept and what was not, in words (the input name is the caller's to show).
    pub fn describe(&self) -> String {
        let kept: Vec<String> = self.kept_lines.iter().map(ToString::to_string).collect();
        let kept = if kept.is_empty() {
            "nothing (no complete line)".to_owned()
        } else {
            kept.join(" and ")
        };
        match self.size_bytes {
            Some(size) => format!(
                "{} is more than its share of the byte cap ({}): triaged {kept} (its start and \
                 its latest lines); not triaged: {}",
                crate::human_bytes(size),
                crate::human_bytes(self.share_bytes),
                self.omitted_lines
                    .map_or_else(|| "the cut lines".to_owned(), |o| o.to_string()),
            ),
            None => format!(
                "stopped reading at its share of the byte cap ({}): triaged {kept}; the rest, \
                 from the line the cap cut on, was not read",
                crate::human_bytes(self.share_bytes),
            ),
        }
    }
}

/// An input as read: its texts (one, or the head and tail of a large file) and what was
/// left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReadInput {
    /// The texts, in input order.
    pub parts: Vec<InputPart>,
    /// Set when the input was larger than its share.
    pub truncation: Option<Truncation>,
}

/// The size of a regular file, which can be read head and tail; `None` for anything else
/// (a pipe, a character device, a socket), which is read as a stream.
pub(crate) fn regular_file_size(path: &Path) -> Option<u64> {
    std::fs::metadata(path)
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map(|m| m.len())
}

fn count_newlines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}

fn text_of(bytes: Vec<u8>) -> String {
    // Pastes are often not clean UTF-8 (terminal junk): keep what can be read, and copy
    // only when something must be replaced.
    match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned(),
    }
}

/// Reads at most `limit` bytes, in chunks, into a buffer that never grows past `limit`.
/// Returns the bytes and whether the reader had more.
fn read_up_to(reader: &mut impl Read, limit: u64) -> io::Result<(Vec<u8>, bool)> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut buf: Vec<u8> = Vec::new();
    loop {
        if buf.len() >= limit {
            let mut probe = [0u8; 1];
            let more = loop {
                match reader.read(&mut probe) {
                    Ok(n) => break n > 0,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            };
            return Ok((buf, more));
        }
        let want = CHUNK.min(limit - buf.len());
        if buf.capacity() - buf.len() < want {
            // Grow by doubling, but never past the limit (a plain `reserve` would double a
            // 64 MiB buffer to 128 MiB for its last byte).
            let target = (buf.capacity() * 2).max(buf.len() + want).min(limit);
            buf.reserve_exact(target - buf.len());
        }
        let start = buf.len();
        buf.resize(start + want, 0);
        let n = loop {
            match reader.read(&mut buf[start..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    buf.truncate(start);
                    return Err(e);
                }
            }
        };
        buf.truncate(start + n);
        if n == 0 {
            return Ok((buf, false));
        }
    }
}

/// Reads a stream (stdin, a pipe, a device) up to `limit` bytes; more is not read.
pub(crate) fn read_stream(reader: &mut impl Read, name: &str, limit: u64) -> io::Result<ReadInput> {
    let (mut bytes, more) = read_up_to(reader, limit)?;
    if !more {
        return Ok(ReadInput {
            parts: vec![InputPart {
                first_line: 1,
                text: text_of(bytes),
            }],
            truncation: None,
        });
    }
    // The line the cap cut is dropped.
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    bytes.truncate(whole);
    let lines = count_newlines(&bytes);
    let truncation = Truncation {
        input: name.to_owned(),
        share_bytes: limit,
        size_bytes: None,
        kept_bytes: bytes.len() as u64,
        kept_lines: (lines > 0)
            .then_some(LineRange {
                first: 1,
                last: lines,
            })
            .into_iter()
            .collect(),
        omitted_lines: None,
        rest_unread: true,
    };
    Ok(ReadInput {
        parts: vec![InputPart {
            first_line: 1,
            text: text_of(bytes),
        }],
        truncation: Some(truncation),
    })
}

/// Reads a file up to `limit` bytes: a regular file larger than that as its head and
/// tail, anything else as a stream.
pub(crate) fn read_file(path: &Path, name: &str, limit: u64) -> io::Result<ReadInput> {
    let mut file = File::open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() || metadata.len() <= limit {
        return read_stream(&mut file, name, limit);
    }
    let size = metadata.len();
    let head_limit = limit / 4;
    let tail_limit = limit - head_limit;

    let (mut head, _) = read_up_to(&mut (&mut file).take(head_limit), head_limit)?;
    let head_end = head.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    head.truncate(head_end);
    let head_lines = count_newlines(&head);

    // Read from one byte before the tail so that a tail starting on a line boundary is
    // seen to; everything up to the first line break is the end of a cut line.
    let tail_from = size - tail_limit - 1;
    file.seek(SeekFrom::Start(tail_from))?;
    let (mut tail, _) = read_up_to(&mut (&mut file).take(tail_limit + 1), tail_limit + 1)?;
    let cut = tail
        .iter()
        .position(|&b| b == b'\n')
        .map_or(tail.len(), |i| i + 1);
    tail.drain(..cut);
    let tail_start = tail_from + cut as u64;

    // The lines between are counted, a chunk at a time, so the tail keeps the file's own
    // line numbers.
    let gap = tail_start.saturating_sub(head_end as u64);
    file.seek(SeekFrom::Start(head_end as u64))?;
    let mut between = (&mut file).take(gap);
    let mut chunk = vec![0u8; CHUNK];
    let mut omitted = 0usize;
    loop {
        let n = match between.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        omitted += count_newlines(&chunk[..n]);
    }
    let tail_first = head_lines + omitted + 1;
    let tail_lines = count_newlines(&tail) + usize::from(tail.last().is_some_and(|&b| b != b'\n'));

    let mut kept_lines = Vec::new();
    if head_lines > 0 {
        kept_lines.push(LineRange {
            first: 1,
            last: head_lines,
        });
    }
    if tail_lines > 0 {
        kept_lines.push(LineRange {
            first: tail_first,
            last: tail_first + tail_lines - 1,
        });
    }
    let truncation = Truncation {
        input: name.to_owned(),
        share_bytes: limit,
        size_bytes: Some(size),
        kept_bytes: (head.len() + tail.len()) as u64,
        kept_lines,
        omitted_lines: (omitted > 0).then_some(LineRange {
            first: head_lines + 1,
            last: head_lines + omitted,
        }),
        rest_unread: false,
    };
    Ok(ReadInput {
        parts: vec![
            InputPart {
                first_line: 1,
                text: text_of(head),
            },
            InputPart {
                first_line: tail_first,
                text: text_of(tail),
            },
        ],
        truncation: Some(truncation),
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    #[test]
    fn sizes_with_units() {
        assert_eq!(parse_byte_size("256M"), Ok(256 << 20));
        assert_eq!(parse_byte_size("2G"), Ok(2 << 30));
        assert_eq!(parse_byte_size("2gib"), Ok(2 << 30));
        assert_eq!(parse_byte_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_byte_size("64K"), Ok(64 << 10));
        assert_eq!(parse_byte_size("0"), Err(ByteSizeError::TooSmall));
        assert_eq!(parse_byte_size("1K"), Err(ByteSizeError::TooSmall));
        assert_eq!(parse_byte_size("-5"), Err(ByteSizeError::Malformed));
        assert_eq!(parse_byte_size("5 parsecs"), Err(ByteSizeError::Malformed));
        assert_eq!(
            parse_byte_size("99999999999T"),
            Err(ByteSizeError::TooLarge)
        );
    }

    #[test]
    fn small_inputs_are_read_whole_and_large_ones_share_the_rest() {
        assert_eq!(
            share_cap(100, &[Some(1000), Some(10), None]),
            vec![45, 10, 45]
        );
        assert_eq!(share_cap(100, &[Some(5), Some(6)]), vec![5, 6]);
        assert_eq!(share_cap(100, &[]), Vec::<u64>::new());
    }

    #[test]
    fn an_endless_stream_stops_at_the_limit_without_the_cut_line() {
        let mut endless = io::repeat(b'a').take(u64::MAX);
        let mut lines = b"one\ntwo\n".chain(&mut endless);
        let read = read_stream(&mut lines, "stdin", 100).unwrap();
        assert_eq!(read.parts[0].text, "one\ntwo\n");
        let truncation = read.truncation.unwrap();
        assert!(truncation.rest_unread);
        assert_eq!(truncation.kept_lines, vec![LineRange { first: 1, last: 2 }]);
    }

    #[test]
    fn a_large_file_keeps_head_and_tail_with_its_own_line_numbers() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        for i in 1..=1000 {
            writeln!(file, "line {i:04}").unwrap();
        }
        file.flush().unwrap();
        // 10 bytes a line: a 400-byte limit keeps 10 lines of head, 30 of tail.
        let read = read_file(file.path(), "f", 400).unwrap();
        let t = read.truncation.unwrap();
        assert_eq!(t.size_bytes, Some(10_000));
        assert_eq!(
            t.kept_lines,
            vec![
                LineRange { first: 1, last: 10 },
                LineRange {
                    first: 971,
                    last: 1000
                }
            ]
        );
        assert_eq!(
            t.omitted_lines,
            Some(LineRange {
                first: 11,
                last: 970
            })
        );
        assert_eq!(read.parts[1].first_line, 971);
        assert!(read.parts[1].text.starts_with("line 0971\n"));
        assert!(read.parts[0].text.ends_with("line 0010\n"));
        // A file within the limit is read whole.
        let whole = read_file(file.path(), "f", 10_000).unwrap();
        assert!(whole.truncation.is_none());
        assert_eq!(whole.parts[0].text.len(), 10_000);
    }
}
