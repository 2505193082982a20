#!/usr/bin/env bash
# Runs every Shepherd test: unit, integration, real-Docker, real-kubectl and real-browser.
# First it sets the machine up (scripts/setup.sh): as root on Debian or Ubuntu it installs
# what is missing and starts dockerd; otherwise it prints the one command that would.
#   --no-install   install and start nothing: if something is missing, say what, and stop
set -euo pipefail
cd "$(dirname "$0")/.."

no_install=0
for arg in "$@"; do
    case "$arg" in
        --no-install) no_install=1 ;;
        -h | --help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "test.sh: unknown argument $arg (try --help)" >&2; exit 2 ;;
    esac
done

. scripts/setup.sh
setup_machine "$no_install" docker.io busybox-static chromium chromium-driver containernetworking-plugins docker-registry kubernetes-client python3-venv jq protobuf-compiler etcd-server

# A clean build gains nothing from incremental state, which would double the target's size.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

echo "== shared builds for wasm32"
cargo build --quiet -p shared --target wasm32-unknown-unknown

echo "== the dashboard, for the real-browser test"
cargo xtask frontend

echo "== every test"
cargo test --workspace

echo "== the server's tests again, on the etcd store"
etcd_dir=$(mktemp -d)
read -r client_port peer_port < <(python3 -c '
import socket
ports = []
for _ in range(2):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ports.append(s.getsockname()[1]); s.close()
print(*ports)')
etcd_url="http://127.0.0.1:$client_port"
peer_url="http://127.0.0.1:$peer_port"
etcd --name test --data-dir "$etcd_dir/data" --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
    --listen-peer-urls "$peer_url" --initial-advertise-peer-urls "$peer_url" --initial-cluster "test=$peer_url" \
    >"$etcd_dir/log" 2>&1 &
etcd_pid=$!
# Ends etcd with the script, keeping the script's own exit status (etcd's 143 is not ours).
stop_etcd() {
    local status=$?
    kill "$etcd_pid" 2>/dev/null || true
    wait "$etcd_pid" 2>/dev/null || true
    rm -rf "$etcd_dir"
    exit "$status"
}
trap stop_etcd EXIT
etcd_healthy() {
    python3 -c 'import sys, urllib.request; sys.exit(b"\"health\":\"true\"" not in urllib.request.urlopen(sys.argv[1] + "/health", timeout=2).read())' "$etcd_url" 2>/dev/null
}
for _ in $(seq 100); do
    etcd_healthy && break
    sleep 0.2
done
etcd_healthy || { tail -20 "$etcd_dir/log" >&2; echo "test.sh: etcd did not start" >&2; exit 1; }
SHEPHERD_TEST_ETCD="$etcd_url" cargo test -p server --tests

./scripts/fuzz-api.sh
