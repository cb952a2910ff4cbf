#!/usr/bin/env bash
# `make bench-http`: the pinned HTTP benchmark of single resolve and batches (bench/pinned.py:
# the servers on their own cores, wrk and oha on the others; peak, open-loop latency and CPU per
# batch placement against the no-logic baseline). `BENCH_PINNED=0` (`make bench-http-unpinned`)
# runs the unpinned load benchmark of every scenario instead (bench/bench.py: single resolve,
# batches, events, catalog at scale). docs/benchmarks.md describes both. Installs wrk (Debian
# package) and oha (crates.io, pinned version, into target/bench-tools) when missing, builds the
# service and the baseline in release mode. Needs PostgreSQL on 127.0.0.1:5432 (`make pg-up`)
# and psql. About 9 minutes (pinned) or 8 minutes (unpinned) once built. BENCH_PGO=1 measures
# profile-guided builds of both servers instead (bench/pgo.sh, about 12 minutes more).
# BENCH_STICKY=1 (`make bench-sticky`) runs bench/sticky.py, sticky assignment against the same
# placement without it (also needs Redis).
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/install.sh
install_missing wrk
if [ "${BENCH_PINNED:-1}" = 0 ]; then
    # The unpinned run's events-through-JetStream scenario.
    command -v nats-server >/dev/null || [ -x /usr/sbin/nats-server ] || install_missing nats-server
fi
for tool in psql python3; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is required" >&2; exit 1; }
done

if [ "${BENCH_PGO:-0}" = 1 ]; then
    # Both binaries profile-guided (bench/pgo.sh), measured against each other.
    bash bench/pgo.sh
    export BENCH_BIN=${BENCH_BIN:-target/pgo/release/flowgate}
    export BENCH_BASELINE_BIN=${BENCH_BASELINE_BIN:-target/pgo/release/flowgate-bench-baseline}
else
    ${CARGO:-cargo} build --release -p flowgate -p flowgate-bench-baseline
fi
if [ "${BENCH_PINNED:-1}" = 0 ]; then
    exec python3 bench/bench.py
fi
BENCH_OHA=${BENCH_OHA:-$(install_crate oha oha "${OHA_VERSION:-1.16.0}")}
export BENCH_OHA
# BENCH_STICKY=1 (`make bench-sticky`): sticky assignment on the SQL store and Redis instead.
if [ "${BENCH_STICKY:-0}" = 1 ]; then
    exec python3 bench/sticky.py
fi
exec python3 bench/pinned.py
