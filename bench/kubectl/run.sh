#!/usr/bin/env bash
# kubectl's exec and port-forward through Shepherd (BENCHMARKS.md, "kubectl exec and
# port-forward"): the `shepherd` server (SQLite, its default) and a `shepherd-agent` on the
# real Docker engine, both on 127.0.0.1, and one busybox pod serving a file with httpd on
# port 80, published on the host's 127.0.0.1. Then, in the same run:
# - `kubectl exec POD -- true`, `sheepctl exec POD -- true` and, as the floor of any kubectl
#   command, `kubectl get pod POD`, each taking turns with `docker exec CONTAINER true` on
#   the pod's own container, R runs of each;
# - a download of the file with curl through `kubectl port-forward` and `sheepctl
#   port-forward`, taking turns with the same download from the pod's host port.
# --https serves HTTPS with tokens (kubectl sends a token only over HTTPS); without it the
# server runs as the README's tour runs it, plain HTTP with no token.
#
#   bench/kubectl/run.sh [--runs 50] [--megabytes 100] [--downloads 5] [--https] [--bin-dir DIR]
#
# --bin-dir takes shepherd, shepherd-agent and sheepctl from DIR; without it they are built
# in release. Needs dockerd, /bin/busybox, the CNI plugins, kubectl and curl.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=50 megabytes=100 downloads=5 https=0 bin_dir=
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs=$2; shift 2 ;;
        --megabytes) megabytes=$2; shift 2 ;;
        --downloads) downloads=$2; shift 2 ;;
        --https) https=1; shift ;;
        --bin-dir) bin_dir=$2; shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ -z "$bin_dir" ]; then
    cargo build --release -p server --bin shepherd -p agent --bin shepherd-agent -p sheepctl --bin sheepctl
    bin_dir="${CARGO_TARGET_DIR:-target}/release"
fi
docker info >/dev/null 2>&1 || { echo "Docker is not reachable: start dockerd" >&2; exit 1; }

work=$(mktemp -d)
node="bench-kubectl-$$"
pids=()
finish() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    local leftover
    leftover=$(docker ps -aq --filter "label=shepherd.node=$node")
    [ -z "$leftover" ] || docker rm -f $leftover >/dev/null
    rm -rf "$work"
}
trap finish EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

port=$(free_port)
server_args=(--addr "127.0.0.1:$port" --data-dir "$work/server")
agent_args=(--node-name "$node" --listen 127.0.0.1:0 --state-dir "$work/agent" --warm-sandboxes 0 --remove-containers-on-exit)
if [ "$https" = 1 ]; then
    printf 'bench-admin-token admin\nbench-node-token node %s\n' "$node" > "$work/tokens"
    server_args+=(--tls-self-signed --tokens-file "$work/tokens")
    agent_args+=(--token bench-node-token)
fi
unset SHEPHERD_API SHEPHERD_CA SHEPHERD_TOKEN
RUST_LOG=warn "$bin_dir/shepherd" "${server_args[@]}" >"$work/server.log" 2>&1 &
pids+=($!)
if [ "$https" = 1 ]; then
    export SHEPHERD_API="https://127.0.0.1:$port" SHEPHERD_CA="$work/server/tls/ca.crt" SHEPHERD_TOKEN=bench-admin-token
else
    export SHEPHERD_API="http://127.0.0.1:$port"
fi
sheepctl="$bin_dir/sheepctl"
until "$sheepctl" info >/dev/null 2>&1; do sleep 0.2; done
RUST_LOG=warn "$bin_dir/shepherd-agent" --server "$SHEPHERD_API" "${agent_args[@]}" >"$work/agent.log" 2>&1 &
pids+=($!)
export KUBECONFIG="$work/kubeconfig"
"$sheepctl" kubeconfig --save "$KUBECONFIG" >/dev/null

host_port=$(free_port)
cat > "$work/pod.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: big
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: web
    image: minimal
    command: [sh, -c, "mkdir -p /www && head -c $((megabytes * 1024 * 1024)) /dev/zero > /www/big && exec httpd -f -p 80 -h /www"]
    ports:
    - containerPort: 80
      hostPort: $host_port
      hostIP: 127.0.0.1
    readinessProbe:
      tcpSocket:
        port: 80
      periodSeconds: 1
EOF
kubectl apply -f "$work/pod.yaml" >/dev/null
kubectl wait --for=condition=Ready pod/big --timeout=120s >/dev/null
container=$(docker ps -q --filter "label=shepherd.node=$node" --filter label=shepherd.pod=big --filter label=shepherd.container=web)
[ -n "$container" ] || { echo "the pod's container is not running" >&2; exit 1; }

scheme=$([ "$https" = 1 ] && echo "HTTPS with tokens" || echo "plain HTTP, no token")
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD), binaries $bin_dir, $scheme, docker $(docker version --format '{{.Server.Version}}')"
python3 - "$runs" "$megabytes" "$downloads" "$host_port" "$container" "$sheepctl" <<'PY'
import re, statistics, subprocess, sys, time

runs, megabytes, downloads, host_port, container, sheepctl = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]

def timed(command):
    began = time.monotonic()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return (time.monotonic() - began) * 1000

def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]

# Exec: each way takes turns with docker exec, so both see the same load.
# `kubectl get` is the floor of any kubectl command here: its start, the kubeconfig, one request.
tools = {"kubectl exec big -- true": ["kubectl", "exec", "big", "--", "true"],
         "kubectl get pod big (for comparison: no exec)": ["kubectl", "get", "pod", "big"]}
if subprocess.run([sheepctl, "exec", "--help"], capture_output=True).returncode == 0:  # sheepctl gained exec after this bench
    tools["sheepctl exec big -- true"] = [sheepctl, "exec", "big", "--", "true"]
docker = ["docker", "exec", container, "true"]
times = {name: [] for name in [*tools, "docker exec CONTAINER true"]}
for command in [*tools.values(), docker]:
    timed(command)  # warm-up, not counted
for _ in range(runs):
    for name, command in tools.items():
        times[name].append(timed(command))
        times["docker exec CONTAINER true"].append(timed(docker))
docker_p50, docker_p99 = percentile(times["docker exec CONTAINER true"], 50), percentile(times["docker exec CONTAINER true"], 99)
print(f"\n| {runs} runs each (docker exec: {len(times['docker exec CONTAINER true'])}, one after each of the others) | p50 ms | p99 ms | p50 / docker's | p99 / docker's |")
print("|---|---|---|---|---|")
for name, values in times.items():
    p50, p99 = percentile(values, 50), percentile(values, 99)
    print(f"| `{name}` | {p50:.0f} | {p99:.0f} | {p50 / docker_p50:.2f}× | {p99 / docker_p99:.2f}× |")

# Port-forward: each forward runs for the whole part; the downloads take turns.
def forward(command):
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in process.stdout:
        found = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) ", line)
        if found:
            return process, found.group(1)
    raise SystemExit(f"{command} printed no Forwarding line")

def download(port):
    out = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{size_download} %{time_total}", f"http://127.0.0.1:{port}/big"],
                         check=True, capture_output=True, text=True).stdout.split()
    size, seconds = int(out[0]), float(out[1])
    assert size == megabytes * 1024 * 1024, f"{size} bytes came"
    return size / 1e6 / seconds

kubectl, kubectl_port = forward(["kubectl", "port-forward", "pod/big", ":80"])
sheep, sheep_port = forward([sheepctl, "port-forward", "pod/big", ":80"])
ways = {"straight from the pod's host port on 127.0.0.1": host_port,
        "`kubectl port-forward pod/big :80`": kubectl_port,
        "`sheepctl port-forward pod/big :80`": sheep_port}
rates = {name: [] for name in ways}
for port in ways.values():
    download(port)  # warm-up, not counted
for _ in range(downloads):
    for name, port in ways.items():
        rates[name].append(download(port))
print(f"\n| {megabytes} MiB download with curl, {downloads} runs each, taking turns | median MB/s | best MB/s | median / direct |")
print("|---|---|---|---|")
direct = statistics.median(rates[next(iter(ways))])
for name, values in rates.items():
    print(f"| {name} | {statistics.median(values):.0f} | {max(values):.0f} | {statistics.median(values) / direct:.2f} |")
for process in (kubectl, sheep):
    process.terminate()
    process.wait()
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
