#!/usr/bin/env python3
"""Fails when a crate's top-level modules depend on each other in a circle.

`make lint` runs it over every crate of the workspace. A module's dependencies are the other
top-level modules of its crate that its files name, outside its `#[cfg(test)]` blocks, as
`crate::NAME` (in `use` or in a path), or from the crate root's own files as `NAME::` or
`self::NAME`, or from a child as `super::NAME` when the child sits directly under the root.
Re-exports of the crate root (`pub use`) in `lib.rs`/`main.rs` are the root's, not a module's,
so the root takes part in no circle. Every circle found is printed, one line each, as
`crate: a -> b -> a`, with one file:line per edge, and the exit status is 1.

Why a script rather than `cargo modules dependencies --acyclic`: cargo-modules compiles
rust-analyzer's crates, several minutes on the CI machine for a check that reads `use` lines;
what it would add (macro-generated paths, glob re-exports) no module here relies on to cross a
boundary. Usage: `python3 reliability/module_cycles.py [CRATE_DIR...]` (default: crates/*).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

USE_CRATE = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")
USE_SUPER = re.compile(r"\bsuper::([a-z_][a-z0-9_]*)")
CFG_TEST = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")


def strip_tests(text: str) -> str:
    """The text without its `#[cfg(test)] mod x { ... }` blocks (braces counted; strings and
    comments holding braces are rare enough in test modules to be ignored)."""
    out = []
    at = 0
    for match in CFG_TEST.finditer(text):
        if match.start() < at:
            continue
        out.append(text[at : match.start()])
        depth = 1
        i = match.end()
        while i < len(text) and depth:
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
            i += 1
        at = i
    out.append(text[at:])
    return "".join(out)


def strip_comments(text: str) -> str:
    """Line comments (docs included) removed: an intra-doc link is no dependency."""
    return re.sub(r"//[^\n]*", "", text)


def top_modules(src: Path) -> dict[str, list[Path]]:
    """Each top-level module of the crate whose root is in `src`, with its files."""
    modules: dict[str, list[Path]] = {}
    for path in sorted(src.rglob("*.rs")):
        rel = path.relative_to(src)
        if rel.parts[0] == "bin" or rel.name in ("lib.rs", "main.rs") and len(rel.parts) == 1:
            continue
        name = rel.parts[0][:-3] if len(rel.parts) == 1 else rel.parts[0]
        modules.setdefault(name, []).append(path)
    return modules


def edges(crate: Path) -> dict[tuple[str, str], str]:
    """(from, to) -> the first `file:line` that makes the edge."""
    src = crate / "src"
    modules = top_modules(src)
    found: dict[tuple[str, str], str] = {}
    for name, files in modules.items():
        for path in files:
            rel = path.relative_to(src)
            depth = len(rel.parts) - 1  # 0: src/name.rs; 1: src/name/mod.rs or src/name/x.rs
            if rel.name == "mod.rs":
                depth -= 1
            text = strip_comments(strip_tests(path.read_text()))
            targets = [(m.group(1), m.start()) for m in USE_CRATE.finditer(text)]
            if depth == 1:  # a direct child of `name`: `super::x` is inside `name`
                pass
            elif depth == 0:  # `name` itself: `super::x` is a sibling top-level module
                targets += [(m.group(1), m.start()) for m in USE_SUPER.finditer(text)]
            for target, offset in targets:
                if target != name and target in modules and (name, target) not in found:
                    line = text.count("\n", 0, offset) + 1
                    found[(name, target)] = f"{path}:{line}"
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each as one
    circle through all of its modules where one exists, else its members."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def self_test() -> None:
    """The check finds a circle it is given and none where there is none (`--self-test`)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "demo" / "src"
        (src / "b").mkdir(parents=True)
        (src / "lib.rs").write_text("pub mod a;\npub mod b;\npub mod c;\npub use a::A;\n")
        (src / "a.rs").write_text("use crate::b::B;\n/// [`crate::c`] is only named.\npub struct A;\n")
        (src / "b" / "mod.rs").write_text("mod inner;\npub struct B;\n")
        (src / "b" / "inner.rs").write_text("use super::B;\nfn f() { crate::c::g(); }\n")
        (src / "c.rs").write_text(
            "pub fn g() {}\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n"
        )
        graph: dict[str, set[str]] = {}
        for (a, b) in edges(src.parent):
            graph.setdefault(a, set()).add(b)
        assert graph == {"a": {"b"}, "b": {"c"}}, graph
        assert cycles(graph) == [], "tests and doc links make no edge"
        (src / "c.rs").write_text("use crate::a::A;\npub fn g() {}\n")
        graph = {}
        for (a, b) in edges(src.parent):
            graph.setdefault(a, set()).add(b)
        assert cycles(graph) == [["a", "b", "c"]], cycles(graph)
    print("module_cycles: self-test passed")


def main(args: list[str]) -> int:
    if args == ["--self-test"]:
        self_test()
        return 0
    crates = [Path(a) for a in args] or sorted(Path("crates").iterdir())
    failed = False
    for crate in crates:
        if not (crate / "src").is_dir():
            continue
        found = edges(crate)
        graph: dict[str, set[str]] = {}
        for (a, b) in found:
            graph.setdefault(a, set()).add(b)
        for component in cycles(graph):
            failed = True
            members = set(component)
            print(f"{crate.name}: module circle among {', '.join(component)}")
            for (a, b), where in sorted(found.items()):
                if a in members and b in members:
                    print(f"    {a} -> {b}  ({where})")
    if not failed:
        print(f"module_cycles: no circle among the top-level modules of {len(crates)} crates")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
