#!/usr/bin/env bash
# `make bench-instructions`: instructions per request of the in-process request path
# (crates/flowgate-http/benches/handler.rs), counted by valgrind's callgrind. Unlike times,
# the counts repeat exactly for the same binary and inputs whatever else the machine runs, so
# a change of 1% shows. Each variant answers N and then 2N requests; the difference divided
# by N is the cost of one request without the setup's. Needs valgrind (Debian package).
#
# Environment: N (requests, default 2000), VARIANTS (default "baseline flowgate flowgate_gzip"),
# HANDLER_BIN (a built bench binary, for A/B; default: build and use the current one).
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
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

count() { # variant requests -> instructions of the whole run
    HANDLER_ITERS=$2 HANDLER_VARIANT=$1 valgrind --tool=callgrind --callgrind-out-file="$out/cg.$1.$2" \
        "$bin" --bench 2>&1 | awk '/Collected/ { gsub(",", "", $4); n = $4 } END { print n }'
}

echo "| variant | instructions per request |"
echo "|---|---|"
for v in ${VARIANTS:-baseline flowgate flowgate_gzip}; do
    a=$(count "$v" "$N")
    b=$(count "$v" $((2 * N)))
    echo "| $v | $(( (b - a) / N )) |"
done
echo
echo "binary: $bin; N=$N; $(date -u '+%Y-%m-%d %H:%M UTC')"
