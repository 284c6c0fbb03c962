//! Wall-clock timestamps in UTC: `gpuprobe_runner::stamp`'s, which names run directories.

pub(crate) use gpuprobe_runner::rfc3339;
