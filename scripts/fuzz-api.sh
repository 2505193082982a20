#!/usr/bin/env bash
# Fuzzes the API from its own OpenAPI document: schemathesis (pinned, in a venv under target/)
# against a fresh `shepherd --in-memory` on a free 127.0.0.1 port, with a bounded number of
# examples per operation. Fails on any 5xx, any answer whose status, content type or body its
# schema does not allow, and a server that panics or dies.
#
# Checks left out, because they raise false alarms on this API:
#   - positive_data_acceptance: the schemas say what a body looks like, not every rule
#     validation enforces (DNS-1123 names, a selector that matches its template, an existing
#     namespace or node), so a well-formed body is often, rightly, a 404, 409 or 422.
#   - negative_data_rejection: the server reads leniently where the schema is strict (a path
#     name outside DNS-1123 is a 404, not a 400; an unknown field with an empty value is
#     let through), so a body or parameter the schema refuses may rightly succeed.
#   - ignored_auth, missing_required_header, unsupported_method, use_after_free,
#     ensure_resource_availability, object_level_authorization: the server under test has
#     no tokens, creates and deletes as the fuzzer pleases, and answers 405 for methods no
#     route has; tests/auth.rs and server/tests cover those behaviours instead.
# Requests with watch=true or follow=true are sent with false (scripts/fuzz_hooks.py): they
# stream until the client hangs up. schemathesis also warns, without failing, that most
# generated names are 404s and most generated bodies 422s: random names rarely exist and
# random bodies rarely pass validation, for the reasons above.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/target-dir.sh

SCHEMATHESIS_VERSION=4.32.5
VENV="$(target_dir)/fuzz-venv"
EXAMPLES=${FUZZ_EXAMPLES:-50}
OUT="$(target_dir)/fuzz-api"
mkdir -p "$OUT"

if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && apt-get install -y -qq python3-venv
    else
        echo "fuzz-api.sh: python3 has no venv; install it (apt-get install python3-venv) and run again" >&2
        exit 1
    fi
fi
if [ "$("$VENV/bin/st" --version 2>/dev/null)" != "st, version $SCHEMATHESIS_VERSION" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "schemathesis==$SCHEMATHESIS_VERSION"
fi

cargo build --quiet -p server --bin shepherd
# Emptied here, not only by the server's redirect, which the background shell may make after
# the loop below has read an earlier run's address.
: >"$OUT/shepherd.log"
"$(target_dir)/debug/shepherd" --in-memory --addr 127.0.0.1:0 >"$OUT/shepherd.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT

url=""
for _ in $(seq 1 100); do
    url=$(grep -o 'shepherd API listening on http://127\.0\.0\.1:[0-9]*' "$OUT/shepherd.log" | grep -o 'http://.*' || true)
    [ -n "$url" ] && break
    kill -0 "$server" 2>/dev/null || { cat "$OUT/shepherd.log" >&2; echo "fuzz-api.sh: the server did not start" >&2; exit 1; }
    sleep 0.1
done
[ -n "$url" ] || { echo "fuzz-api.sh: the server never said where it listens" >&2; exit 1; }
echo "== fuzzing the API at $url ($EXAMPLES examples per operation)"

started=$SECONDS
SCHEMATHESIS_HOOKS=fuzz_hooks PYTHONPATH=scripts "$VENV/bin/st" run "$url/api/openapi.json" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
    --max-examples "$EXAMPLES" \
    --header "X-Shepherd-Client: schemathesis" \
    --request-timeout 10 \
    --workers 2 \
    --seed "${FUZZ_SEED:-14}" \
    --no-color
echo "== the fuzzer ran for $((SECONDS - started)) s"

if ! kill -0 "$server" 2>/dev/null; then
    cat "$OUT/shepherd.log" >&2
    echo "fuzz-api.sh: the server died during the run" >&2
    exit 1
fi
if grep -n 'panicked' "$OUT/shepherd.log" >&2; then
    echo "fuzz-api.sh: the server panicked during the run (see $OUT/shepherd.log)" >&2
    exit 1
fi
