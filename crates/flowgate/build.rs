//! The release's commit, for `flowgate --version` and the `flowgate_build_info` metric (D26):
//! `FLOWGATE_BUILD_COMMIT` when set (an image built from a source tree without `.git`), else
//! `git rev-parse HEAD` of the checkout, else `unknown`.

use std::process::Command;

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
                    println!("cargo:rerun-if-changed={file}");
                }
            }
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                if let Some(file) = git(&["rev-parse", "--git-path", &branch]) {
                    println!("cargo:rerun-if-changed={file}");
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"])
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=FLOWGATE_COMMIT={commit}");
}
