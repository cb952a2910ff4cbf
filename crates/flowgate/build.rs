//! The release's commit, for `flowgate --version` and the `flowgate_build_info` metric (D26):
//! `FLOWGATE_BUILD_COMMIT` when set (an image built from a source tree without `.git`), else
//! `git rev-parse HEAD` of the checkout, else `unknown`.

use std::path::Path;
use std::process::Command;

/// Asks cargo to rerun this script when `file` changes, if it exists. Cargo reruns a build
/// script on every build while a file it watches is missing, and the binary is then relinked
/// each time (issue 65): a checkout need not have `packed-refs`, nor a loose file for its
/// branch. A watched file removed later still counts as a change.
fn watch_if_present(file: &Path) -> bool {
    let present = file.exists();
    if present {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    present
}

/// Watches the branch's ref file `file`; when the branch lives only in `packed-refs` (no loose
/// file), the nearest directory under `refs` that exists on the way to it instead, so that the
/// loose file the next commit writes there is seen (cargo watches a directory's files). Never a
/// directory above `refs`: cargo would scan the whole repository, objects and all.
fn watch_ref(file: &Path) {
    if watch_if_present(file) {
        return;
    }
    let under_refs = |dir: &&Path| dir.components().any(|c| c.as_os_str() == "refs");
    if let Some(dir) = file
        .ancestors()
        .skip(1)
        .take_while(under_refs)
        .find(|dir| dir.is_dir())
    {
        println!("cargo:rerun-if-changed={}", dir.display());
    }
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=FLOWGATE_BUILD_COMMIT");
    let commit = std::env::var("FLOWGATE_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| {
            // Built again when HEAD moves: HEAD itself, and the branch file it names.
            for path in ["HEAD", "packed-refs"] {
                if let Some(file) = git(&["rev-parse", "--git-path", path]) {
                    watch_if_present(Path::new(&file));
                }
            }
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                if let Some(file) = git(&["rev-parse", "--git-path", &branch]) {
                    watch_ref(Path::new(&file));
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"])
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=FLOWGATE_COMMIT={commit}");
}
