#!/bin/sh
# gpuprobe as Slurm's node health check, prolog and epilog (docs/fleet.md, "Slurm").
#
# Name this one file in slurm.conf as HealthCheckProgram=, Prolog= and/or Epilog=. It runs
# `gpuprobe check --health` and acts on its one-line answer (docs/exit-codes.md):
#
#   health check (HealthCheckProgram, or `gpuprobe-slurm.sh health` by hand):
#     FAIL     drain the node, the line as its reason (`sinfo -R` shows it);
#     OK       resume the node, but only when it is drained with a reason gpuprobe set:
#              a node somebody else drained stays drained;
#     UNKNOWN  log it and leave the node as it is, unless GPUPROBE_DRAIN_UNKNOWN_AFTER
#              answers in a row were UNKNOWN (0, the default: never; see below);
#     exit 0, or 1 when scontrol failed (slurmd logs a health check's non-zero exit).
#   prolog / epilog (SLURM_SCRIPT_CONTEXT says which):
#     FAIL     set the line as the drain reason, then exit 1: Slurm drains the node itself
#              and requeues the job (a prolog) or just drains (an epilog); a node already
#              drained keeps its reason, so gpuprobe's shows;
#     OK, UNKNOWN  exit 0: the job runs (gpuprobe could not judge, which is no reason to
#              stop someone's job).
#
# Why an UNKNOWN does not drain by default: it means gpuprobe could not judge the node,
# and its common causes (a wrong GPUPROBE_PYTHON, a framework upgraded under it, a budget too
# short for the tier) are the same on every node, so draining on it would take a whole
# partition out at once for one configuration mistake. A GPU that vanished also answers
# UNKNOWN ("nothing could be tested"): a site whose other checks do not notice that can set
# GPUPROBE_DRAIN_UNKNOWN_AFTER=3, which drains after three UNKNOWN answers in a row (and an
# OK later resumes the node, as for a FAIL).
#
# The reason is gpuprobe's line, which holds probe ids, finding ids, device names and counts
# only; this script also keeps only its first line, replaces anything outside printable ASCII
# and the characters a shell or a quoted reason would make something of, and cuts it to 200
# bytes, so nothing from the environment, a path or a probe's detail reaches Slurm. gpuprobe's
# stderr goes to the run directory, never into the reason.
#
# It never hangs: gpuprobe stops its probes after GPUPROBE_BUDGET seconds, and `timeout`
# ends it GPUPROBE_TIMEOUT seconds after it started whatever happens (slurmd kills a health
# check program's process group after 60 seconds, SIGKILL 10 ms after SIGTERM: too soon for
# gpuprobe to stop its workers, which run in process groups of their own). Checks do
# not overlap: a health check finding another check still running leaves at once; a prolog
# or epilog waits for it up to GPUPROBE_TIMEOUT seconds, then skips its check.
#
# Settings: the defaults below, overridden by the environment file
# ${GPUPROBE_SLURM_ENV:-<this script's directory>/gpuprobe-slurm.env}, a shell file sourced with
# GPUPROBE_SLURM_MODE set to health, prolog or epilog (so it can set a shorter budget for
# prologs with a `case`). slurmd runs a health check program with no environment but
# SLURMD_NODENAME: set SLURM_CONF there when slurm.conf is not where scontrol looks by default.
set -u
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
umask 022
# --only patterns are globs for gpuprobe, not for the shell.
set -f

GPUPROBE=/usr/local/bin/gpuprobe
GPUPROBE_TIER=quick
GPUPROBE_ONLY=                  # --only patterns, separated by spaces (empty: the whole tier)
GPUPROBE_DEVICE=all             # --device: all, 0,1 or cpu
GPUPROBE_PYTHON=                # --python (empty: gpuprobe's default lookup)
GPUPROBE_BUDGET=                # --budget seconds (empty: 35 for a health check, 20 otherwise)
GPUPROBE_TIMEOUT=               # seconds before gpuprobe is stopped (empty: budget + 15)
GPUPROBE_SIMULATE=              # --simulate, for trying the set-up out: reasons say SIMULATED
GPUPROBE_EXTRA_ARGS=            # more `check` options, separated by spaces
GPUPROBE_PROMETHEUS=            # --prometheus FILE (e.g. node_exporter's textfile directory)
GPUPROBE_JUNIT=                 # --junit FILE
GPUPROBE_STATE_DIR=/var/lib/gpuprobe/slurm  # run directories, the last answers, the lock
GPUPROBE_KEEP_RUNS=10           # run directories kept of passing runs, and of the others
GPUPROBE_DRAIN_UNKNOWN_AFTER=0  # drain after this many UNKNOWN answers in a row (0: never)
SCONTROL=scontrol
SINFO=sinfo

# --- which of the three this run is --------------------------------------------------------
mode=${1:-}
if [ -z "$mode" ]; then
    case ${SLURM_SCRIPT_CONTEXT:-} in
        prolog_slurmd) mode=prolog ;;
        epilog_slurmd) mode=epilog ;;
        *) if [ -n "${SLURM_JOB_ID:-}" ]; then mode=prolog; else mode=health; fi ;;
    esac
fi
case $mode in
    health | prolog | epilog) ;;
    *) echo "usage: $0 [health|prolog|epilog]" >&2; exit 2 ;;
esac
# shellcheck disable=SC2034 # read by the env file
GPUPROBE_SLURM_MODE=$mode

# The node as Slurm knows it: slurmd sets SLURMD_NODENAME for the health check program, the
# prolog and the epilog (NodeName= may differ from the host name); by hand, the host name.
node=${SLURMD_NODENAME:-$(hostname -s)}

log() {
    printf 'gpuprobe-slurm %s %s: %s\n' "$mode" "$node" "$*" >&2
    if command -v logger > /dev/null 2>&1; then
        logger -t gpuprobe-slurm -- "$mode $node: $*" 2> /dev/null || true
    fi
}

# The script itself cannot run a check (a setting that is no number, an unwritable state
# directory): like an UNKNOWN answer, no reason to drain. A prolog or epilog that exits
# non-zero drains the node, so those exit 0; a health check exits 1, which slurmd logs.
give_up() {
    log "no check: $*"
    if [ "$mode" = health ]; then exit 1; fi
    exit 0
}

is_count() {
    case $1 in '' | *[!0-9]*) return 1 ;; *) return 0 ;; esac
}

env_file=${GPUPROBE_SLURM_ENV:-$(dirname "$0")/gpuprobe-slurm.env}
if [ -f "$env_file" ]; then
    # A syntax error in a sourced file would end this shell with a non-zero status (which,
    # in a prolog, drains the node): checked first.
    sh -n "$env_file" 2> /dev/null || give_up "$env_file has a syntax error (sh -n $env_file)"
    # shellcheck disable=SC1090
    . "$env_file"
fi
[ -n "${SLURM_CONF:-}" ] && export SLURM_CONF

if [ -z "$GPUPROBE_BUDGET" ]; then
    if [ "$mode" = health ]; then GPUPROBE_BUDGET=35; else GPUPROBE_BUDGET=20; fi
fi
if ! is_count "$GPUPROBE_BUDGET" || [ "$GPUPROBE_BUDGET" -lt 1 ]; then
    give_up "GPUPROBE_BUDGET=$GPUPROBE_BUDGET is not a number of seconds"
fi
[ -n "$GPUPROBE_TIMEOUT" ] || GPUPROBE_TIMEOUT=$((GPUPROBE_BUDGET + 15))
if ! is_count "$GPUPROBE_TIMEOUT" || [ "$GPUPROBE_TIMEOUT" -lt 1 ]; then
    give_up "GPUPROBE_TIMEOUT=$GPUPROBE_TIMEOUT is not a number of seconds"
fi
is_count "$GPUPROBE_KEEP_RUNS" || GPUPROBE_KEEP_RUNS=10
is_count "$GPUPROBE_DRAIN_UNKNOWN_AFTER" || GPUPROBE_DRAIN_UNKNOWN_AFTER=0

state=$GPUPROBE_STATE_DIR
mkdir -p "$state/runs" || give_up "cannot create $state"

# --- one check at a time -------------------------------------------------------------------
if command -v flock > /dev/null 2>&1; then
    exec 9> "$state/lock"
    if [ "$mode" = health ]; then
        flock -n 9 || { log "another check is still running; this one is skipped"; exit 0; }
    else
        flock -w "$GPUPROBE_TIMEOUT" 9 || {
            log "another check was still running after ${GPUPROBE_TIMEOUT}s; this one is skipped"
            exit 0
        }
    fi
fi

# --- the node's state in Slurm -------------------------------------------------------------
# Its state flags (IDLE+DRAIN, ...) and its reason (`none` without one).
node_flags() {
    "$SCONTROL" -o show node "$node" 2> /dev/null | sed -n 's/.* State=\([^ ]*\).*/\1/p'
}
node_reason() {
    "$SINFO" -h -a -N -n "$node" -o '%E' 2> /dev/null | head -n 1
}
# A reason gpuprobe's line made: `FAIL: gpuprobe: ...`, `UNKNOWN: SIMULATED gpuprobe: ...`.
is_gpuprobe_reason() {
    case $1 in
        "FAIL: gpuprobe: "* | "FAIL: SIMULATED gpuprobe: "*) return 0 ;;
        "UNKNOWN: gpuprobe: "* | "UNKNOWN: SIMULATED gpuprobe: "*) return 0 ;;
        *) return 1 ;;
    esac
}
# Whether the node is drained (or draining) with a reason gpuprobe did not set.
drained_by_someone_else() {
    case $(node_flags) in
        *DRAIN*) ! is_gpuprobe_reason "$(node_reason)" ;;
        *) return 1 ;;
    esac
}
drained_by_gpuprobe() {
    case $(node_flags) in
        *DRAIN*) is_gpuprobe_reason "$(node_reason)" ;;
        *) return 1 ;;
    esac
}
drain() {
    if drained_by_someone_else; then
        log "already drained for another reason, kept: $(node_reason)"
        return 0
    fi
    "$SCONTROL" update nodename="$node" state=drain reason="$line" || {
        log "scontrol could not drain the node"; return 1; }
    log "drained: $line"
}

# --- the check -----------------------------------------------------------------------------
run_dir=$state/runs/$(date -u +%Y%m%dT%H%M%SZ)-$mode-$$
mkdir -p "$run_dir" || give_up "cannot create $run_dir"

set -- check --health --health-format slurm --tier "$GPUPROBE_TIER" --device "$GPUPROBE_DEVICE" \
    --budget "$GPUPROBE_BUDGET" --run-dir "$run_dir"
for pattern in $GPUPROBE_ONLY; do set -- "$@" --only "$pattern"; done
[ -n "$GPUPROBE_PYTHON" ] && set -- "$@" --python "$GPUPROBE_PYTHON"
[ -n "$GPUPROBE_SIMULATE" ] && set -- "$@" --simulate "$GPUPROBE_SIMULATE"
[ -n "$GPUPROBE_PROMETHEUS" ] && set -- "$@" --prometheus "$GPUPROBE_PROMETHEUS"
[ -n "$GPUPROBE_JUNIT" ] && set -- "$@" --junit "$GPUPROBE_JUNIT"
for extra in $GPUPROBE_EXTRA_ARGS; do set -- "$@" "$extra"; done

if [ -x "$GPUPROBE" ]; then
    # -k: a gpuprobe that ignores the TERM is killed 5 s later. 9>&-: the lock is this
    # script's, not something a stray worker could keep held.
    out=$(timeout -k 5 "$GPUPROBE_TIMEOUT" "$GPUPROBE" "$@" < /dev/null 2> "$run_dir/health-stderr.txt" 9>&-)
    rc=$?
else
    out=
    rc=127
fi

# Only the first line, printable ASCII of the safe set, at most 200 bytes.
line=$(printf '%s\n' "$out" | head -n 1 | tr -d '\000-\037\177-\377' |
    tr "\"'\\\\\$\`/~" '???????' | cut -b 1-200)
case $rc:$line in
    "0:OK: "*) answer=ok ;;
    "1:FAIL: "*) answer=fail ;;
    "2:UNKNOWN: "*) answer=unknown ;;
    124:* | 137:*) answer=unknown line="UNKNOWN: gpuprobe: no answer within ${GPUPROBE_TIMEOUT} s" ;;
    127:*) answer=unknown line="UNKNOWN: gpuprobe: not installed (GPUPROBE is no executable)" ;;
    *) answer=unknown line="UNKNOWN: gpuprobe: exit $rc without a health line" ;;
esac
echo "$answer" > "$run_dir/health-answer"
printf '%s %s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$mode" "$line" > "$state/last-$mode.tmp" &&
    mv -f "$state/last-$mode.tmp" "$state/last-$mode"

# Keep the newest GPUPROBE_KEEP_RUNS run directories of passing runs and as many of the
# others (the evidence of a drain outlives many passing runs after it).
prune() {
    for kind in ok other; do
        # shellcheck disable=SC2012 # the names are this script's, checked below
        for dir in $(ls -1 "$state/runs" | sort -r); do
            case $dir in *[!0-9A-Za-z-]*) continue ;; esac
            answer_of=$(cat "$state/runs/$dir/health-answer" 2> /dev/null || echo other)
            [ "$answer_of" = ok ] || answer_of=other
            [ "$answer_of" = "$kind" ] || continue
            if [ "${kept:-0}" -lt "$GPUPROBE_KEEP_RUNS" ]; then
                kept=$((${kept:-0} + 1))
            else
                rm -rf "${state:?}/runs/$dir"
            fi
        done
        kept=0
    done
}
prune

# --- what it means for the node ------------------------------------------------------------
status=0
if [ "$mode" = health ]; then
    unknowns=0
    if [ "$answer" = unknown ]; then
        unknowns=$(cat "$state/unknown-count" 2> /dev/null || echo 0)
        is_count "$unknowns" || unknowns=0
        unknowns=$((unknowns + 1))
    fi
    echo "$unknowns" > "$state/unknown-count"
    case $answer in
        ok)
            if drained_by_gpuprobe; then
                if "$SCONTROL" update nodename="$node" state=resume; then
                    log "resumed (gpuprobe had drained it): $line"
                else
                    log "scontrol could not resume the node"; status=1
                fi
            else
                log "$line"
            fi
            ;;
        fail) drain || status=1 ;;
        unknown)
            if [ "$GPUPROBE_DRAIN_UNKNOWN_AFTER" -gt 0 ] &&
                [ "$unknowns" -ge "$GPUPROBE_DRAIN_UNKNOWN_AFTER" ]; then
                drain || status=1
            else
                log "$line (not drained: $unknowns UNKNOWN in a row)"
            fi
            ;;
    esac
    exit "$status"
fi

# prolog or epilog
if [ "$answer" = fail ]; then
    drain || true
    exit 1
fi
log "$line"
exit 0
