# Sourced by the benchmark scripts: `install_missing COMMAND` installs the Debian package of
# the same name when COMMAND is not on the PATH (as root, or through sudo).
install_missing() {
    command -v "$1" >/dev/null && return
    echo "bench: installing $1" >&2
    local sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get install -y "$1" || { "${sudo[@]}" apt-get update && "${sudo[@]}" apt-get install -y "$1"; }
}

# `install_crate COMMAND CRATE VERSION` builds CRATE at exactly VERSION from crates.io (its own
# Cargo.lock) into target/bench-tools/bin, once, and prints the binary's path: load generators
# whose version the figures depend on, kept out of the system and of the workspace's build.
install_crate() {
    local root
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target/bench-tools"
    if ! { [ -x "$root/bin/$1" ] && grep -qF "\"$2 $3 " "$root/.crates.toml" 2>/dev/null; }; then
        echo "bench: building $2 $3 into $root (a few minutes, once)" >&2
        CARGO_TARGET_DIR="$root/build" ${CARGO:-cargo} install "$2" --version "=$3" --locked --force \
            --root "$root" >&2 || return 1
    fi
    echo "$root/bin/$1"
}
