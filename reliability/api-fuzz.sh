#!/usr/bin/env bash
# `make api-fuzz` (docs/reliability.md): schemathesis against a live debug server built from the
# workspace, using the server's own OpenAPI document (/openapi.json). Checks: no 5xx
# (not_a_server_error), response schema, status code and content type conformance.
# SQLite in a temporary folder; the embedded default seeds the demo workspace and prints its
# SDK key, which is sent as the bearer token. Rate limits are raised for the run (one client
# sends everything). API_FUZZ_MAX_EXAMPLES (default 300) cases per operation and phase;
# API_FUZZ_SEED fixes the seed. Reports in target/api-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=target/api-fuzz-venv
SCHEMATHESIS_VERSION=4.32.5
OUT=target/api-fuzz
MAX_EXAMPLES=${API_FUZZ_MAX_EXAMPLES:-300}
mkdir -p "$OUT"

if ! "$VENV/bin/st" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
	python3 -m venv "$VENV"
	"$VENV/bin/pip" install -q "schemathesis==$SCHEMATHESIS_VERSION"
fi

cargo build -p flowgate
TMP=$(mktemp -d)
SERVER_PID=""
cleanup() {
	if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
		kill -TERM "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
API_PORT=$(free_port)
ADMIN_PORT=$(free_port)
export FLOWGATE__SERVER__LISTEN="127.0.0.1:$API_PORT"
export FLOWGATE__ADMIN__LISTEN="127.0.0.1:$ADMIN_PORT"
export FLOWGATE__DATABASE__URL="sqlite://$TMP/flowgate.db"
# Raised for the run: schemathesis sends everything from one address with one key, far above
# the defaults (200 rps per IP, 2,000 per key); a 429 would hide what the handlers answer.
export FLOWGATE__RATE_LIMIT__PER_IP_RPS=1000000
export FLOWGATE__RATE_LIMIT__PER_IP_BURST=1000000
export FLOWGATE__RATE_LIMIT__PER_KEY_RPS=1000000
export FLOWGATE__RATE_LIMIT__PER_KEY_BURST=1000000
export FLOWGATE__LOG__LEVEL=${FLOWGATE__LOG__LEVEL:-warn}

target/debug/flowgate serve >"$OUT/server.log" 2>&1 &
SERVER_PID=$!
KEY=""
for _ in $(seq 1 120); do
	KEY=$(sed -n 's/.*SDK key (shown once): \(fg_test_[A-Za-z0-9]*\).*/\1/p' "$OUT/server.log" | head -n1)
	if [[ -n $KEY ]] && curl -fsS "http://127.0.0.1:$ADMIN_PORT/readyz" >/dev/null 2>&1; then break; fi
	kill -0 "$SERVER_PID" || { cat "$OUT/server.log"; exit 1; }
	sleep 0.5
done
[[ -n $KEY ]] || { echo "no SDK key in the server's output"; cat "$OUT/server.log"; exit 1; }
export FLOWGATE_API_FUZZ_KEY=$KEY
export FLOWGATE_API_FUZZ_APP=d0000000-0000-4000-8000-0000000000a1

seed_args=()
[[ -n ${API_FUZZ_SEED:-} ]] && seed_args=(--seed "$API_FUZZ_SEED")
set +e
"$VENV/bin/st" --config-file reliability/schemathesis.toml run \
	"http://127.0.0.1:$API_PORT/openapi.json" \
	--checks not_a_server_error,response_schema_conformance,status_code_conformance,content_type_conformance \
	--max-examples "$MAX_EXAMPLES" --workers 2 --no-color "${seed_args[@]}" \
	--report junit,ndjson --report-dir "$OUT" 2>&1 | tee "$OUT/st.log"
STATUS=${PIPESTATUS[0]}
set -e
echo "schemathesis exit code: $STATUS (reports in $OUT)"
exit "$STATUS"
