//! The kernel-log events of one triage run, reduced to what a reader and the knowledge base
//! need. A fault storm repeats the same few lines hundreds of thousands of times; keeping
//! every event (and printing it) costs memory and output in proportion to the storm and
//! tells nothing more than a count. So events are grouped into classes (kind plus what
//! tells one failure from another: the Xid number, the faulting client, the ring, the MES
//! message, the library, the device), and each class keeps its count, its first and last
//! occurrence, and a few samples whose text differs in more than its numbers. Only those
//! samples reach `Fingerprint::kernel_events`, where the knowledge base matches them: a
//! log signature names a kind, a client or a text, and each of those is part of the class
//! or the samples' shape, so a storm matches as its first event would.

use std::collections::HashMap;

use gpuprobe_model::KernelEvent;
use serde::{Deserialize, Serialize};

use crate::parse::kernel_log::kind;

/// At most this many classes; events of further classes are counted in one class per kind
/// (`xid (further classes)`), so a hostile log of ever-new Xid numbers cannot grow the
/// summary without bound.
const MAX_CLASSES: usize = 200;
/// Samples per class beyond its first and last occurrence, each with a different shape.
const MAX_SHAPED_SAMPLES: usize = 4;
/// Characters of a class's distinguishing text (an HSA fault reason, a library path).
const MAX_DETAIL_CHARS: usize = 80;
/// Characters of an occurrence's line kept in the summary. The kernel's own lines are
/// shorter than 1024 bytes; anything longer is not a kernel line worth quoting whole.
const MAX_LINE_CHARS: usize = 1000;
/// Bytes of a sampled event's line kept in the fingerprint (what `contains` patterns of the
/// knowledge base search).
const MAX_EVENT_LINE_BYTES: usize = 4096;

/// Where an event is: the input and its 1-based line number there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventAt {
    /// Input name (file path, `stdin`).
    pub input: String,
    /// 1-based line number of the event's first line in that input.
    pub line: usize,
}

/// One occurrence of a class: where, when, and the line as printed (shortened to 1000
/// characters).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Occurrence {
    /// Input name (file path, `stdin`).
    pub input: String,
    /// 1-based line number in that input.
    pub line: usize,
    /// Timestamp as printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// The line (its first line, for a page fault).
    pub text: String,
}

/// Events of one class: how many, and the first and last of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventClass {
    /// Event kind (`page_fault`, `xid`, ...).
    pub kind: String,
    /// The class in words: `xid 79 on 0000:3b:00.0`, `page_fault client CPF (gfxhub)`.
    pub label: String,
    /// How many events of the class the logs hold.
    pub count: usize,
    /// The earliest.
    pub first: Occurrence,
    /// The latest (the same as `first` when `count` is 1).
    pub last: Occurrence,
}

/// What the kernel logs of a triage run held, in summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelLogSummary {
    /// Events found, all classes together.
    pub events: usize,
    /// Per class, in the order of their first occurrence.
    pub classes: Vec<EventClass>,
    /// Where each event of `Fingerprint::kernel_events` is, in the same order.
    pub kept: Vec<EventAt>,
    /// Events counted in `classes` but not kept in `Fingerprint::kernel_events`.
    pub left_out: usize,
}

/// The class of an event in words; events with the same label are one class.
pub(crate) fn class_label(event: &KernelEvent) -> String {
    let detail = |key: &str| event.details.get(key).map(String::as_str);
    let mut label = event.kind.clone();
    let distinguishing: Option<String> = match event.kind.as_str() {
        kind::XID => detail("xid").map(ToOwned::to_owned),
        kind::PAGE_FAULT => {
            let client = event
                .client
                .as_deref()
                .map(|c| format!("client {c}"))
                .or_else(|| detail("client_id").map(|c| format!("client id {c}")));
            let hub = detail("hub").map(|h| format!("({h})"));
            let parts: Vec<String> = client.into_iter().chain(hub).collect();
            (!parts.is_empty()).then(|| parts.join(" "))
        }
        kind::RING_TIMEOUT => detail("ring").map(|r| format!("ring {r}")),
        kind::GPU_RESET => detail("what").map(ToOwned::to_owned),
        kind::MES_FAILURE => detail("msg").map(|m| format!("msg={m}")),
        kind::SEGFAULT => event.library.as_deref().map(|l| {
            // The path differs between installs; the library is what matters.
            format!("in {}", l.rsplit('/').next().unwrap_or(l))
        }),
        kind::HSA_MEMORY_FAULT => detail("reason").map(ToOwned::to_owned),
        _ => None,
    };
    if let Some(text) = distinguishing {
        label.push(' ');
        label.extend(text.chars().take(MAX_DETAIL_CHARS));
    }
    if let Some(bus) = &event.pci_bus {
        label.push_str(" on ");
        label.extend(bus.chars().take(MAX_DETAIL_CHARS));
    }
    label
}

/// The line with its numbers blanked out (`#`) and its spaces collapsed: timestamps (padded
/// to a width), addresses, pids, sequence numbers. Two events of one class with the same
/// shape say the same thing.
fn shape(line: &str) -> String {
    let mut out = String::with_capacity(line.len().min(256));
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if out.len() >= 256 {
            break;
        }
        if c.is_whitespace() {
            while chars.peek().is_some_and(|n| n.is_whitespace()) {
                chars.next();
            }
            out.push(' ');
        } else if c == '0' && chars.peek().is_some_and(|n| *n == 'x' || *n == 'X') {
            chars.next();
            while chars.peek().is_some_and(char::is_ascii_hexdigit) {
                chars.next();
            }
            out.push('#');
        } else if c.is_ascii_digit() {
            while chars.peek().is_some_and(char::is_ascii_digit) {
                chars.next();
            }
            out.push('#');
        } else {
            out.push(c);
        }
    }
    out
}

fn clip_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

fn clip_bytes(text: &mut String, max: usize) {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
}

/// An event with where it is; `order` sorts events of all inputs (part, line).
#[derive(Debug)]
struct Sample {
    order: (usize, usize),
    input: String,
    event: KernelEvent,
}

impl Sample {
    fn occurrence(&self) -> Occurrence {
        Occurrence {
            input: self.input.clone(),
            line: self.order.1,
            time: self.event.time.clone(),
            text: clip_chars(self.event.line.trim(), MAX_LINE_CHARS),
        }
    }
}

#[derive(Debug)]
struct ClassState {
    kind: String,
    label: String,
    count: usize,
    first: Sample,
    last: Option<Sample>,
    shapes: Vec<String>,
    samples: Vec<Sample>,
}

impl ClassState {
    /// Counts the event and keeps it if it is the earliest, the latest, or of a new shape.
    fn add(&mut self, mut candidate: Sample) {
        self.count += 1;
        if candidate.order < self.first.order {
            std::mem::swap(&mut candidate, &mut self.first);
        }
        match &mut self.last {
            None => {
                self.last = Some(candidate);
                return;
            }
            Some(last) if candidate.order > last.order => std::mem::swap(&mut candidate, last),
            Some(_) => {}
        }
        if self.samples.len() < MAX_SHAPED_SAMPLES {
            let shape = shape(&candidate.event.line);
            if !self.shapes.contains(&shape) {
                self.shapes.push(shape);
                self.samples.push(candidate);
            }
        }
    }
}

/// Collects the events of a triage run, one at a time, in bounded memory.
#[derive(Debug, Default)]
pub(crate) struct Aggregator {
    classes: Vec<ClassState>,
    index: HashMap<String, usize>,
    events: usize,
}

impl Aggregator {
    /// Counts one event found at `line` of `input`; `part` numbers the texts triaged so
    /// far, so that events sort by input and line.
    pub(crate) fn add(&mut self, part: usize, input: &str, line: usize, mut event: KernelEvent) {
        self.events += 1;
        let mut label = class_label(&event);
        if !self.index.contains_key(&label) && self.classes.len() >= MAX_CLASSES {
            label = format!("{} (further classes)", event.kind);
        }
        clip_bytes(&mut event.line, MAX_EVENT_LINE_BYTES);
        let sample = Sample {
            order: (part, line),
            input: input.to_owned(),
            event,
        };
        match self.index.get(&label) {
            Some(&i) => self.classes[i].add(sample),
            None => {
                self.index.insert(label.clone(), self.classes.len());
                self.classes.push(ClassState {
                    kind: sample.event.kind.clone(),
                    label,
                    count: 1,
                    shapes: vec![shape(&sample.event.line)],
                    first: sample,
                    last: None,
                    samples: Vec::new(),
                });
            }
        }
    }

    /// The events to keep in the fingerprint (in log order) and the summary.
    pub(crate) fn finish(self) -> (Vec<KernelEvent>, KernelLogSummary) {
        let mut classes: Vec<EventClass> = Vec::with_capacity(self.classes.len());
        let mut kept: Vec<Sample> = Vec::new();
        let mut states = self.classes;
        states.sort_by_key(|c| c.first.order);
        for state in states {
            let first = state.first.occurrence();
            let last = state
                .last
                .as_ref()
                .map_or_else(|| first.clone(), Sample::occurrence);
            classes.push(EventClass {
                kind: state.kind,
                label: state.label,
                count: state.count,
                first,
                last,
            });
            kept.push(state.first);
            kept.extend(state.samples);
            kept.extend(state.last);
        }
        kept.sort_by_key(|s| s.order);
        let left_out = self.events - kept.len();
        let mut at = Vec::with_capacity(kept.len());
        let mut events = Vec::with_capacity(kept.len());
        for sample in kept {
            at.push(EventAt {
                input: sample.input,
                line: sample.order.1,
            });
            events.push(sample.event);
        }
        let summary = KernelLogSummary {
            events: self.events,
            classes,
            kept: at,
            left_out,
        };
        (events, summary)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn xid(number: &str, line: &str) -> KernelEvent {
        KernelEvent {
            kind: kind::XID.to_owned(),
            time: None,
            pci_bus: Some("0000:3b:00.0".to_owned()),
            client: None,
            process: None,
            pid: None,
            library: None,
            details: BTreeMap::from([("xid".to_owned(), number.to_owned())]),
            line: line.to_owned(),
        }
    }

    #[test]
    fn a_storm_keeps_counts_first_last_and_few_samples() {
        let mut agg = Aggregator::default();
        for i in 1..=10_000 {
            agg.add(
                0,
                "log",
                i,
                xid("79", &format!("[{i}.0] NVRM: Xid 79, pid={i}")),
            );
        }
        // Out of order (a page fault handed on late) still sorts by line.
        agg.add(0, "log", 20_000, xid("13", "[5.0] Xid 13 late"));
        agg.add(0, "log", 15_000, xid("13", "[4.0] Xid 13 early"));
        let (events, summary) = agg.finish();
        assert_eq!(summary.events, 10_002);
        assert_eq!(summary.classes.len(), 2);
        let storm = &summary.classes[0];
        assert_eq!(storm.label, "xid 79 on 0000:3b:00.0");
        assert_eq!(
            (storm.count, storm.first.line, storm.last.line),
            (10_000, 1, 10_000)
        );
        let late = &summary.classes[1];
        assert_eq!((late.first.line, late.last.line), (15_000, 20_000));
        assert_eq!(events.len(), 4, "{events:?}");
        assert_eq!(summary.kept.len(), 4);
        assert_eq!(summary.left_out, 9_998);
        let lines: Vec<usize> = summary.kept.iter().map(|a| a.line).collect();
        assert_eq!(lines, vec![1, 10_000, 15_000, 20_000]);
    }

    #[test]
    fn classes_are_bounded() {
        let mut agg = Aggregator::default();
        for i in 0..1000 {
            agg.add(0, "log", i + 1, xid(&i.to_string(), "Xid"));
        }
        let (events, summary) = agg.finish();
        assert_eq!(summary.classes.len(), MAX_CLASSES + 1);
        assert_eq!(summary.classes[MAX_CLASSES].label, "xid (further classes)");
        assert_eq!(summary.classes[MAX_CLASSES].count, 1000 - MAX_CLASSES);
        assert!(events.len() <= (MAX_CLASSES + 1) * (MAX_SHAPED_SAMPLES + 2));
    }

    #[test]
    fn shapes_ignore_numbers() {
        assert_eq!(
            shape("[    0.5] fault at 0x7f00aa pid 42"),
            shape("[ 1299.0] fault at 0xdead pid 7")
        );
        assert_ne!(shape("msg=REMOVE_QUEUE"), shape("msg=ADD_QUEUE"));
    }
}
