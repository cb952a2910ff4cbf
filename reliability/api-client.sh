#!/usr/bin/env bash
# A client generated from docs/openapi.json against the real server (part of `make test`): the
# document types what clients send. openapi-python-client (PyPI, pinned, into
# target/api-client/venv) generates a Python client from the committed document (which a test
# keeps equal to the code); reliability/api_client_check.py resolves a placement and sends
# typed events through it to a debug server on SQLite seeded with the demo workspace, and
# checks what was stored in the database file.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=target/api-client
VENV=$OUT/venv
GENERATOR_VERSION=0.29.1
mkdir -p "$OUT"

if ! "$VENV/bin/openapi-python-client" --version 2>/dev/null | grep -q "$GENERATOR_VERSION"; then
	rm -rf "$VENV"
	if ! python3 -m venv "$VENV" >/dev/null 2>&1; then
		# Debian's python3 without its venv module (a fresh CI machine).
		apt-get install -y -qq python3-venv >/dev/null || (apt-get update -qq && apt-get install -y -qq python3-venv)
		rm -rf "$VENV"
		python3 -m venv "$VENV"
	fi
	"$VENV/bin/pip" install -q "openapi-python-client==$GENERATOR_VERSION"
fi

# Generated anew each run: a drift of the document shows here. No post hooks (no formatter).
rm -rf "$OUT/pkg"
mkdir -p "$OUT/pkg"
printf 'post_hooks: []\n' >"$OUT/config.yaml"
"$VENV/bin/openapi-python-client" generate --path docs/openapi.json --config "$OUT/config.yaml" \
	--output-path "$OUT/pkg/flowgate_client" --meta none >"$OUT/generate.log" 2>&1 ||
	{ cat "$OUT/generate.log"; exit 1; }
if grep -qi "warning" "$OUT/generate.log"; then
	echo "openapi-python-client warned about docs/openapi.json:"
	cat "$OUT/generate.log"
	exit 1
fi

# shellcheck source=reliability/debug-server.sh
source reliability/debug-server.sh
target/debug/flowgate migrate >"$OUT/setup.log" 2>&1
target/debug/flowgate demo --json >"$OUT/demo.json" 2>>"$OUT/setup.log"
start_server "$OUT/server.log"

PYTHONPATH="$OUT/pkg" "$VENV/bin/python" reliability/api_client_check.py \
	"http://127.0.0.1:$API_PORT" "$OUT/demo.json" "$TMP/flowgate.db"
