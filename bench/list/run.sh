#!/usr/bin/env bash
# sheepctl's paged list (BENCHMARKS.md, "sheepctl get at scale"): a server on the default
# store (SQLite in a fresh data directory; --store memory for the in-memory one) with
# P Pending pods (a deployment of P replicas, no node), then `sheepctl get pods` in pages of
# 500 (the default) and as one list (--chunk-size=0), each timed to its first row and to its end.
#
#   bench/list/run.sh [--pods 20000] [--rounds 3] [--store sqlite|memory] [--profile release|dev] [--bin-dir DIR]
#
# --bin-dir takes shepherd and sheepctl from DIR instead of building them.
set -euo pipefail
cd "$(dirname "$0")/../.."
pods=20000 rounds=3 store=sqlite profile=release bin_dir=
while [ $# -gt 0 ]; do
  case "$1" in
    --pods) pods=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --store) store=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$bin_dir" ]; then
  cargo build --profile "$profile" -p server --bin shepherd -p sheepctl --bin sheepctl
  bin_dir="${CARGO_TARGET_DIR:-target}/$([ "$profile" = dev ] && echo debug || echo release)"
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
data_dir=$(mktemp -d)
"$bin_dir/shepherd" --store "$store" --data-dir "$data_dir" --addr "127.0.0.1:$port" --disable-scheduler >/dev/null 2>&1 &
server=$!
trap 'kill $server; wait $server 2>/dev/null; rm -rf "$data_dir"' EXIT
export SHEPHERD_API="http://127.0.0.1:$port"
sheepctl="$bin_dir/sheepctl"
until "$sheepctl" info >/dev/null 2>&1; do sleep 0.2; done
sed "s/\"replicas\": 3/\"replicas\": $pods/" examples/deployment.json > "${TMPDIR:-/tmp}/bench-list-deployment.json"
"$sheepctl" apply -f "${TMPDIR:-/tmp}/bench-list-deployment.json" >/dev/null
until [ "$(curl -s "$SHEPHERD_API/api/v1/pods?limit=1" | python3 -c 'import json,sys; l=json.load(sys.stdin); print(len(l["items"]) + (l.get("remaining_item_count") or 0))')" -ge "$pods" ]; do sleep 1; done
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD), $pods pods, store $store, binaries $bin_dir"
for round in $(seq "$rounds"); do
  for chunk in 500 0; do
    python3 - "$sheepctl" "$chunk" <<'PY'
import subprocess, sys, time
start = time.monotonic()
p = subprocess.Popen([sys.argv[1], "get", "pods", f"--chunk-size={sys.argv[2]}"], stdout=subprocess.PIPE)
first, rows = None, 0
for line in p.stdout:
    rows += 1
    if rows == 2 and first is None:
        first = time.monotonic() - start
p.wait()
print(f"--chunk-size={sys.argv[2]:>3}: first row {first:.2f} s, all {rows - 1} rows {time.monotonic() - start:.2f} s")
PY
  done
done
