//! Where gpuprobe keeps run directories and its caches: `gpuprobe_runner::paths`, named here
//! for the commands that make run directories.

pub(crate) use gpuprobe_runner::paths::{
    bytecode_cache, check_writable_file, new_run_dir, runs_root,
};
