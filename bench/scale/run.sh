#!/usr/bin/env bash
# The scale benchmark (see BENCHMARKS.md, "Scale"): the release `shepherd` server in memory (or --store)
# and one `shepherd-agent --simulate-nodes N` process on 127.0.0.1, a deployment of P
# replicas created and deleted. No Docker needed.
#
#   bench/scale/run.sh --nodes 1000 --replicas 10000 [--per-deployment 10000] [--rounds 3] [--timeout 600] [--settle 80] [--idle-window 20]
#                        [--server-arg --event-limit=100 ...] [--store memory|sqlite|etcd] [--server-bin PATH]
#   bench/scale/run.sh --store sqlite --nodes 5000 --replicas 0 --idle-window 60 --rounds 3   # the idle server alone
#   bench/scale/run.sh --store sqlite --nodes 1000 --replicas 10000 --rollout   # and a rolling update of the deployment (issue 34)
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -p server --bin shepherd
echo "machine: $(nproc) CPUs, $(free -g | awk '/Mem:/ {print $2}') GiB, load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD)"
cargo bench -p agent --bench scale -- "$@"
