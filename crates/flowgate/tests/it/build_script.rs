//! Issue 65: the binary's build script (`build.rs`, the commit of `flowgate --version`) must
//! not make cargo rerun it, and relink the binary, on every build. Cargo reruns a build script
//! whenever a file it was asked to watch is missing, and a checkout need not have
//! `.git/packed-refs` nor a loose file for its branch. The script is built here in a small
//! crate of its own, in a fresh repository, with a target directory of its own.

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `cargo build -v` of the probe: whether the build script ran, and the commit it printed.
fn build(dir: &Path) -> (bool, String) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args(["build", "-v", "--offline"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("FLOWGATE_BUILD_COMMIT")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "cargo build: {stderr}");
    let ran = stderr.contains("build-script-build`");
    let printed = Command::new(dir.join("target/debug/probe"))
        .output()
        .unwrap();
    (
        ran,
        String::from_utf8_lossy(&printed.stdout).trim().to_owned(),
    )
}

fn head(dir: &Path) -> String {
    let out = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Issue 65: every dependency of every crate of the workspace is declared once, in the root
/// `Cargo.toml`'s `[workspace.dependencies]`, and taken with `workspace = true` (a crate's
/// dependency on itself, which turns on its own test features for its tests, aside): one place
/// says which version the workspace builds and why.
#[test]
fn every_crate_takes_its_dependencies_from_the_workspace() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut outside = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let manifest = entry.unwrap().path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        let mut in_dependencies = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                in_dependencies = line.trim_end_matches(']').ends_with("dependencies");
                continue;
            }
            let Some((name, value)) = line.split_once('=') else {
                continue;
            };
            if !in_dependencies || line.starts_with('#') {
                continue;
            }
            let (name, value) = (name.trim(), value.trim());
            let from_workspace = name.ends_with(".workspace") || value.contains("workspace = true");
            let itself = value.contains("path = \".\"");
            if !from_workspace && !itself {
                outside.push(format!("{}: {line}", manifest.display()));
            }
        }
    }
    assert!(
        outside.is_empty(),
        "declared outside [workspace.dependencies]:\n{}",
        outside.join("\n")
    );
}

#[test]
fn the_build_script_reruns_when_head_moves_and_only_then() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"probe\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::create_dir(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("src/main.rs"),
        "fn main() { println!(\"{}\", env!(\"FLOWGATE_COMMIT\")); }\n",
    )
    .unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("build.rs"),
        dir.join("build.rs"),
    )
    .unwrap();
    std::fs::write(dir.join(".gitignore"), "target/\n").unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "one"]);
    assert!(
        !dir.join(".git/packed-refs").exists(),
        "a fresh repository has no packed-refs"
    );

    let (ran, commit) = build(dir);
    assert!(ran);
    assert_eq!(commit, head(dir));
    let (ran, _) = build(dir);
    assert!(!ran, "nothing changed: the build script does not run again");

    // A commit moves the branch: built again, with the new commit.
    git(dir, &["commit", "-q", "--allow-empty", "-m", "two"]);
    let (ran, commit) = build(dir);
    assert!(ran && commit == head(dir), "{commit}");
    assert!(!build(dir).0);

    // The branch only in packed-refs (no loose file): still fresh when nothing moves, and the
    // next commit (which writes the loose file again) is seen.
    git(dir, &["pack-refs", "--all"]);
    assert!(!dir.join(".git/refs/heads/main").exists());
    build(dir);
    assert!(!build(dir).0, "fresh with the branch packed");
    git(dir, &["commit", "-q", "--allow-empty", "-m", "three"]);
    let (ran, commit) = build(dir);
    assert!(ran && commit == head(dir), "{commit}");
}
