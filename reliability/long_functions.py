#!/usr/bin/env python3
"""Fails when a function outside tests is longer than 120 lines (issue 66).

`make lint` runs it over every crate's `src/` (benches, examples, `tests/` folders and
`#[cfg(test)]` modules are tests or tools, and left out). A function's length is its lines from
the line of `fn` to the line of its closing brace, comments and blank lines included: what a
reader scrolls through. Braces inside string and character literals and comments are skipped
when the body is matched. Every function over the limit is printed as `file:line name: N lines`
and the exit status is 1.

Why not clippy's `too_many_lines`: it counts code lines only, so a function of 200 lines with
80 of comments passes it. Usage: `python3 reliability/long_functions.py [--self-test]`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

LIMIT = 120
FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")
CFG_TEST_BLOCK = re.compile(
    r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{"
)
CFG_TEST_FILE = re.compile(
    r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;"
)


def blank_literals(text: str) -> str:
    """`text` with comments, strings (raw ones too) and character literals replaced by spaces,
    newlines kept, so that braces in them are not counted and line numbers stay."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j == -1 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j == -1 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r(#*)"', text[i:]) and not re.match(r"\w", text[i - 1 : i] or " "):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = '"' + hashes
            j = text.find(end, i + 2 + len(hashes))
            j = n if j == -1 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and re.match(r"'(\\.|[^\\'\n])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", text[i:]):
            m = re.match(r"'(\\.|[^\\'\n])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", text[i:])
            out.append(" " * len(m.group(0)))
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def blank_tests(text: str) -> str:
    """`text` (literals blanked) with its `#[cfg(test)] mod x { ... }` blocks blanked."""
    out = list(text)
    for match in CFG_TEST_BLOCK.finditer(text):
        depth, i = 1, match.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        for k in range(match.start(), i):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


def long_functions(text: str) -> list[tuple[int, str, int]]:
    """Each function of `text` longer than the limit: its first line, name and length."""
    code = blank_tests(blank_literals(text))
    found = []
    for match in FN.finditer(code):
        # The body starts at the first `{` after the signature, unless a `;` ends it first (a
        # trait method without a body).
        i = match.end()
        depth_paren = 0
        while i < len(code):
            ch = code[i]
            if ch in "(<[":
                depth_paren += 1
            elif ch in ")>]":
                depth_paren -= 1
            elif ch == ";" and depth_paren <= 0:
                break
            elif ch == "{" and depth_paren <= 0:
                break
            i += 1
        if i >= len(code) or code[i] != "{":
            continue
        depth, j = 1, i + 1
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        first = code.count("\n", 0, match.start()) + 1
        last = code.count("\n", 0, j - 1) + 1
        if last - first + 1 > LIMIT:
            found.append((first, match.group(1), last - first + 1))
    return found


def test_files(src: Path) -> set[Path]:
    """The files of modules declared `#[cfg(test)] mod x;`."""
    out = set()
    for path in src.rglob("*.rs"):
        for match in CFG_TEST_FILE.finditer(blank_literals(path.read_text())):
            stem = path.parent if path.name in ("mod.rs", "lib.rs", "main.rs") else path.with_suffix("")
            out.add(stem / f"{match.group(1)}.rs")
            out.add(stem / match.group(1) / "mod.rs")
    return out


def self_test() -> None:
    short = "fn a() {\n" + "    let x = 1;\n" * 10 + "}\n"
    long = "pub fn b(x: u8) -> u8 {\n" + '    let s = "}}}";\n' * (LIMIT - 1) + "}\n"
    tests = "#[cfg(test)]\nmod tests {\n" + long.replace("fn b", "fn c") + "}\n"
    trait_ = "trait T {\n    fn d(&self);\n}\n"
    found = long_functions(short + long + tests + trait_)
    assert found == [(13, "b", LIMIT + 1)], found
    assert long_functions("fn e() { let c = '{'; }\n" + short) == []
    print("long_functions: self-test passed")


def main(args: list[str]) -> int:
    if args == ["--self-test"]:
        self_test()
        return 0
    failed = []
    for crate in sorted(Path("crates").iterdir()):
        src = crate / "src"
        if not src.is_dir():
            continue
        skip = test_files(src)
        for path in sorted(src.rglob("*.rs")):
            if path in skip:
                continue
            for line, name, length in long_functions(path.read_text()):
                failed.append(f"{path}:{line} {name}: {length} lines")
    for line in failed:
        print(line)
    if failed:
        print(f"long_functions: {len(failed)} functions over {LIMIT} lines")
        return 1
    print(f"long_functions: no function over {LIMIT} lines outside tests")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
