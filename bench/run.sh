#!/usr/bin/env bash
# `make bench-http`: the HTTP load benchmark of issue 7 (docs/benchmarks.md). Installs wrk
# when missing (Debian package), builds the service and the baseline in release mode, then
# bench/bench.py generates the catalog, runs every scenario and prints one table. Needs
# PostgreSQL on 127.0.0.1:5432 (`make pg-up`) and psql. About 5 minutes once built.
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/install.sh
install_missing wrk
for tool in psql python3; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is required" >&2; exit 1; }
done

${CARGO:-cargo} build --release -p flowgate -p flowgate-bench-baseline
exec python3 bench/bench.py
