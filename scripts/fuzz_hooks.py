"""Schemathesis hooks for scripts/fuzz-api.sh."""

import schemathesis

# These stream until the client hangs up (a watch, a followed log): a fuzzer that waits for
# the end of the answer would time out on every one of them.
STREAMING = ("watch", "follow")


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    if case.query:
        for name in STREAMING:
            if str(case.query.get(name)).lower() == "true":
                case.query[name] = "false"
