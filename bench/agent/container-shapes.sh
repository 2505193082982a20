#!/usr/bin/env bash
# What a cold pod costs the engine, by shape (BENCHMARKS.md, "With CNI pod networking"):
# 50 "pods", 8 at a time, created through the Docker API and started with `docker start`:
#   sandbox: a NetworkDisabled sandbox plus a container that joins its namespace;
#   disabled: one container created with NetworkDisabled;
#   bridge: one container on Docker's default bridge.
# Needs dockerd and the `minimal` image (shepherd-agent bootstrap-image). Containers are
# labelled and removed after each shape; nothing is sent to them.
set -euo pipefail
if ! docker info >/dev/null 2>&1; then
    echo "Docker is not reachable: install docker.io and start dockerd" >&2
    exit 1
fi
export LABEL_KEY=shepherd.bench-shapes LABEL_VALUE=$$
create() {
    curl -sf --unix-socket /var/run/docker.sock -H 'Content-Type: application/json' -X POST http://docker/containers/create \
        -d "{\"Image\":\"minimal\",\"Cmd\":[\"sleep\",\"3600\"],\"Labels\":{\"$LABEL_KEY\":\"$LABEL_VALUE\"}$1}" |
        sed 's/.*"Id":"\([0-9a-f]*\)".*/\1/'
}
sandbox() {
    local id
    id=$(create ',"NetworkDisabled":true')
    docker start "$id" >/dev/null
    docker start "$(create ",\"HostConfig\":{\"NetworkMode\":\"container:$id\"}")" >/dev/null
}
disabled() { docker start "$(create ',"NetworkDisabled":true')" >/dev/null; }
bridge() { docker start "$(create '')" >/dev/null; }
export -f create sandbox disabled bridge
for shape in sandbox disabled bridge; do
    began=$(date +%s.%N)
    seq 50 | xargs -P 8 -I{} bash -c "$shape"
    ended=$(date +%s.%N)
    echo "$shape: $(echo "$ended - $began" | bc) s (load $(cut -d' ' -f1 /proc/loadavg))"
    docker rm -f $(docker ps -aq --filter "label=$LABEL_KEY=$LABEL_VALUE") >/dev/null
done
