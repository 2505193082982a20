#!/usr/bin/env bash
# Try it yourself: why a pod is created as Pending.
#
# The seed article's walk-through as a script that runs. It applies examples/pod.json and
# watches the pod go through the three stages of Pending before it runs:
#
#   1. Pending, no node      the API answered 201 at once; the scheduler has not placed it
#   2. Pending, with a node  the scheduler bound it; the node's agent has not started it
#   3. Running               the agent started the container and reported the pod's IP
#
# Then `sheepctl wait` does what the article's "sleep 5" only hopes for: it follows the
# watch stream until the pod is Running (or fails with the pod's state after the timeout),
# and `sheepctl events` tells the story: Created -> Scheduled -> Pulled -> Started -> Running.
#
# Before you run it, start Shepherd in another terminal: `./scripts/demo.sh` runs the server
# with a local node and the dashboard. (By hand: `shepherd` plus `shepherd-agent` in a
# terminal each.) With no agent the pod stays Pending and the wait below times out, telling you why:
# that is the article's last trap ("Pending isn't forever in the user's head, but it is in
# the system").
#
# Settings (environment):
#   SHEPHERD_API   the server, default 127.0.0.1:9876
#   SHEEPCTL       the sheepctl binary, default: `sheepctl` on PATH, else target/debug/sheepctl
#   WAIT_TIMEOUT   how long to wait for Running (and, with CLEANUP=1, for the pod to go), default 60s
#   CLEANUP=1      delete the pod at the end, showing it Terminating until its node confirms
#
# Run it from anywhere: ./examples/try-it-yourself.sh

set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"

if [[ -n "${SHEEPCTL:-}" ]]; then
    sheepctl="$SHEEPCTL"
elif command -v sheepctl >/dev/null 2>&1; then
    sheepctl="sheepctl"
elif [[ -x "$root/target/debug/sheepctl" ]]; then
    sheepctl="$root/target/debug/sheepctl"
else
    echo "error: sheepctl not found: build it with 'cargo build -p sheepctl' or set SHEEPCTL" >&2
    exit 1
fi

# Prints a command, then runs it, as if typed.
step() {
    echo
    echo "\$ sheepctl $*"
    "$sheepctl" "$@"
}

# One paragraph of commentary: each argument is one of its lines.
say() {
    echo
    printf '# %s\n' "$@"
}

# Fails fast, with sheepctl's own message, when the server is not running.
"$sheepctl" info >/dev/null

say "Is there a node to run on?"
step nodes

say "Create a pod and immediately check its state:"
step apply -f "$here/pod.json"
# The API answered 201 before anything else happened. The scheduler takes milliseconds, so
# by now the pod may already have a NODE; the REASON column says which stage of Pending it
# is in: "waiting for the scheduler", "scheduled to node-1, waiting for its agent", or
# "Unschedulable: ..." when no node fits.
step get pods -o wide

sleep 2
say "Two seconds later:"
step get pods -o wide            # Pending with a node while the agent pulls and starts the image

sleep 3
say "Three more seconds:"
step get pods -o wide            # Running, with the pod's IP, once the agent has started it

say "Instead of guessing with sleep, wait on the watch stream:"
step wait --for=Running pod/web-server --timeout="${WAIT_TIMEOUT:-60s}"

say "What happened, oldest first:"
step events --for pod/web-server

say "Why it runs where it runs:"
step describe pod web-server

if [[ "${CLEANUP:-0}" == "1" ]]; then
    say "Clean up. Deleting a running pod is graceful, as in Kubernetes: the server only marks it" \
        "Terminating; the node's agent stops the containers (SIGTERM, then SIGKILL once the grace" \
        "period, 30s by default, runs out) and confirms, and only then is the pod gone."
    step delete pod web-server --wait=false
    step get pods                    # Terminating (or already gone, if the containers stopped at once)
    # A shell as PID 1 ignores SIGTERM: this pod usually takes its whole grace period.
    # Plain `sheepctl delete pod web-server` waits like this by itself.
    step wait --for=delete pod/web-server --timeout="${WAIT_TIMEOUT:-60s}"
fi
