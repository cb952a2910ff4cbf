#!/usr/bin/env bash
# `make soak` (docs/reliability.md): SOAK_SECONDS (default 600) of mixed resolve, batch resolve and events
# load (reliability/soak.py, SOAK_RPS requests per second) against a release build on a
# throwaway PostgreSQL database, created here and dropped on exit. Everything listens on
# 127.0.0.1. Output in target/soak/: soak.csv (one row per 10 s: RSS, requests, errors, latency
# per route), summary.json, server.log. After the load the server is stopped with SIGTERM and
# the stored events are counted against the accepted ones (nothing accepted may be lost).
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_TOTAL=${SOAK_SECONDS:-600}
RPS=${SOAK_RPS:-300}
PG_URL_BASE=${FLOWGATE_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432}
PG_URL_BASE=${PG_URL_BASE%/*}
[[ $PG_URL_BASE == postgres://*@*:* ]] || PG_URL_BASE=postgres://postgres@127.0.0.1:5432
OUT=target/soak
DB="flowgate_soak_$$"
mkdir -p "$OUT"

cargo build --release -p flowgate
BIN=target/release/flowgate

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
API_PORT=$(free_port)
ADMIN_PORT=$(free_port)

psql "$PG_URL_BASE/postgres" -qc "CREATE DATABASE $DB" >/dev/null
SERVER_PID=""
cleanup() {
	if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
		kill -TERM "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
	fi
	psql "$PG_URL_BASE/postgres" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null || true
}
trap cleanup EXIT

export FLOWGATE__DATABASE__URL="$PG_URL_BASE/$DB?sslmode=disable"
export FLOWGATE__SERVER__LISTEN="127.0.0.1:$API_PORT"
export FLOWGATE__ADMIN__LISTEN="127.0.0.1:$ADMIN_PORT"
# One client address sends everything: lift the per-IP and per-key limits (defaults 200 and
# 2,000 rps) far above the soak's rate so that no request is refused with 429.
export FLOWGATE__RATE_LIMIT__PER_IP_RPS=1000000
export FLOWGATE__RATE_LIMIT__PER_IP_BURST=1000000
export FLOWGATE__RATE_LIMIT__PER_KEY_RPS=1000000
export FLOWGATE__RATE_LIMIT__PER_KEY_BURST=1000000
export FLOWGATE__LOG__LEVEL=${FLOWGATE__LOG__LEVEL:-warn}

"$BIN" migrate
DEMO=$("$BIN" demo --json)
KEY=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])' <<<"$DEMO")
APP=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["app_id"])' <<<"$DEMO")

"$BIN" serve >"$OUT/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 60); do
	curl -fsS "http://127.0.0.1:$ADMIN_PORT/readyz" >/dev/null 2>&1 && break
	sleep 0.5
done
curl -fsS "http://127.0.0.1:$ADMIN_PORT/readyz" >/dev/null

echo "soak: ${SECONDS_TOTAL}s at ${RPS} rps against pid $SERVER_PID (release, PostgreSQL database $DB)"
python3 reliability/soak.py --base "http://127.0.0.1:$API_PORT" --key "$KEY" --app "$APP" \
	--pid "$SERVER_PID" --seconds "$SECONDS_TOTAL" --rate "$RPS" \
	--csv "$OUT/soak.csv" --summary "$OUT/summary.json"

kill -TERM "$SERVER_PID"
set +e
wait "$SERVER_PID"
EXIT=$?
set -e
SERVER_PID=""
ACCEPTED=$(python3 -c 'import json; print(json.load(open("target/soak/summary.json"))["events_accepted"])')
STORED=$(psql "$PG_URL_BASE/$DB" -tAc "SELECT count(*) FROM analytics_events WHERE sdk_version = 'soak-1.0'")
echo "server exit code after SIGTERM: $EXIT; events accepted: $ACCEPTED, stored: $STORED"
python3 - "$OUT/summary.json" "$EXIT" "$ACCEPTED" "$STORED" <<'EOF'
import json, sys
path, code, accepted, stored = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
s = json.load(open(path))
s.update(server_exit_code=code, events_stored=stored)
json.dump(s, open(path, "w"), indent=2)
ok = s["errors"] == 0 and code == 0 and stored == accepted
print("soak:", "PASS" if ok else "FAIL", f"(errors {s['errors']}, exit {code}, lost {accepted - stored})")
sys.exit(0 if ok else 1)
EOF
