#!/usr/bin/env python3
"""Fails when modules of a crate depend on each other in a circle, at any level of nesting.

`make lint` runs it over every crate of the workspace (`make lint` also runs `--self-test`
first). How it reads a crate:

- **Modules.** Every file under `src/` is a module (`a.rs` and `a/mod.rs` are `a`, `a/b.rs`
  is `a::b`); the crate root (`lib.rs`, `main.rs`) is the root. Modules declared
  `#[cfg(test)] mod x;` and inline `#[cfg(test)] mod x { ... }` blocks are tests and left out.
- **References.** Every path a module's code names that starts with `crate::`, `super::` or
  `self::`, in a `use` (grouped and nested trees expanded: `use crate::{a, b::{c, d}}`, `self`
  inside braces, globs, renames) or in an expression or type (`crate::a::f()`), resolved
  against the module's own path (`super::super::x` included) to the deepest module it names.
  Comments (doc links among them) make no reference.
- **Edges at every level.** A reference from module `m` to module `t` is an edge between the
  two children of their deepest common ancestor that hold them: `catalog::build` naming
  `crate::results::stats` is `catalog -> results` among the root's modules;
  `results::decision` naming `super::report` is `decision -> report` among `results`'s.
  A module naming its own ancestor or descendant makes no edge (a parent re-exporting its
  children, a child using its parent's items: one thing). The root's re-exports take part in
  no circle.

Every circle found is printed, one line each, as `crate: at PARENT, module circle among a,
b`, with one `file:line` per edge, and the exit status is 1.

Why a script rather than `cargo modules dependencies --acyclic`: cargo-modules compiles
rust-analyzer's crates, several minutes on the CI machine, for a check that reads paths; what
it would add (macro-generated paths) no module here relies on to cross a boundary. Usage:
`python3 reliability/module_cycles.py [CRATE_DIR...]` (default: crates/*),
`python3 reliability/module_cycles.py --self-test`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

CFG_TEST_BLOCK = re.compile(
    r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{"
)
CFG_TEST_FILE = re.compile(
    r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;"
)
USE = re.compile(r"\buse\s+([^;]*);")
PATH = re.compile(r"\b((?:crate|super|self)(?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)+)")

Module = tuple[str, ...]


def strip_comments(text: str) -> str:
    """Line and block comments (docs included) removed, lines kept: a doc link is no
    dependency."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def strip_tests(text: str) -> str:
    """The text without its `#[cfg(test)] mod x { ... }` blocks (braces counted), lines kept."""
    out = []
    at = 0
    for match in CFG_TEST_BLOCK.finditer(text):
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
        out.append("\n" * text.count("\n", match.start(), i))
        at = i
    out.append(text[at:])
    return "".join(out)


def module_of(src: Path, path: Path) -> Module:
    """The module a file under `src` is: `()` for the crate root."""
    parts = list(path.relative_to(src).parts)
    if parts == ["lib.rs"] or parts == ["main.rs"]:
        return ()
    if parts[-1] == "mod.rs":
        parts.pop()
    else:
        parts[-1] = parts[-1][:-3]
    return tuple(parts)


def modules(src: Path) -> dict[Module, Path]:
    """Every module of the crate whose root is in `src`, with its file, tests left out."""
    found: dict[Module, Path] = {}
    for path in sorted(src.rglob("*.rs")):
        if path.relative_to(src).parts[0] == "bin":
            continue
        found[module_of(src, path)] = path
    tests: set[Module] = set()
    for module, path in found.items():
        for match in CFG_TEST_FILE.finditer(strip_comments(path.read_text())):
            tests.add(module + (match.group(1),))
    return {
        m: p for m, p in found.items() if not any(m[: len(t)] == t for t in tests)
    }


def split_top(text: str, sep: str) -> list[str]:
    """`text` split at `sep` outside braces."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == sep and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


def use_paths(tree: str, prefix: list[str]) -> list[list[str]]:
    """Every path a use tree names, its groups expanded (`self` in a group is the group's
    prefix; a glob or a rename names the path before it)."""
    tree = re.sub(r"\s+as\s+[A-Za-z_][A-Za-z0-9_]*", "", tree)
    tree = re.sub(r"\s+", "", tree)
    if not tree:
        return []
    brace = tree.find("{")
    if brace == -1:
        segments = [s for s in tree.split("::") if s and s != "*"]
        if segments and segments[-1] == "self":
            segments.pop()
        return [prefix + segments]
    head = [s for s in tree[:brace].split("::") if s]
    inner = tree[brace + 1 : tree.rfind("}")]
    out = []
    for part in split_top(inner, ","):
        if part:
            out += use_paths(part, prefix + head)
    return out


def resolve(module: Module, path: list[str]) -> Module | None:
    """The module path `path` (starting with `crate`, `super` or `self`) names from `module`,
    with its item names still attached; `None` when it leaves the crate."""
    if not path:
        return None
    if path[0] == "crate":
        return tuple(path[1:])
    at = list(module)
    i = 0
    if path[0] == "self":
        i = 1
    else:
        while i < len(path) and path[i] == "super":
            if not at:
                return None
            at.pop()
            i += 1
        if i == 0:
            return None
    return tuple(at + path[i:])


def deepest(known: dict[Module, Path], named: Module) -> Module:
    """The deepest module of `known` that `named` (a module path with item names) is in."""
    for n in range(len(named), -1, -1):
        if named[:n] in known:
            return named[:n]
    return ()


def references(module: Module, text: str) -> list[tuple[Module, int]]:
    """Each path `text` (of `module`) names, resolved, with its offset."""
    out = []
    for match in USE.finditer(text):
        for path in use_paths(match.group(1), []):
            named = resolve(module, path)
            if named is not None:
                out.append((named, match.start()))
    for match in PATH.finditer(text):
        path = [s.strip() for s in match.group(1).split("::")]
        named = resolve(module, path)
        if named is not None:
            out.append((named, match.start()))
    return out


def edges(crate: Path) -> dict[Module, dict[tuple[str, str], str]]:
    """Per parent module, (child, child) -> the first `file:line` that makes the edge."""
    src = crate / "src"
    known = modules(src)
    found: dict[Module, dict[tuple[str, str], str]] = {}
    for module, path in known.items():
        if module == ():
            continue  # The root's re-exports and declarations take part in no circle.
        text = strip_tests(strip_comments(path.read_text()))
        for named, offset in references(module, text):
            target = deepest(known, named)
            common = 0
            while common < min(len(module), len(target)) and module[common] == target[common]:
                common += 1
            if common == len(module) or common == len(target):
                continue  # an ancestor or a descendant: one thing
            parent = module[:common]
            edge = (module[common], target[common])
            at = found.setdefault(parent, {})
            if edge not in at:
                at[edge] = f"{path}:{text.count(chr(10), 0, offset) + 1}"
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
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


def circles(crate: Path) -> list[tuple[Module, list[str], list[str]]]:
    """Each circle of `crate`: its parent module, its members, and its edges with where."""
    out = []
    for parent, found in sorted(edges(crate).items()):
        graph: dict[str, set[str]] = {}
        for (a, b) in found:
            graph.setdefault(a, set()).add(b)
        for component in cycles(graph):
            members = set(component)
            where = [
                f"{a} -> {b}  ({at})"
                for (a, b), at in sorted(found.items())
                if a in members and b in members
            ]
            out.append((parent, component, where))
    return out


def self_test() -> None:
    """Each shape of circle the project had is found, and none where there is none."""
    import tempfile

    def crate(files: dict[str, str]) -> list[tuple[str, list[str]]]:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "demo"
            for name, text in files.items():
                path = root / "src" / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            return [("::".join(p) or "crate", c) for p, c, _ in circles(root)]

    # None: a chain; tests, doc links and comments make no edge; a parent and its child are one.
    assert crate({
        "lib.rs": "pub mod a;\npub mod b;\npub mod c;\npub use a::A;\n",
        "a.rs": "use crate::b::B;\n/// [`crate::c`] is only named.\npub struct A;\n",
        "b/mod.rs": "mod inner;\npub use inner::X;\npub struct B;\n",
        "b/inner.rs": "use super::B;\npub struct X;\nfn f() { crate::c::g(); }\n",
        "c.rs": "pub fn g() {}\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n"
                "#[cfg(test)]\nmod more;\n",
        "c/more.rs": "use crate::a::A;\n",
    }) == []
    # The binary's: grouped imports through four modules (commands -> serve -> scheduler ->
    # schedules -> commands).
    assert crate({
        "main.rs": "mod commands;\nmod serve;\nmod scheduler;\nmod schedules;\n",
        "commands.rs": "use crate::{cli, serve::{self, Tasks}};\n",
        "serve.rs": "use crate::{\n    config::Config,\n    scheduler::{run, Settings as S},\n};\n",
        "scheduler.rs": "pub fn run() { crate::schedules::apply(); }\n",
        "schedules.rs": "use crate::commands::rfc3339;\n",
    }) == [("crate", ["commands", "scheduler", "schedules", "serve"])]
    # The domain's results: two siblings below the root, through `super::`.
    assert crate({
        "lib.rs": "pub mod results;\n",
        "results/mod.rs": "mod decision;\nmod report;\npub use report::Report;\n",
        "results/decision.rs": "use super::report::{MetricReport, Report};\n",
        "results/report.rs": "use super::{decision::Decision, stats};\n",
    }) == [("results", ["decision", "report"])]
    # The domain's top level: a chain into a pair (catalog -> results -> ports <-> people),
    # one edge from a nested file, one from a path in code.
    assert crate({
        "lib.rs": "pub mod catalog;\npub mod people;\npub mod ports;\npub mod results;\n",
        "catalog/mod.rs": "pub mod build;\n",
        "catalog/build.rs": "use crate::results::stats::ALPHA;\n",
        "results.rs": "pub fn f(p: &dyn crate::ports::Source) {}\n",
        "ports.rs": "use crate::people::Person;\n",
        "people.rs": "pub struct Person;\nimpl Person { fn f(&self) -> crate::ports::Error { todo!() } }\n",
    }) == [("crate", ["people", "ports"])]
    # The store's: `use super::{...}` between two top-level modules, and `self::` inside one.
    assert crate({
        "lib.rs": "mod schema;\nmod types;\n",
        "schema.rs": "use super::types::{Id, Time};\nuse self::inner::X;\nmod inner { pub struct X; }\n",
        "types.rs": "use super::{schema, Other};\n",
    }) == [("crate", ["schema", "types"])]
    print("module_cycles: self-test passed (5 cases)")


def main(args: list[str]) -> int:
    if args == ["--self-test"]:
        self_test()
        return 0
    crates = [Path(a) for a in args] or sorted(Path("crates").iterdir())
    failed = False
    count = 0
    for crate in crates:
        if not (crate / "src").is_dir():
            continue
        count += 1
        for parent, component, where in circles(crate):
            failed = True
            at = "::".join(parent) or "the crate root"
            print(f"{crate.name}: at {at}, module circle among {', '.join(component)}")
            for line in where:
                print(f"    {line}")
    if not failed:
        print(f"module_cycles: no circle among the modules of {count} crates, at any level")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
