#!/usr/bin/env bash
# Runs every Shepherd test: unit, integration, real-Docker and real-browser.
# Needs a reachable Docker engine, Debian's chromium and chromium-driver, busybox-static and
# the wasm32-unknown-unknown target; .ci/run installs them on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
docker info >/dev/null 2>&1 || missing+=("a running Docker engine (apt-get install docker.io, then start dockerd)")
[ -x /bin/busybox ] || missing+=("busybox-static (apt-get install busybox-static)")
command -v chromium >/dev/null || missing+=("chromium (apt-get install chromium)")
command -v chromedriver >/dev/null || missing+=("chromedriver (apt-get install chromium-driver)")
rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown || missing+=("the wasm32 target (rustup target add wasm32-unknown-unknown)")
if [ ${#missing[@]} -gt 0 ]; then
    printf 'test.sh: cannot run every test; missing:\n' >&2
    printf '  - %s\n' "${missing[@]}" >&2
    exit 1
fi

echo "== shared builds for wasm32"
cargo build --quiet -p shared --target wasm32-unknown-unknown

echo "== the dashboard, for the real-browser test"
cargo xtask frontend

echo "== every test"
cargo test --workspace
./scripts/fuzz-api.sh
