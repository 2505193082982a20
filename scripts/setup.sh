# Sourced by test.sh and demo.sh: installs what the machine lacks, then starts dockerd when
# no Docker engine answers. As root on Debian or Ubuntu it installs with apt-get; otherwise,
# or with --no-install, it prints the one command that would, and fails.
#
#   setup_machine <no-install: 0|1> <package>...
#
# Packages are Debian's names; each is checked by what it provides, not by dpkg, so a tool
# installed another way (kubectl from Google's repository, Docker from docker.com) counts.

# Whether what `package` provides is already here.
setup_has() {
    case "$1" in
        # A docker client alone is not enough: the tests need an engine, here or answering.
        docker.io) command -v dockerd >/dev/null || docker info >/dev/null 2>&1 ;;
        busybox-static) [ -x /bin/busybox ] ;;
        chromium) command -v chromium >/dev/null ;;
        chromium-driver) command -v chromedriver >/dev/null ;;
        containernetworking-plugins) [ -x /usr/lib/cni/bridge ] ;;
        # Distribution's registry, which `shepherd registry` runs; Debian does not start it.
        docker-registry) command -v docker-registry >/dev/null ;;
        # Debian's kubectl (1.20, in bookworm) when no newer one is installed.
        kubernetes-client) command -v kubectl >/dev/null ;;
        python3-venv) python3 -c 'import ensurepip, venv' 2>/dev/null ;;
        # The server's build compiles etcd's protocol with protoc.
        protobuf-compiler) command -v protoc >/dev/null ;;
        etcd-server) command -v etcd >/dev/null ;;
        *) dpkg -s "$1" >/dev/null 2>&1 ;;
    esac
}

setup_is_debian() {
    [ -r /etc/os-release ] && grep -Eq '^(ID|ID_LIKE)=.*(debian|ubuntu)' /etc/os-release && command -v apt-get >/dev/null
}

setup_machine() {
    local no_install=$1
    shift
    local packages=() wasm=0
    for package in "$@"; do
        setup_has "$package" || packages+=("$package")
    done
    rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown || wasm=1

    if [ ${#packages[@]} -gt 0 ] || [ $wasm = 1 ]; then
        if [ "$no_install" = 1 ] || [ "$(id -u)" != 0 ] || ! setup_is_debian; then
            local lacking=("${packages[@]}") steps=()
            [ ${#packages[@]} -gt 0 ] && steps+=("sudo apt-get install -y ${packages[*]}")
            if [ $wasm = 1 ]; then
                lacking+=("the wasm32-unknown-unknown target")
                steps+=("rustup target add wasm32-unknown-unknown")
            fi
            local joined
            joined=$(printf ' && %s' "${steps[@]}")
            echo "setup: this machine lacks: ${lacking[*]}" >&2
            echo "setup: install them with this one command, then run again:" >&2
            echo "    ${joined# && }" >&2
            return 1
        fi
        if [ ${#packages[@]} -gt 0 ]; then
            echo "setup: installing ${packages[*]}"
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -qq
            apt-get install -y -qq "${packages[@]}" >/dev/null
        fi
        if [ $wasm = 1 ]; then
            echo "setup: adding the wasm32 target"
            rustup target add wasm32-unknown-unknown
        fi
    fi
    setup_docker "$no_install"
}

# Starts dockerd when it is installed and no engine answers (a fresh machine, a container).
setup_docker() {
    docker info >/dev/null 2>&1 && return 0
    command -v dockerd >/dev/null || return 0
    if [ "$1" = 1 ] || [ "$(id -u)" != 0 ]; then
        echo "setup: no Docker engine answers; start one with: sudo systemctl start docker (or: sudo dockerd &)" >&2
        return 1
    fi
    echo "setup: starting dockerd (log: /tmp/shepherd-dockerd.log)"
    # In a session of its own, so that Ctrl-C on the demo leaves the engine and its pods running.
    setsid nohup dockerd >/tmp/shepherd-dockerd.log 2>&1 </dev/null &
    for _ in $(seq 60); do
        docker info >/dev/null 2>&1 && return 0
        sleep 1
    done
    tail -20 /tmp/shepherd-dockerd.log >&2
    echo "setup: dockerd did not start within 60 s" >&2
    return 1
}
