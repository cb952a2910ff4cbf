#!/usr/bin/env python3
"""Checks the repository's Markdown offline: every relative link reaches a file, every anchor a
heading of it, and every file path a document quotes in backticks exists.

`make lint` runs it. Links: `[text](path)`, `[text](path#anchor)` and `[text](#anchor)`;
`http(s):` and `mailto:` links are not fetched (offline). Anchors follow GitHub's slugs
(lowercase; punctuation but `-` and `_` dropped; spaces to `-`; a repeated heading gets `-1`,
`-2`); rustdoc's intra-doc links (`[x](flowgate_domain::ports::X)`) in crate READMEs are
rustdoc's to check. Quoted paths: a backticked word that starts with a top-level folder of the
repository (`crates/`, `docs/`, ...) or ends in a source or data extension and holds a `/`,
resolved from the repository root, from `crates/`, from the document's folder, or from any
crate's folder, `src/` or `tests/`; globs, placeholders (`<N>`, `{id}`, `...`), URLs and
files written at run time (`target/`, `data/`, `fuzz/artifacts/`) are skipped. Prints each problem as `file:line: what` and
exits 1 when there is one. The README's layout names every crate of `crates/`.

Why a script rather than `lychee --offline`: lychee checks links and anchors but not the paths
documents quote in backticks, which is where stale references were found, and it would be
compiled on every CI machine for a check this size. Usage: `python3 reliability/doc_links.py`
(from the repository root), or `--self-test`.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CODE = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^\s*(```|~~~)")
EXTENSIONS = (".rs", ".md", ".py", ".sh", ".toml", ".json", ".yaml", ".yml", ".sql", ".txt", ".pem", ".der", ".html", ".js", ".css")


def slug(heading: str) -> str:
    text = re.sub(r"`|\*\*|\*|_(?=\W)|(?<=\W)_", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    for m in re.finditer(r'<a\s+(?:name|id)="([^"]+)"', path.read_text()):
        found.add(m.group(1))
    return found


def tracked_markdown(root: Path) -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return [root / line for line in out.splitlines() if line and (root / line).exists()]
    except (OSError, subprocess.CalledProcessError):
        return [p for p in root.rglob("*.md") if "target" not in p.parts and "node_modules" not in p.parts]


def looks_like_path(word: str, tops: set[str]) -> bool:
    if " " in word or "/" not in word or "://" in word:
        return False
    if any(c in word for c in "*<>{}$|") or "..." in word or word.startswith(("-", "/", "~")):
        return False
    first = word.split("/", 1)[0]
    if first in ("target", "data") or word.startswith("fuzz/artifacts/") or "…" in word:
        return False  # written at run time, or elided
    return first in tops or word.endswith(EXTENSIONS)


def check(root: Path, files: list[Path]) -> list[str]:
    problems: list[str] = []
    tops = {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")} - {"target"}
    cache: dict[Path, set[str]] = {}
    # A path may be quoted from its crate (`benches/x.rs`) or its source (`events/mod.rs`).
    crate_dirs = [
        d / sub
        for d in sorted((root / "crates").glob("*"))
        for sub in ("", "src", "tests", "tests/it", "src/bin")
        if (d / sub).is_dir()
    ]
    for md in files:
        fenced = False
        for number, line in enumerate(md.read_text().splitlines(), start=1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if fenced:
                continue
            where = f"{md.relative_to(root)}:{number}"
            for m in LINK.finditer(line):
                target = m.group(2)
                # A URL, or a rustdoc intra-doc link of a crate README (`flowgate_domain::x`).
                if re.match(r"^[a-z]+:", target) or "::" in target:
                    continue
                file_part, _, anchor = target.partition("#")
                dest = (md.parent / file_part).resolve() if file_part else md
                if not dest.exists():
                    problems.append(f"{where}: link to {target}: no such file")
                    continue
                if anchor and dest.suffix == ".md":
                    known = cache.setdefault(dest, anchors(dest))
                    if anchor not in known:
                        problems.append(f"{where}: link to {target}: no heading #{anchor} in {dest.relative_to(root)}")
            for m in CODE.finditer(line):
                word = m.group(1).strip().rstrip(".,;:")
                word = re.sub(r":\d+(-\d+)?$", "", word)  # file:line
                if not looks_like_path(word, tops):
                    continue
                bases = [root, root / "crates", md.parent, *crate_dirs]
                if not any((base / word).exists() for base in bases):
                    problems.append(f"{where}: `{word}` names no file or folder of the repository")
    return problems


def self_test() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "docs").mkdir()
        (root / "crates" / "a" / "src").mkdir(parents=True)
        (root / "crates" / "a" / "src" / "lib.rs").write_text("")
        (root / "docs" / "b.md").write_text("# B\n\n## The `x` part (D1)\n\n## Again\n\n## Again\n")
        good = root / "README.md"
        good.write_text(
            "[b](docs/b.md#the-x-part-d1) [again](docs/b.md#again-1) [web](https://e.org/x)\n"
            "`crates/a/src/lib.rs` `a/src/lib.rs:12` `crates/*/src` `docs/<N>.md`\n"
            "```\n[not](checked.md) `crates/none.rs`\n```\n"
        )
        assert check(root, [good]) == [], check(root, [good])
        bad = root / "BAD.md"
        bad.write_text("[b](docs/c.md) [b](docs/b.md#nowhere) `crates/a/src/gone.rs`\n")
        found = check(root, [bad])
        assert len(found) == 3, found
    print("doc_links: self-test passed")


def main(args: list[str]) -> int:
    if args == ["--self-test"]:
        self_test()
        return 0
    root = Path.cwd()
    files = tracked_markdown(root)
    problems = check(root, files)
    readme = (root / "README.md").read_text()
    for crate in sorted((root / "crates").glob("*/Cargo.toml")):
        name = crate.parent.name
        if f"`crates/{name}`" not in readme:
            problems.append(f"README.md: the layout does not name crates/{name}")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"doc_links: {len(files)} Markdown files, every link, anchor and quoted path found")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
