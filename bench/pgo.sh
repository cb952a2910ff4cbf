#!/usr/bin/env bash
# `make release-pgo` (and `make bench-http`, which measures its binaries): profile-guided
# release builds of flowgate and of the benchmark's baseline (P23 in docs/decisions.md).
#
# 1. Both binaries are built instrumented (`-Cprofile-generate`) into target/pgo-gen.
# 2. Training: bench/bench.py runs every scenario of the load benchmark against them for a few
#    seconds each (single and batch resolve, events into PostgreSQL, a published change, the
#    info log level), so the profile is that of the service's own request mix. Each process
#    writes its counts when it exits.
# 3. `llvm-profdata merge` (rustup's llvm-tools, the compiler's own LLVM; installed when
#    missing) joins them into one profile.
# 4. Both binaries are built again with `-Cprofile-use` into target/pgo: LLVM lays out the code
#    by what ran (hot paths together, cold ones apart) and inlines by measured counts.
#
# The baseline is built the same way from the same profile, so the benchmark's ratios compare
# two binaries built alike. Needs what the load benchmark needs (PostgreSQL, psql, wrk) and
# about 12 minutes on 2 cores (two release builds with fat LTO, 2 minutes of training).
# Environment: PGO_TRAIN_SECONDS (per training run, default 4).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

. bench/install.sh
install_missing wrk

sysroot=$(rustc --print sysroot)
host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$sysroot/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
    echo "pgo: installing rustup's llvm-tools (llvm-profdata of the compiler's LLVM)" >&2
    rustup component add llvm-tools
fi

profiles="$root/target/pgo-profiles"
raw="$profiles/raw"
packages=(-p flowgate -p flowgate-bench-baseline)

echo "pgo: instrumented build (target/pgo-gen)" >&2
RUSTFLAGS="-Cprofile-generate=$raw" ${CARGO:-cargo} build --release --locked "${packages[@]}" \
    --target-dir target/pgo-gen

echo "pgo: training on the load benchmark's scenarios" >&2
rm -rf "$raw"
mkdir -p "$raw"
BENCH_BIN=target/pgo-gen/release/flowgate \
    BENCH_BASELINE_BIN=target/pgo-gen/release/flowgate-bench-baseline \
    BENCH_DURATION="${PGO_TRAIN_SECONDS:-4}" BENCH_WARMUP=1 BENCH_ROUNDS=1 BENCH_PACE_MS=0 \
    BENCH_ONLY= BENCH_PERF= BENCH_SCHED= \
    python3 bench/bench.py >"$profiles/training.md" 2>"$profiles/training.log" || {
    cat "$profiles/training.log" >&2
    exit 1
}
if ! compgen -G "$raw/*.profraw" >/dev/null; then
    echo "pgo: the training wrote no profile" >&2
    exit 1
fi
"$profdata" merge -o "$profiles/merged.profdata" "$raw"

echo "pgo: optimized build (target/pgo)" >&2
RUSTFLAGS="-Cprofile-use=$profiles/merged.profdata" ${CARGO:-cargo} build --release --locked \
    "${packages[@]}" --target-dir target/pgo
echo "pgo: target/pgo/release/flowgate and target/pgo/release/flowgate-bench-baseline" >&2
