#!/usr/bin/env python3
"""Expand/contract (D26): the migrations a release adds must leave the previous release working.

    python3 reliability/migrations_check.py PREVIOUS_COMMIT

Reads the migration folders this checkout has and PREVIOUS_COMMIT had not (both backends) and
refuses, in their `up.sql`, what breaks a previous release still serving: dropping or renaming
a table or a column, changing a column's type, making a column NOT NULL, and on PostgreSQL an
index built without CONCURRENTLY on the events table (it locks writes for the whole build;
`ON ONLY` the partitioned table, then each partition CONCURRENTLY and attached, does not). A
statement is allowed when the line before it says why the previous release no longer needs
the old shape: `-- contract: <why>` (a contract step, a release after the expand step). Run by
reliability/upgrade.sh; exits 1 naming each refused statement.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RULES = [
    (r"\bDROP\s+TABLE\b", "drops a table"),
    (r"\bDROP\s+COLUMN\b", "drops a column"),
    (r"\bRENAME\b", "renames a table or column"),
    (r"\bALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\b", "changes a column's type"),
    (r"\bSET\s+NOT\s+NULL\b", "makes a column NOT NULL"),
    (r"\bADD\s+COLUMN\b[^;]*\bNOT\s+NULL\b(?![^;]*\bDEFAULT\b)", "adds a NOT NULL column without a default"),
]
PG_ONLY = [
    # ON ONLY (the partitioned parent's index, instant) is the first step of building one
    # concurrently: then CREATE INDEX CONCURRENTLY per partition and ATTACH PARTITION.
    (r"\bCREATE\s+(UNIQUE\s+)?INDEX\s+(?!CONCURRENTLY)[^;]*\bON\s+(?!ONLY\b)analytics_events\b",
     "indexes the events table without CONCURRENTLY"),
]


def previous(commit, backend):
    out = subprocess.run(["git", "ls-tree", "--name-only", commit, "migrations/%s/" % backend],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    return {os.path.basename(p) for p in out.stdout.split()}


def statements(text):
    """(statement, the comment lines just before it)."""
    comments, current = [], []
    for line in text.splitlines():
        stripped = line.strip()
        if not current and stripped.startswith("--"):
            comments.append(stripped)
            continue
        if not stripped and not current:
            comments = []
            continue
        current.append(line)
        if stripped.endswith(";"):
            yield " ".join(current), comments
            comments, current = [], []
    if current:
        yield " ".join(current), comments


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: migrations_check.py PREVIOUS_COMMIT")
    refused = []
    added = 0
    for backend in ("postgres", "sqlite"):
        old = previous(sys.argv[1], backend)
        folder = os.path.join(ROOT, "migrations", backend)
        for name in sorted(os.listdir(folder)):
            if name in old or not os.path.isdir(os.path.join(folder, name)):
                continue
            added += 1
            with open(os.path.join(folder, name, "up.sql")) as f:
                text = f.read()
            rules = RULES + (PG_ONLY if backend == "postgres" else [])
            for statement, comments in statements(text):
                code = re.sub(r"--[^\n]*", "", statement)
                for pattern, what in rules:
                    if re.search(pattern, code, re.IGNORECASE) and not any(
                            c.startswith("-- contract:") for c in comments):
                        refused.append("%s/%s: %s: %s" % (backend, name, what, code.strip()[:160]))
    for r in refused:
        print("migrations_check: " + r, file=sys.stderr)
    if refused:
        print("migrations_check: a release's migrations must keep the previous release working "
              "(docs/operations.md, Upgrades); mark a deliberate contract step with a "
              "'-- contract: <why>' line before the statement", file=sys.stderr)
        sys.exit(1)
    print("migrations_check: %d migration(s) since %s, all expand steps" % (added, sys.argv[1][:12]))


if __name__ == "__main__":
    main()
