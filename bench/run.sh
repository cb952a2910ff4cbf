#!/usr/bin/env bash
# `make bench-http`: the HTTP load benchmark (docs/benchmarks.md). Installs wrk
# when missing (Debian package), builds the service and the baseline in release mode, then
# bench/bench.py generates the catalog, runs every scenario and prints one table. Needs
# PostgreSQL on 127.0.0.1:5432 (`make pg-up`) and psql. About 5 minutes once built.
# BENCH_PGO=1 measures profile-guided builds of both servers instead (bench/pgo.sh, about 12
# minutes more).
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/install.sh
install_missing wrk
command -v nats-server >/dev/null || [ -x /usr/sbin/nats-server ] || install_missing nats-server
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
exec python3 bench/bench.py
