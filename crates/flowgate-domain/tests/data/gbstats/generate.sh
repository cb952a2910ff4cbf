#!/usr/bin/env bash
# Regenerates vectors.json (the experiment statistics' golden vectors, D22) and sequential.json
# (the sequential test's, D27) with GrowthBook's stats engine: installs gbstats 0.8.0 from PyPI
# into target/gbstats-venv, then runs generate.py. The Rust tests read the committed files;
# they never run Python.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../../.." && pwd)"
venv="$root/target/gbstats-venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check "gbstats==0.8.0"
"$venv/bin/python" "$here/generate.py"
