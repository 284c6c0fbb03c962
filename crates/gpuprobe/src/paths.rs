//! Where gpuprobe keeps run directories and its caches: `gpuprobe_runner::paths`, named here
//! for the commands that make run directories; and the up-front check of an output file
//! (`gpuprobe_fs`).

pub(crate) use gpuprobe_fs::check_writable_file;
pub(crate) use gpuprobe_runner::{bytecode_cache, new_run_dir, runs_root};
