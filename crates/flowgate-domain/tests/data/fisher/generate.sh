#!/usr/bin/env bash
# Regenerates fisher.json (Fisher's exact test's golden vectors, D35) with SciPy's own
# `fisher_exact`: installs SciPy from PyPI into target/fisher-venv, then runs generate.py. The
# Rust tests read the committed file; they never run Python.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../../.." && pwd)"
venv="$root/target/fisher-venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check "scipy==1.14.1"
"$venv/bin/python" "$here/generate.py"
