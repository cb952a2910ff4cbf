# Sourced by the benchmark scripts: `install_missing COMMAND` installs the Debian package of
# the same name when COMMAND is not on the PATH (as root, or through sudo).
install_missing() {
    command -v "$1" >/dev/null && return
    echo "bench: installing $1" >&2
    local sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get install -y "$1" || { "${sudo[@]}" apt-get update && "${sudo[@]}" apt-get install -y "$1"; }
}
