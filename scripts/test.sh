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
setup_machine "$no_install" docker.io busybox-static chromium chromium-driver containernetworking-plugins docker-registry kubernetes-client python3-venv jq

# A clean build gains nothing from incremental state, which would double the target's size.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

echo "== shared builds for wasm32"
cargo build --quiet -p shared --target wasm32-unknown-unknown

echo "== the dashboard, for the real-browser test"
cargo xtask frontend

echo "== every test"
cargo test --workspace
./scripts/fuzz-api.sh
