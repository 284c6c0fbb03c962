//! The binary's side of a probe session, which `gpuprobe_doctor::session` plans, runs and
//! reports: what the session takes from this process (the environment, the bytecode cache,
//! the native probes this executable carries, the cancel flag its signal handling raises
//! ([`crate::interrupt`])).

use std::collections::BTreeMap;

use gpuprobe_doctor::session::{SessionHost, SessionOptions};
use gpuprobe_model::Tier;
use gpuprobe_runner::Cancel;

use crate::cli::{SessionArgs, TierArg};
use crate::paths;

/// The tier a command-line value names.
pub(crate) fn tier_of(arg: TierArg) -> Tier {
    match arg {
        TierArg::Quick => Tier::Quick,
        TierArg::Standard => Tier::Standard,
        TierArg::Full => Tier::Full,
        TierArg::Soak => Tier::Soak,
    }
}

/// What a session takes from this process, with `env` as its environment and `cancel` as
/// the flag a signal raises ([`crate::interrupt::install`]).
pub(crate) fn host(env: &BTreeMap<String, String>, cancel: Cancel) -> SessionHost {
    SessionHost {
        env: env.clone(),
        bytecode_cache: paths::bytecode_cache(env),
        native_catalog: gpuprobe_gpu::native_catalog(),
        cancel,
    }
}

/// The one mapping of the options `check` and `fix` share into what their session runs;
/// without `--run-dir`, a fresh run directory named after `command` under the state
/// directory.
pub(crate) fn session_options(
    args: &SessionArgs,
    command: &'static str,
    env: &BTreeMap<String, String>,
    probe_options: BTreeMap<String, serde_json::Value>,
) -> SessionOptions {
    SessionOptions {
        command,
        tier: tier_of(args.tier),
        device: args.device.clone(),
        only: args.only.clone(),
        python: args.python.clone(),
        simulate: args.simulate.clone(),
        run_dir: args
            .run_dir
            .clone()
            .unwrap_or_else(|| paths::new_run_dir(env, command)),
        no_native: args.no_native,
        // `check --no-spread` turns it off.
        spread: true,
        timeout_scale: args.timeout_scale,
        startup_timeout: args.startup_timeout,
        seed: args.seed,
        probe_options,
    }
}
