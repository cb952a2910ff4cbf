//! Start-up refuses what production must not run with (docs/configuration.md: the rules per
//! environment).

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
        vec!["catalog", "history", "--help"],
        vec!["catalog", "export", "--help"],
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
fn app_store_roots_or_a_demo_signer_that_cannot_be_read_stop_the_start_naming_the_file() {
    let dir =
        std::env::temp_dir().join(format!("flowgate-roots-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing.pem");
    let not_a_certificate = dir.join("key.pem");
    std::fs::write(
        &not_a_certificate,
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let serve = |stores: String| {
        let config = dir.join(format!("{}.toml", uuid::Uuid::new_v4().simple()));
        std::fs::write(&config, format!("[stores]\n{stores}\n")).unwrap();
        let out = flowgate()
            .args(["--config", config.to_str().unwrap(), "serve"])
            .env(
                "FLOWGATE__DATABASE__URL",
                format!("sqlite://{}/db.sqlite", dir.display()),
            )
            .env("FLOWGATE__SERVER__LISTEN", "127.0.0.1:0")
            .env("FLOWGATE__ADMIN__LISTEN", "127.0.0.1:0")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for (stores, key, file, reason) in [
        (
            format!(
                "apple_root_certificates = [{:?}]",
                missing.display().to_string()
            ),
            "stores.apple_root_certificates",
            &missing,
            "cannot read",
        ),
        (
            format!(
                "apple_root_certificates = [{:?}]",
                not_a_certificate.display().to_string()
            ),
            "stores.apple_root_certificates",
            &not_a_certificate,
            "not a CERTIFICATE",
        ),
        (
            format!(
                "demo_apple_signer = {:?}",
                not_a_certificate.display().to_string()
            ),
            "stores.demo_apple_signer",
            &not_a_certificate,
            "a signer has 4 PEM blocks",
        ),
    ] {
        let (code, stderr) = serve(stores);
        assert_eq!(code, Some(3), "{stderr}");
        assert!(
            stderr.contains(key)
                && stderr.contains(&file.display().to_string())
                && stderr.contains(reason),
            "{key}, {}, {reason} in {stderr}",
            file.display()
        );
    }
    // The store was never opened: the start stopped first.
    assert!(!dir.join("db.sqlite").exists());
    let _ = std::fs::remove_dir_all(&dir);
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

/// Request log lines are written by a background thread; the lines still queued when the
/// process shuts down (down to the last one, the drain report) reach stderr before it exits.
#[test]
fn request_lines_and_the_last_shutdown_line_are_logged() {
    let dir = std::env::temp_dir().join(format!("flowgate-logs-{}", uuid::Uuid::new_v4().simple()));
    let db = format!("sqlite://{}/flowgate.db", dir.display());
    let api = crate::support::free_port();
    let admin = crate::support::free_port();
    let child = flowgate()
        .arg("serve")
        .env("FLOWGATE__DATABASE__URL", &db)
        .env(
            "FLOWGATE__CATALOG__CACHE_PATH",
            dir.join("catalog-cache.json"),
        )
        .env("FLOWGATE__SERVER__LISTEN", format!("127.0.0.1:{api}"))
        .env("FLOWGATE__ADMIN__LISTEN", format!("127.0.0.1:{admin}"))
        .env("FLOWGATE__LOG__LEVEL", "info")
        .env("FLOWGATE__LOG__FORMAT", "json")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let admin_addr: std::net::SocketAddr = format!("127.0.0.1:{admin}").parse().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while crate::support::http(admin_addr, "GET", "/readyz", None, b"")
        .map(|(s, _)| s)
        .unwrap_or(0)
        != 200
    {
        assert!(std::time::Instant::now() < deadline, "not ready in 60 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let api_addr: std::net::SocketAddr = format!("127.0.0.1:{api}").parse().unwrap();
    // Answered requests are logged one line each (client errors are sampled: abuse.rs).
    for _ in 0..20 {
        let (status, _) =
            crate::support::http(api_addr, "GET", "/openapi.json", None, b"").unwrap();
        assert_eq!(status, 200);
    }
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let requests = lines
        .iter()
        .filter(|l| {
            l["message"] == "request" && l["status"] == 200 && l["route"] == "/openapi.json"
        })
        .count();
    assert_eq!(requests, 20, "one line per request:\n{stderr}");
    // The admin listener's routes carry their own label.
    assert!(
        lines
            .iter()
            .any(|l| l["message"] == "request" && l["route"] == "/readyz" && l["status"] == 200),
        "a /readyz line:\n{stderr}"
    );
    assert_eq!(
        lines.last().map(|l| l["message"].clone()),
        Some(serde_json::json!(
            "shutdown complete: every accepted event is stored"
        )),
        "the last line before exit is written:\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
