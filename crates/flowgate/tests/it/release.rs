//! Which release runs (D26): `flowgate --version` names the version and the commit it was built
//! from, and every replica says so in `flowgate_build_info`.

use std::process::Command;

use flowgate_store::Backend;

use crate::support::{flowgate, Served};

/// The checkout's commit, as the build script reads it.
fn head() -> String {
    let out = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("git runs");
    assert!(out.status.success(), "the tests run in a git checkout");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn the_version_names_the_release_and_its_commit() {
    let out = flowgate().arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.trim(),
        format!("flowgate {} (commit {})", env!("CARGO_PKG_VERSION"), head())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_says_which_release_it_runs() {
    let s = Served::start_on(Backend::Sqlite, &[]).await.unwrap();
    let series = format!(
        "flowgate_build_info{{version=\"{}\",commit=\"{}\"}}",
        env!("CARGO_PKG_VERSION"),
        head()
    );
    assert_eq!(s.metric(&series), Some(1.0), "{series}");
}
