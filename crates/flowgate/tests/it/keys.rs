//! `flowgate keys` through the real binary for webhook keys (D30): `keys create --type webhook`
//! prints the key once, `keys list` shows its type, `keys revoke` revokes it; and a running
//! server picks it up from the store and refuses it on the SDK routes.

use std::time::{Duration, Instant};

use flowgate_store::Backend;
use serde_json::{json, Value};

use crate::fixtures;
use crate::support::{http, run, Served};

fn json_of(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// `keys create --type webhook`, `keys list` (JSON and table) and `keys revoke` on the store of
/// `s`, beside the SDK key `Served` created.
async fn create_list_revoke(s: &Served) {
    let env = [("FLOWGATE__DATABASE__URL", s.db.url.as_str())];
    let (code, out, err) = run(
        &[
            "keys",
            "create",
            "--workspace",
            fixtures::WS1,
            "--env",
            "test",
            "--type",
            "webhook",
            "--json",
        ],
        &env,
    );
    assert_eq!(code, Some(0), "{err}");
    let created = json_of(&out);
    assert_eq!(created["type"], "webhook", "{created}");
    assert_eq!(created["environment"], "test");
    assert_eq!(
        created["name"], "webhook key",
        "the default name says the type"
    );
    assert_eq!(created["revoked_at"], Value::Null);
    let key = created["key"].as_str().unwrap().to_owned();
    assert!(key.starts_with("fg_test_"), "{key}");
    let id = created["id"].as_str().unwrap().to_owned();

    let list = |json: bool| {
        let mut args = vec!["keys", "list", "--workspace", fixtures::WS1];
        if json {
            args.push("--json");
        }
        let (code, out, err) = run(&args, &env);
        assert_eq!(code, Some(0), "{err}");
        out
    };
    let listed = json_of(&list(true));
    let types: Vec<(&str, &str)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["type"].as_str().unwrap(), k["id"].as_str().unwrap()))
        .collect();
    assert_eq!(types.len(), 2, "{listed}");
    assert_eq!(types[0].0, "sdk", "the SDK key, created first");
    assert_eq!(types[1], ("webhook", id.as_str()));
    // Listed as created, without the key (`created_at` is stored to the microsecond).
    let mut expected = created.clone();
    let mut seen = listed[1].clone();
    for member in ["key", "created_at"] {
        expected.as_object_mut().unwrap().remove(member);
        seen.as_object_mut().unwrap().remove(member);
    }
    assert_eq!(seen, expected);
    assert!(!list(true).contains(&key), "never the key itself");
    let table = list(false);
    let line = table.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(
        line.contains(" webhook ") && line.ends_with("active"),
        "{table}"
    );
    assert!(!table.contains(&key));

    // Revoked by its id, like any key.
    let (code, out, err) = run(&["keys", "revoke", &id, "--json"], &env);
    assert_eq!(code, Some(0), "{err}");
    let revoked = json_of(&out);
    assert_eq!(
        (revoked["id"].as_str(), revoked["type"].as_str()),
        (Some(id.as_str()), Some("webhook"))
    );
    assert!(revoked["revoked_at"].is_string(), "{revoked}");
    let listed = json_of(&list(true));
    assert_eq!(listed[1]["revoked_at"], revoked["revoked_at"]);
    assert!(
        list(false)
            .lines()
            .any(|l| l.starts_with(&id) && l.ends_with("revoked")),
        "{}",
        list(false)
    );
    // Both recorded in the audit log as done from the command line (D28).
    let audit = crate::people::audit_cli(s, &["--actor", "cli"]);
    for action in ["key.create", "key.revoke"] {
        assert!(
            crate::people::has(&audit, "cli", action, Some(&id)),
            "{action} of {id}: {audit:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_create_list_and_revoke_a_webhook_key_sqlite() {
    let s = Served::start_on(Backend::Sqlite, &[]).await.unwrap();
    create_list_revoke(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_create_list_and_revoke_a_webhook_key_postgres() {
    let Some(s) = Served::start_on(Backend::Postgres, &[]).await else {
        return;
    };
    create_list_revoke(&s).await;
}

/// The code of the problem a resolve with `key` answers, waiting (D12: within the refresh
/// interval) until it is `wanted`.
async fn resolve_answers(s: &Served, key: &str, wanted: &str) {
    let path = format!("/v1/apps/{}/placements/onboarding/resolve", fixtures::APP1);
    let body = json!({"user_id": "u", "session_id": "s", "device_platform": "ios"}).to_string();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, answer) = http(s.api, "POST", &path, Some(key), body.as_bytes()).unwrap();
        let code = serde_json::from_str::<Value>(&answer)
            .ok()
            .and_then(|v| v["code"].as_str().map(str::to_owned));
        if status == 401 && code.as_deref() == Some(wanted) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "resolve with the webhook key never answered 401 {wanted}: {status} {answer}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The running server loads the webhook key from its table and refuses it on the SDK routes
/// as a key of another type; once revoked, as an unknown key. The SDK key keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_webhook_key_is_refused_on_the_sdk_routes() {
    let s = Served::start_on(Backend::Sqlite, &[]).await.unwrap();
    let env = [("FLOWGATE__DATABASE__URL", s.db.url.as_str())];
    let (code, out, err) = run(
        &[
            "keys",
            "create",
            "--workspace",
            fixtures::WS1,
            "--env",
            "test",
            "--type",
            "webhook",
            "--name",
            "revenuecat",
            "--json",
        ],
        &env,
    );
    assert_eq!(code, Some(0), "{err}");
    let created = json_of(&out);
    let key = created["key"].as_str().unwrap();
    resolve_answers(&s, key, "key_type_not_allowed").await;

    let (code, _, err) = run(&["keys", "revoke", created["id"].as_str().unwrap()], &env);
    assert_eq!(code, Some(0), "{err}");
    resolve_answers(&s, key, "invalid_api_key").await;

    let path = format!("/v1/apps/{}/placements/onboarding/resolve", fixtures::APP1);
    let body = json!({"user_id": "u", "session_id": "s", "device_platform": "ios"}).to_string();
    let (status, answer) = http(s.api, "POST", &path, Some(&s.key), body.as_bytes()).unwrap();
    assert_eq!(status, 200, "{answer}");
}
