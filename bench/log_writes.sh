#!/usr/bin/env bash
# The cost of the access log: `flowgate serve` on SQLite at log.level=info (one JSON line per
# request, to a file), wrk sending 64 connections of short requests that each log a line
# (GET on a POST route: 405), and `perf stat` counting the server's write and futex system
# calls and context switches over 5 s (P21 in docs/decisions.md). Needs wrk and perf.
#
# Usage: bench/log_writes.sh [FLOWGATE_BINARY]   (default target/release/flowgate)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/install.sh
install_missing wrk
bin=$(realpath "${1:-target/release/flowgate}")
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
url=http://127.0.0.1:18570/v1/apps/x/placements/y/resolve

FLOWGATE__DATABASE__URL="sqlite://$dir/fg.db" FLOWGATE__SERVER__LISTEN=127.0.0.1:18570 \
FLOWGATE__ADMIN__LISTEN=127.0.0.1:18571 FLOWGATE__SERVER__WORKERS=2 \
FLOWGATE__LOG__LEVEL=info FLOWGATE__LOG__FORMAT=json \
FLOWGATE__RATE_LIMIT__PER_IP_RPS=1000000 FLOWGATE__RATE_LIMIT__PER_IP_BURST=1000000 \
    "$bin" serve >/dev/null 2>"$dir/log.jsonl" &
pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "$url" && break; sleep 0.1; done
wrk -t2 -c64 -d3s "$url" >/dev/null
perf stat -x, -e syscalls:sys_enter_write,syscalls:sys_enter_futex,context-switches \
    -p "$pid" -o "$dir/stat" -- sleep 5 &
stat=$!
rps=$(wrk -t2 -c64 -d5s "$url" | awk '/Requests\/sec/ { print $2 }')
wait "$stat"
echo "requests/s: $rps"
awk -F, '/^[0-9]/ { printf "%s in 5 s: %s\n", $3, $1 }' "$dir/stat"
echo "log lines written: $(wc -l <"$dir/log.jsonl")"
