#!/usr/bin/env bash
# `make bench-peer`: flowgate beside Unleash Edge on the same pinned core (bench/peer.py;
# docs/benchmarks.md). Builds Edge (pinned version, crates.io, once, into target/peer: about 10
# minutes the first time) and oha (into target/bench-tools), installs wrk when missing, builds
# flowgate in release mode. Needs PostgreSQL on 127.0.0.1:5432 and psql. About 10 minutes once
# built. Not part of `make test` or CI.
set -euo pipefail
cd "$(dirname "$0")/../.."

. bench/install.sh
install_missing wrk
for tool in psql python3; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is required" >&2; exit 1; }
done
EDGE_BIN=${EDGE_BIN:-$(bash bench/peer/install_edge.sh)}
BENCH_OHA=${BENCH_OHA:-$(install_crate oha oha "${OHA_VERSION:-1.16.0}")}
export EDGE_BIN BENCH_OHA
${CARGO:-cargo} build --release -p flowgate
exec python3 bench/peer.py
