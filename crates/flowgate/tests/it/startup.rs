//! Start-up refuses what production must not run with (issue 6).

use std::process::Command;

fn flowgate() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_flowgate"));
    cmd.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    for (key, _) in std::env::vars() {
        if key.starts_with("FLOWGATE") {
            cmd.env_remove(key);
        }
    }
    cmd
}

#[test]
fn production_refuses_a_test_key_environment() {
    let out = flowgate()
        .args(["--env", "production", "serve"])
        .env(
            "FLOWGATE__DATABASE__URL",
            "postgres://fg:s3cret@127.0.0.1:1/fg",
        )
        .env("FLOWGATE__AUTH__KEY_ENVIRONMENT", "test")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("auth.key_environment") && stderr.contains("live"),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret"));
}

#[test]
fn production_refuses_to_start_without_a_store_url() {
    let out = flowgate()
        .env("FLOWGATE_ENV", "production")
        .arg("serve")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("database.url") && stderr.contains("required in production"),
        "{stderr}"
    );
}

#[test]
fn every_command_has_help_and_usage_errors_exit_2() {
    for args in [
        vec!["--help"],
        vec!["serve", "--help"],
        vec!["migrate", "--help"],
        vec!["import", "--help"],
        vec!["keys", "create", "--help"],
        vec!["keys", "revoke", "--help"],
        vec!["keys", "list", "--help"],
        vec!["demo", "--help"],
    ] {
        let out = flowgate().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage"),
            "{args:?}"
        );
    }
    let out = flowgate()
        .args(["keys", "create", "--env", "prod"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn import_problems_exit_4_and_unknown_keys_exit_5() {
    let dir = std::env::temp_dir().join(format!("flowgate-cli-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = format!("sqlite://{}/db.sqlite", dir.display());
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        r#"{"workspaces": [{"id": "not-a-uuid", "name": "x"}]}"#,
    )
    .unwrap();
    let out = flowgate()
        .args(["import", bad.to_str().unwrap(), "--json"])
        .env("FLOWGATE__DATABASE__URL", &db)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let problems: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(problems["problems"][0]["pointer"], "/workspaces/0/id");
    let out = flowgate()
        .args(["keys", "revoke", "00000000-0000-4000-8000-000000000099"])
        .env("FLOWGATE__DATABASE__URL", &db)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
