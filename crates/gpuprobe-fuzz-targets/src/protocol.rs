//! The `protocol` target: a worker's event stream as the supervisor reads it
//! (`gpuprobe_runner::read_messages`, one JSON event per line), and the same bytes
//! as the worker's stderr tail the supervisor quotes when a probe crashes
//! (`supervisor::telling_line`). Workers are separate processes running third-party
//! libraries, so whatever they write must never take the supervisor down.

use gpuprobe_model::WorkerEvent;
use gpuprobe_runner::{WorkerMessage, read_messages, telling_line};

/// How many lines of output the supervisor keeps as a worker's tail (`worker::TAIL_LINES`).
const TAIL_LINES: usize = 40;

/// Reads `data` as a worker's event stream and as its output tail.
///
/// Invariants: one message per non-blank line, then exactly one `Closed`, last; every
/// decoded event serialises back to JSON that decodes to the same event (a result's
/// observation is written to `results.jsonl` and read back by `--resume`); the telling line
/// of a tail is one of its lines.
pub fn protocol(data: &[u8]) {
    let mut messages = Vec::new();
    read_messages(data, |message| {
        messages.push(message);
        true
    });
    assert_eq!(
        messages.last(),
        Some(&WorkerMessage::Closed),
        "the stream ends with Closed"
    );
    let closed = messages
        .iter()
        .filter(|m| matches!(m, WorkerMessage::Closed))
        .count();
    assert_eq!(closed, 1, "Closed comes once");
    let lines: Vec<String> = data
        .split(|&b| b == b'\n')
        .map(|line| {
            String::from_utf8_lossy(line)
                .trim_end_matches(['\n', '\r'])
                .to_owned()
        })
        .collect();
    let non_blank = lines.iter().filter(|l| !l.trim().is_empty()).count();
    assert_eq!(
        messages.len() - 1,
        non_blank,
        "one message per non-blank line"
    );

    for message in &messages {
        if let WorkerMessage::Event(event) = message {
            let json = serde_json::to_string(event).expect("a decoded event serialises");
            let back: WorkerEvent = serde_json::from_str(&json)
                .unwrap_or_else(|e| panic!("re-encoded event does not decode: {e}: {json}"));
            assert_eq!(
                &back,
                event.as_ref(),
                "an event changes through JSON: {json}"
            );
        }
    }

    let tail = &lines[lines.len().saturating_sub(TAIL_LINES)..];
    if let Some(line) = telling_line(tail) {
        assert!(
            tail.iter().any(|l| l.trim() == line),
            "telling line {line:?} is not in the tail"
        );
    }
}
