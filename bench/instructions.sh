#!/usr/bin/env bash
# `make bench-instructions`: instructions per request of the in-process request path
# (crates/flowgate-http/benches/handler.rs), counted by valgrind's callgrind. Unlike times,
# the counts repeat exactly for the same binary and inputs whatever else the machine runs, so
# a change of 1% shows. Each variant answers N and then 2N requests; the difference divided
# by N is the cost of one request without the setup's, in instructions and in simulated
# instruction-cache misses. Needs valgrind (Debian package).
#
# The batch variants (10 and 50 placements of one app per request, each beside a baseline
# answering its bytes) answer N/10 requests, and are read per placement too.
#
# Environment: N (requests, default 2000), VARIANTS (default: every variant of the bench,
# "baseline flowgate flowgate_gzip baseline_batch10 batch10 baseline_batch50 batch50"),
# HANDLER_BIN (a built bench binary, for A/B; default: build and use the current one; a binary
# older than the batch variants needs VARIANTS="baseline flowgate flowgate_gzip"), STAGES=1
# (`make bench-stages`: instead, the single resolve's instructions stage by stage against the
# baseline's, bench/stages.py; and in CPU µs when `BENCH_PERF=1 make bench-http` left its
# profiles in target/bench-http).
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/install.sh
install_missing valgrind

N=${N:-2000}
bin=${HANDLER_BIN:-}
if [ -z "$bin" ]; then
    bin=$(${CARGO:-cargo} bench -p flowgate-http --bench handler --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "handler" and m.get("executable"):
        print(m["executable"])')
fi
if [ "${STAGES:-0}" = 1 ]; then
    python3 bench/stages.py instructions "$bin" "$N"
    if [ -f target/bench-http/perf-pinned-baseline.data ] && [ -f target/bench-http/pinned.json ]; then
        echo
        python3 bench/stages.py perf
    fi
    exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The simulated caches are this machine's (AMD EPYC, per core: 32 KiB L1i, 48 KiB L1d, 1 MiB
# L2). Instruction-cache misses count the code a request runs through, which a warm loop hides
# but a worker sharing its core with wrk and the kernel pays again on every request.
count() { # variant requests -> "instructions I1-misses" of the whole run
    if ! HANDLER_ITERS=$2 HANDLER_VARIANT=$1 valgrind --tool=callgrind --cache-sim=yes \
        --I1=32768,8,64 --D1=49152,12,64 --LL=1048576,16,64 \
        --callgrind-out-file="$out/cg.$1.$2" "$bin" --bench >"$out/log" 2>&1; then
        cat "$out/log" >&2
        return 1
    fi
    awk '/^events:/ { for (i = 2; i <= NF; i++) col[$i] = i }
         /^(summary|totals):/ { print $col["Ir"] + 0, $col["I1mr"] + 0; exit }' "$out/cg.$1.$2"
}

echo "| variant | placements | instructions per request | per placement | L1i misses per request |"
echo "|---|---|---|---|---|"
declare -A per_request
for v in ${VARIANTS:-baseline flowgate flowgate_gzip baseline_batch10 batch10 baseline_batch50 batch50}; do
    n=$N placements=1
    if [[ $v =~ batch([0-9]+)$ ]]; then
        placements=${BASH_REMATCH[1]}
        n=$(( N / 10 > 0 ? N / 10 : 1 ))
    fi
    first=$(count "$v" "$n") || exit 1
    second=$(count "$v" $((2 * n))) || exit 1
    read -r ia ma <<<"$first"
    read -r ib mb <<<"$second"
    if ! [[ $ia$ma$ib$mb =~ ^[0-9]+$ && $ia -gt 0 ]]; then
        echo "instructions.sh: no counts for $v ($first / $second)" >&2
        exit 1
    fi
    per_request[$v]=$(( (ib - ia) / n ))
    echo "| $v | $placements | ${per_request[$v]} | $(( per_request[$v] / placements )) | $(( (mb - ma) / n )) |"
done
# Flowgate's own work per placement: a batch's count above the baseline answering its bytes.
for b in 10 50; do
    if [ -n "${per_request[batch$b]:-}" ] && [ -n "${per_request[baseline_batch$b]:-}" ]; then
        echo
        echo "batch of $b: $(( (per_request[batch$b] - per_request[baseline_batch$b]) / b )) instructions per placement above the baseline answering the same bytes"
    fi
done
echo
echo "binary: $bin; N=$N; $(date -u '+%Y-%m-%d %H:%M UTC')"
