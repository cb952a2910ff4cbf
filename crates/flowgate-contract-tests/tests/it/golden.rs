//! The golden samples of the formats that outlive a process (D26), under the repository's
//! `formats/<format>/v<N>/<file>`, are never rewritten: `formats/MANIFEST.sha256` lists each
//! with its SHA-256 (`sha256sum`'s output, paths relative to `formats/`, sorted by path; check
//! it by hand with `cd formats && sha256sum -c MANIFEST.sha256`). This test fails when a listed
//! sample changed or is missing, or when a file under `formats/` is not listed. A new sample
//! gets a new line (`WRITE_GOLDEN=1` prints it); a changed one is a mistake, never an update.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use flowgate_contract_tests::fixtures::{
    assert_golden, assert_golden_with, formats_dir, sha256_hex,
};

/// The manifest, and the one other file of `formats/` that is not a sample.
const MANIFEST: &str = "MANIFEST.sha256";
const README: &str = "README.md";

/// Every file under `dir`, as paths relative to `root` with `/` separators.
fn files_under(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(root, &path, out);
        } else {
            let relative = path.strip_prefix(root).unwrap();
            let parts: Vec<_> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.insert(parts.join("/"));
        }
    }
}

/// The manifest's lines as (checksum, path), or the problems of its lines.
fn manifest(text: &str, problems: &mut Vec<String>) -> Vec<(String, String)> {
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        // `sha256sum` writes `<hex>  <path>` (text mode) or `<hex> *<path>` (binary mode).
        let parsed = line
            .split_once("  ")
            .or_else(|| line.split_once(" *"))
            .filter(|(sum, path)| {
                sum.len() == 64
                    && sum
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                    && !path.is_empty()
            });
        match parsed {
            Some((sum, path)) => lines.push((sum.to_owned(), path.to_owned())),
            None => problems.push(format!(
                "{MANIFEST} line {}: {line:?} is not `<sha256>  <path>`",
                n + 1
            )),
        }
    }
    lines
}

#[test]
fn every_golden_sample_is_listed_and_unchanged() {
    let root = formats_dir();
    let text = std::fs::read_to_string(root.join(MANIFEST))
        .unwrap_or_else(|e| panic!("{}: {e}", root.join(MANIFEST).display()));
    let mut problems = Vec::new();
    let listed = manifest(&text, &mut problems);
    let paths: Vec<&str> = listed.iter().map(|(_, p)| p.as_str()).collect();
    let mut sorted = paths.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted != paths {
        problems.push(format!(
            "{MANIFEST} must list each path once, sorted by path (append, then sort)"
        ));
    }
    for (sum, path) in &listed {
        let parts: Vec<&str> = path.split('/').collect();
        let versioned = parts.len() >= 3
            && parts[1]
                .strip_prefix('v')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !versioned {
            problems.push(format!(
                "{path}: a sample lives at <format>/v<N>/<file> (named by its version)"
            ));
        }
        match std::fs::read(root.join(path)) {
            Ok(bytes) => {
                let actual = sha256_hex(&bytes);
                if &actual != sum {
                    problems.push(format!(
                        "{path} changed (sha256 {actual}, listed {sum}): a golden sample is never rewritten; restore it, and write a new sample for a new version"
                    ));
                }
            }
            Err(e) => problems.push(format!("{path} is listed but cannot be read: {e}")),
        }
    }
    let mut present = BTreeSet::new();
    files_under(&root, &root, &mut present);
    let listed_paths: BTreeSet<&str> = paths.iter().copied().collect();
    for path in &present {
        if path != MANIFEST && path != README && !listed_paths.contains(path.as_str()) {
            let sum = sha256_hex(&std::fs::read(root.join(path)).unwrap());
            problems.push(format!(
                "{path} is not in {MANIFEST}: add `{sum}  {path}` (keep the lines sorted)"
            ));
        }
    }
    assert!(problems.is_empty(), "formats/:\n{}", problems.join("\n"));
}

#[test]
fn the_manifest_parser_and_checks_catch_each_kind_of_problem() {
    let mut problems = Vec::new();
    let lines = manifest(
        &format!(
            "{}  a/v1/x.json\n{} *b/v2/y.txt\nnot a line\n",
            "0".repeat(64),
            "a".repeat(64)
        ),
        &mut problems,
    );
    assert_eq!(
        lines,
        vec![
            ("0".repeat(64), "a/v1/x.json".to_owned()),
            ("a".repeat(64), "b/v2/y.txt".to_owned())
        ]
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("flowgate-golden-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn an_existing_sample_is_never_rewritten() {
    let dir = scratch("existing");
    let path = dir.join("sample.json");
    std::fs::write(&path, b"{\"v\":1}").unwrap();
    // The former switch, and the writing one: neither rewrites an existing sample.
    std::env::set_var("UPDATE_GOLDEN", "1");
    let differs = std::panic::catch_unwind(|| assert_golden(&path, b"{\"v\":2}", "test.v1+json"));
    assert!(
        differs.is_err(),
        "a changed sample fails, UPDATE_GOLDEN or not"
    );
    let writing =
        std::panic::catch_unwind(|| assert_golden_with(&path, b"{\"v\":2}", "test.v1+json", true));
    assert!(writing.is_err(), "writing is for missing samples only");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"{\"v\":1}",
        "left as it was"
    );
    // The same bytes pass.
    assert_golden(&path, b"{\"v\":1}", "test.v1+json");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_missing_sample_is_written_only_when_asked() {
    let dir = scratch("missing");
    let path = dir.join("v1").join("sample.json");
    let refused =
        std::panic::catch_unwind(|| assert_golden_with(&path, b"[]", "test.v1+json", false));
    assert!(
        refused.is_err(),
        "a missing sample fails without WRITE_GOLDEN=1"
    );
    assert!(!path.exists());
    assert_golden_with(&path, b"[]", "test.v1+json", true);
    assert_eq!(std::fs::read(&path).unwrap(), b"[]");
    let _ = std::fs::remove_dir_all(dir);
}
