//! Node projects of the test suite under `reliability/` (the OpenID Connect provider, the
//! OpenFeature OFREP clients), installed with `npm ci` the first time a test needs them.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The folder of the workspace's Node project `name` (`reliability/<name>`).
pub fn node_project(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../reliability")
        .join(name)
}

/// `npm ci` into `dir` when its `node_modules` is missing or older than its lock file, under a
/// file lock: nextest runs each test in its own process, several at once. Panics when npm is
/// missing or fails: the tests that need the project must not pass without it.
pub fn npm_ci(dir: &Path) {
    let lock = std::fs::File::create(dir.join(".install.lock")).expect("the install lock file");
    lock.lock().expect("the install lock");
    let modified = |path: PathBuf| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let installed = modified(dir.join("node_modules/.package-lock.json"));
    let wanted = modified(dir.join("package-lock.json"))
        .unwrap_or_else(|| panic!("{}/package-lock.json", dir.display()));
    if installed.is_some_and(|installed| installed >= wanted) {
        return;
    }
    let status = Command::new("npm")
        .args([
            "ci",
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            "--loglevel=error",
        ])
        .current_dir(dir)
        .status()
        .expect("npm (Node.js 20 or later) must be installed to run this test");
    assert!(
        status.success(),
        "npm ci in {} failed: {status}",
        dir.display()
    );
}
