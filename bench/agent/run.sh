#!/usr/bin/env bash
# Agent benchmarks on the real Docker engine (see BENCHMARKS.md, "Agent / real Docker"):
# create→Running latency over single-container pods, a deployment's replicas all Running
# with no warm pool and with a warm pool of sandboxes filled before the clock starts, next
# to `docker service create --replicas` (Swarm, left afterwards) and the floor of
# `docker run -d`. Needs dockerd running and /bin/busybox (busybox-static) for the image.
#
#   bench/agent/run.sh [--pods 100] [--replicas 50] [--skip-swarm]
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! docker info >/dev/null 2>&1; then
    echo "Docker is not reachable: install docker.io and start dockerd" >&2
    exit 1
fi
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), docker $(docker version --format '{{.Server.Version}}')"
RUST_LOG="${RUST_LOG:-warn}" cargo bench -p agent --bench docker_pods -- "$@"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
