# Sourced by the scripts that test the API through a live debug server (api-fuzz.sh,
# api-client.sh): builds it, and gives them a temporary folder ($TMP, removed at exit), free
# ports ($API_PORT, $ADMIN_PORT) with the settings that use them and a SQLite database in $TMP,
# and `start_server LOG` (serve in the background, wait until /readyz answers, stopped at exit).

cargo build -q -p flowgate
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
export FLOWGATE__CATALOG__CACHE_PATH="$TMP/catalog-cache.json"
export FLOWGATE__LOG__LEVEL=${FLOWGATE__LOG__LEVEL:-warn}

# `start_server LOG`: target/debug/flowgate serve, its output in LOG, ready within a minute.
start_server() {
	target/debug/flowgate serve >"$1" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 120); do
		curl -fsS "http://127.0.0.1:$ADMIN_PORT/readyz" >/dev/null 2>&1 && return 0
		kill -0 "$SERVER_PID" || { cat "$1"; exit 1; }
		sleep 0.5
	done
	echo "the server was not ready within a minute"; cat "$1"; exit 1
}
