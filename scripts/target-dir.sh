# Sourced by the scripts that run what cargo built: prints the directory cargo builds into,
# $CARGO_TARGET_DIR when it is set (relative to the workspace, as cargo reads it), made
# absolute so that it can go on PATH.
target_dir() {
    local dir="${CARGO_TARGET_DIR:-target}"
    mkdir -p "$dir" && (cd "$dir" && pwd)
}
