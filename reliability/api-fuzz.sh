#!/usr/bin/env bash
# `make api-fuzz`: schemathesis against a live debug server built from the workspace, using the
# server's own OpenAPI document (/openapi.json) and every check schemathesis has (`--checks
# all`): no 5xx, responses, status codes, content types and headers as documented,
# schema-valid requests accepted (positive data) and schema-violating ones rejected (negative
# data), missing or wrong credentials refused, unsupported methods answered with 405.
#
# The server runs on SQLite in a temporary folder, over a real workspace imported before it
# starts (reliability/api-fuzz-catalog.json: two apps, so the legacy resolve cannot fall back to
# the workspace's only app) with an SDK key created for it, sent as the bearer token.
# reliability/schemathesis.toml draws app ids and placement keys from that catalog, so requests
# reach resolve and event validation instead of stopping at 404 (reliability/api_fuzz_hooks.py
# gives the same values to the phases that do not draw from dictionaries); at the end,
# reliability/api_fuzz_summary.py prints the statuses of each operation and fails the run
# when one does not reach its handler. Rate limits are raised for the run (one client sends
# everything). API_FUZZ_MAX_EXAMPLES (default 300) cases per operation and phase;
# API_FUZZ_SEED fixes the seed. Reports in target/api-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=target/api-fuzz-venv
SCHEMATHESIS_VERSION=4.32.5
OUT=target/api-fuzz
CATALOG=reliability/api-fuzz-catalog.json
WORKSPACE=f0000000-0000-4000-8000-000000000001
MAX_EXAMPLES=${API_FUZZ_MAX_EXAMPLES:-300}
mkdir -p "$OUT"

if ! "$VENV/bin/st" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
	python3 -m venv "$VENV"
	"$VENV/bin/pip" install -q "schemathesis==$SCHEMATHESIS_VERSION"
fi

# shellcheck source=reliability/debug-server.sh
source reliability/debug-server.sh

# Raised for the run: schemathesis sends everything from one address with one key, far above
# the defaults (200 rps per IP, 2,000 per key); a 429 would hide what the handlers answer.
export FLOWGATE__RATE_LIMIT__PER_IP_RPS=1000000
export FLOWGATE__RATE_LIMIT__PER_IP_BURST=1000000
export FLOWGATE__RATE_LIMIT__PER_KEY_RPS=1000000
export FLOWGATE__RATE_LIMIT__PER_KEY_BURST=1000000

# The workspace and its key, written before the server starts (a store holding a catalog is
# served as it is; the demo workspace is seeded only into an empty one).
target/debug/flowgate migrate >"$OUT/setup.log" 2>&1
target/debug/flowgate import "$CATALOG" >>"$OUT/setup.log" 2>&1
KEY=$(target/debug/flowgate keys create --workspace "$WORKSPACE" --env test --name api-fuzz --json |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["key"])')
[[ $KEY == fg_test_* ]] || { echo "no SDK key for the fuzz workspace"; cat "$OUT/setup.log"; exit 1; }
export FLOWGATE_API_FUZZ_KEY=$KEY

start_server "$OUT/server.log"

seed_args=()
[[ -n ${API_FUZZ_SEED:-} ]] && seed_args=(--seed "$API_FUZZ_SEED")
# One worker: schemathesis' workers are threads, and CPython 3.11 can fail `ast.parse` run
# from several threads at once (hypothesis describes its strategies with it), which shows up
# as "AST constructor recursion depth mismatch" runtime errors.
set +e
SCHEMATHESIS_HOOKS=reliability/api_fuzz_hooks.py "$VENV/bin/st" --config-file reliability/schemathesis.toml run \
	"http://127.0.0.1:$API_PORT/openapi.json" \
	--checks all \
	--max-examples "$MAX_EXAMPLES" --workers 1 --no-color "${seed_args[@]}" \
	--report junit,ndjson --report-junit-path "$OUT/junit.xml" \
	--report-ndjson-path "$OUT/run.ndjson" 2>&1 | tee "$OUT/st.log"
STATUS=${PIPESTATUS[0]}
set -e
echo "schemathesis exit code: $STATUS (reports in $OUT)"
# Statuses per operation; fails when an operation does not reach its handler.
if ! python3 reliability/api_fuzz_summary.py "$OUT/run.ndjson" | tee "$OUT/summary.txt"; then
	[[ $STATUS -ne 0 ]] || STATUS=1
fi
exit "$STATUS"
