//! The `gpuprobe` binary: everything lives in the library half of this crate.

fn main() -> std::process::ExitCode {
    gpuprobe::main(std::env::args_os())
}
