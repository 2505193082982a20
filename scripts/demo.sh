#!/usr/bin/env bash
# Builds Shepherd, the dashboard included, and runs it: the API server, a local node and the
# dashboard on http://127.0.0.1:9876. The local node runs real Docker containers when an
# engine answers (the `minimal` image is made from the host's busybox), else simulated pods.
# Data persists in ~/.local/share/shepherd (or $XDG_DATA_HOME/shepherd); pass --in-memory
# or --data-dir DIR to change that. Other flags go to `shepherd` (see `shepherd --help`).
# First it sets the machine up (scripts/setup.sh): as root on Debian or Ubuntu it installs
# what is missing and starts dockerd; otherwise it prints the one command that would.
#   --no-install   install and start nothing: if something is missing, say what, and stop
set -euo pipefail
cd "$(dirname "$0")/.."

no_install=0
server_args=()
for arg in "$@"; do
    case "$arg" in
        --no-install) no_install=1 ;;
        -h | --help)
            sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
            echo "Any other flag goes to shepherd (shepherd --help once built)."
            exit 0 ;;
        *) server_args+=("$arg") ;;
    esac
done
set -- ${server_args[@]+"${server_args[@]}"}
. scripts/setup.sh
. scripts/target-dir.sh
setup_machine "$no_install" docker.io busybox-static containernetworking-plugins protobuf-compiler
cargo xtask frontend --release
cargo build --release -p server -p agent -p sheepctl
bin="$(target_dir)/release"

cat <<EOT

Shepherd is starting. Open http://127.0.0.1:9876 for the dashboard, and in another terminal try:

    export PATH="$bin:\$PATH"
    sheepctl apply -f examples/pod.json && sheepctl get pods -w

Stop it with Ctrl-C; pods keep running and are adopted on the next start.

EOT
exec "$bin/shepherd" --local-node --dashboard-dir dist "$@"
