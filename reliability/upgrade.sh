#!/usr/bin/env bash
# The upgrade test (D26, `make upgrade-test`, run by .ci/run): the previous release's binary,
# built from its commit in a git worktree with a target directory of its own (target/upgrade/
# target, kept between runs: a second run builds nothing), then this checkout's binary, then
# reliability/upgrade.py drives both on one PostgreSQL database and one NATS JetStream server.
#
# Not this checkout's target directory: cargo names a workspace crate's artifacts by its path
# relative to the workspace, so the worktree's crates of the same version would overwrite this
# checkout's and be taken as up to date.
#
#   bash reliability/upgrade.sh COMMIT
#
# COMMIT is the previous release's commit (the Makefile's UPGRADE_FROM, named in CHANGELOG.md).
set -euo pipefail
cd "$(dirname "$0")/.."

FROM=${1:?usage: upgrade.sh COMMIT}
ROOT=$(pwd)
OUT=$ROOT/target/upgrade
TREE=$OUT/src-$FROM
mkdir -p "$OUT"

if ! git cat-file -e "$FROM^{commit}" 2>/dev/null; then
	# A shallow clone: fetch the history that holds the previous release.
	git fetch --quiet --unshallow 2>/dev/null || git fetch --quiet origin "$FROM" 2>/dev/null || true
fi
if ! git cat-file -e "$FROM^{commit}" 2>/dev/null; then
	echo "upgrade.sh: the previous release's commit $FROM is not in this clone" >&2
	exit 1
fi
python3 reliability/migrations_check.py "$FROM"
if [ ! -x "$OUT/flowgate-$FROM" ]; then
	git worktree prune
	[ -d "$TREE" ] || git worktree add --detach --force "$TREE" "$FROM" >/dev/null
	(cd "$TREE" && CARGO_TARGET_DIR="$OUT/target" cargo build -q -p flowgate --bin flowgate)
	cp "$OUT/target/debug/flowgate" "$OUT/flowgate-$FROM.tmp"
	mv "$OUT/flowgate-$FROM.tmp" "$OUT/flowgate-$FROM"
fi
# This checkout's binary.
cargo build -q -p flowgate --bin flowgate
cp "${CARGO_TARGET_DIR:-$ROOT/target}/debug/flowgate" "$OUT/flowgate-current"
if cmp -s "$OUT/flowgate-current" "$OUT/flowgate-$FROM"; then
	echo "upgrade.sh: the current binary is the previous release's; the build did not relink it" >&2
	exit 1
fi
# The previous release's own configuration folder, as its deployment ships it.
CONFIG=$OUT/config-$FROM
rm -rf "$CONFIG" && mkdir -p "$CONFIG"
git archive "$FROM" config | tar -x -C "$CONFIG"
python3 reliability/upgrade.py "$OUT/flowgate-$FROM" "$CONFIG/config" "$OUT/flowgate-current"
