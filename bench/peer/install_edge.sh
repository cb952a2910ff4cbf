#!/usr/bin/env bash
# Builds the peer of `make bench-peer`: Unleash Edge (MIT), pinned version, from crates.io, once,
# into target/peer (binary target/peer/bin/unleash-edge, build tree target/peer/build).
# --no-default-features drops the optional S3 persistence (AWS SDK); nothing else changes for
# the offline mode the benchmark uses. --locked builds Edge's own Cargo.lock.
#
#   bash bench/peer/install_edge.sh      # prints the binary's path (builds it first if needed)
#   . bench/peer/install_edge.sh         # same, and sets EDGE_BIN in the calling shell
#
# Environment: EDGE_VERSION (default 19.15.1), PEER_DIR (default <repo>/target/peer),
# EDGE_BUILD_JOBS (cargo -j; default cargo's own).
#
# Edge embeds Swagger UI (utoipa-swagger-ui), whose build script downloads it from GitHub,
# which this workplace cannot reach. The same archive (Swagger UI 5.17.14, the version that
# build script downloads by default) is published on crates.io as utoipa-swagger-ui-vendored
# 0.1.2: this script fetches that crate with `cargo fetch` and hands the archive to the build
# script through SWAGGER_UI_DOWNLOAD_URL=file://... Only /swagger-ui serves it.

# Prints the path of the Swagger UI archive, fetching it first when needed.
_edge_swagger_zip() {
  local peer="$1"
  local zip="$peer/swagger-ui-v5.17.14.zip"
  if [ ! -s "$zip" ]; then
    local tmp crate
    tmp="$(mktemp -d)" || return 1
    mkdir -p "$tmp/src"
    printf '[package]\nname = "swagger-fetch"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nutoipa-swagger-ui-vendored = "=0.1.2"\n\n[workspace]\n' \
      >"$tmp/Cargo.toml"
    echo 'fn main() {}' >"$tmp/src/main.rs"
    if ! cargo fetch --manifest-path "$tmp/Cargo.toml" >&2; then
      rm -rf "$tmp"
      echo "install_edge.sh: cargo fetch utoipa-swagger-ui-vendored failed" >&2
      return 1
    fi
    rm -rf "$tmp"
    crate="$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/utoipa-swagger-ui-vendored-0.1.2.crate 2>/dev/null | head -n 1)"
    if [ -z "$crate" ] || ! tar -xzOf "$crate" utoipa-swagger-ui-vendored-0.1.2/res/v5.17.14.zip >"$zip.part"; then
      rm -f "$zip.part"
      echo "install_edge.sh: no Swagger UI archive in utoipa-swagger-ui-vendored 0.1.2" >&2
      return 1
    fi
    mv "$zip.part" "$zip"
  fi
  echo "$zip"
}

_edge_install() {
  local version="${EDGE_VERSION:-19.15.1}"
  local here root peer bin
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)" || return 1
  root="$(cd "$here/../.." && pwd)" || return 1
  peer="${PEER_DIR:-$root/target/peer}"
  bin="$peer/bin/unleash-edge"

  # Edge's CLI has no --version: cargo install's own record in $peer/.crates.toml says which
  # version the binary is.
  _edge_is() {
    [ -x "$bin" ] && grep -qF "\"unleash-edge $version " "$peer/.crates.toml" 2>/dev/null &&
      [ "$(cat "$peer/profile" 2>/dev/null)" = "lto=thin" ]
  }
  if _edge_is; then
    EDGE_BIN="$bin"
    return 0
  fi

  command -v cargo >/dev/null || { echo "install_edge.sh: cargo not found" >&2; return 1; }
  mkdir -p "$peer" || return 1
  echo "install_edge.sh: building unleash-edge $version into $peer (several minutes)" >&2
  local swagger
  swagger="$(_edge_swagger_zip "$peer")" || return 1
  local start=$SECONDS
  local jobs=()
  [ -n "${EDGE_BUILD_JOBS:-}" ] && jobs=(-j "$EDGE_BUILD_JOBS")
  # --force: replaces a binary of another version; the build tree keeps its artifacts.
  # Thin LTO across crates: the `dist` profile Edge's project builds its published binaries
  # with (release, lto = "thin"); a crate's own profiles do not reach `cargo install`.
  if ! SWAGGER_UI_DOWNLOAD_URL="file://$swagger" CARGO_TARGET_DIR="$peer/build" \
      CARGO_PROFILE_RELEASE_LTO=thin cargo install unleash-edge \
      --version "=$version" --locked --no-default-features --force \
      --root "$peer" "${jobs[@]}" >&2; then
    echo "install_edge.sh: cargo install unleash-edge $version failed" >&2
    return 1
  fi
  echo "lto=thin" >"$peer/profile"
  echo "install_edge.sh: built in $((SECONDS - start)) s" >&2
  if ! _edge_is; then
    echo "install_edge.sh: $peer/.crates.toml does not list unleash-edge $version" >&2
    return 1
  fi
  EDGE_BIN="$bin"
}

if [ "${BASH_SOURCE[0]}" != "$0" ]; then
  # Sourced: set EDGE_BIN, leave the caller's shell options alone.
  _edge_install && export EDGE_BIN
else
  set -euo pipefail
  _edge_install
  echo "$EDGE_BIN"
fi
