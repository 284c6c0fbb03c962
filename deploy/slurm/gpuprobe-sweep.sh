#!/bin/sh
# Sweeps a Slurm partition with gpuprobe (docs/fleet.md, "Slurm"): one gpuprobe-sweep.sbatch
# job per node of the partition, each pinned to its node with --nodelist, each writing to
# SWEEP_DIR/<node>/ (a directory every node shares).
#
#   gpuprobe-sweep.sh PARTITION SWEEP_DIR [sbatch options...]
#
# Why one job per node: a job array's tasks go wherever the scheduler finds room, so two can
# land on one node and another node gets none (and a --nodelist given to an array applies to
# every task); one job of N nodes with a task per node waits until every node is free at once,
# and a single node that cannot run jobs keeps it pending for ever. A job pinned to each node
# runs on that node as soon as it is free, and each node's answer stands on its own.
#
# Only nodes that can run a job now (idle, mixed, allocated; not drained, down or failing) are
# swept: a job pinned to a drained node would wait until someone resumes it. The others are
# listed on stderr. The settings of gpuprobe-sweep.sbatch (GPUPROBE, GPUPROBE_TIER,
# GPUPROBE_ONLY, GPUPROBE_DEVICE, GPUPROBE_PYTHON, GPUPROBE_EXTRA_ARGS) pass through the
# environment. Extra sbatch options (an account, --gres=gpu:8 where a site needs GRES named,
# --time) follow SWEEP_DIR. The job ids are printed, one per line, after the node name.
set -eu
if [ $# -lt 2 ]; then
    echo "usage: $0 PARTITION SWEEP_DIR [sbatch options...]" >&2
    exit 2
fi
partition=$1
sweep_dir=$2
shift 2
batch=${GPUPROBE_SWEEP_SBATCH:-$(dirname "$0")/gpuprobe-sweep.sbatch}
case $sweep_dir in
    /*) ;;
    *) sweep_dir=$(pwd)/$sweep_dir ;;
esac
mkdir -p "$sweep_dir"

# `sinfo -t idle` lists drained idle nodes too: the compact state (%t) tells them apart
# (idle, mix, alloc, comp, with `~` `#` `%` for power saving; `drain`, `drng`, `down`, `fail`,
# `*` for not responding...).
nodes=$(sinfo -h -N -p "$partition" -o '%N %t' | sort -u)
if [ -z "$nodes" ]; then
    echo "gpuprobe-sweep: no nodes in partition $partition" >&2
    exit 2
fi
usable=
for node in $(printf '%s\n' "$nodes" | cut -d' ' -f1 | sort -u); do
    states=$(printf '%s\n' "$nodes" | awk -v n="$node" '$1 == n { print $2 }')
    case $states in
        idle | idle[~#%] | mix | mix[~#%] | alloc | alloc[~#%] | comp | comp[~#%])
            usable="$usable $node" ;;
        *) echo "gpuprobe-sweep: $node skipped (it cannot run a job now: $(sinfo -h -N -n "$node" -o '%T %E' | head -n 1))" >&2 ;;
    esac
done

if [ -z "$usable" ]; then
    echo "gpuprobe-sweep: no node of partition $partition can run a job now" >&2
    exit 1
fi

export GPUPROBE_SWEEP_DIR="$sweep_dir"
for node in $usable; do
    # Slurm does not create the directory of a job's output file: it must exist first.
    mkdir -p "$sweep_dir/$node"
    job=$(sbatch --parsable --partition="$partition" --nodelist="$node" \
        --output="$sweep_dir/$node/slurm-%j.out" "$@" "$batch")
    echo "$node ${job%%;*}"
done
