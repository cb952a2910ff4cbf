//! Operators' tools through the binary: `flowgate explain` and the admin explain endpoint
//! (D18), `flowgate import --dry-run` (D19).

use serde_json::{json, Value};

use crate::fixtures;
use flowgate_domain::ports::CatalogSource;
use flowgate_store::Backend;

use crate::support::{http, run, Served};

const TOKEN: &str = "operators-test-token-0123456789abcdef";

fn explain_path(placement: &str) -> String {
    format!(
        "/admin/v1/apps/{}/placements/{placement}/explain",
        fixtures::APP1
    )
}

fn body(user: &str, country: &str) -> String {
    json!({"user_id": user, "session_id": "s1", "device_platform": "ios", "attributes": {"country": country}})
        .to_string()
}

/// The admin endpoint's `result` is resolve's body, byte for byte; `flowgate explain` on the
/// stored catalog answers the same; bad input and unknown apps have their exit codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_answers_what_resolve_answers_on_the_admin_listener_and_the_command_line() {
    let s = Served::start_on(Backend::Sqlite, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .unwrap();
    let env = [("FLOWGATE__DATABASE__URL", s.db.url.as_str())];
    for (placement, user, country, reason) in [
        ("onboarding", "u1", "US", "rule"),
        ("onboarding", "u1", "DE", "default"),
        ("paywall", "u1", "DE", "holdout"),
        ("empty", "u1", "DE", "no_rule_matched"),
        ("missing", "u1", "DE", "unknown_placement"),
    ] {
        let request = body(user, country);
        let resolve = format!("/v1/apps/{}/placements/{placement}/resolve", fixtures::APP1);
        let (status, resolved) =
            http(s.api, "POST", &resolve, Some(&s.key), request.as_bytes()).unwrap();
        assert_eq!(status, 200, "{resolved}");
        let explain = explain_path(placement);
        let (status, explained) =
            http(s.admin, "POST", &explain, Some(TOKEN), request.as_bytes()).unwrap();
        assert_eq!(status, 200, "{explained}");
        assert!(
            explained.starts_with(&format!("{{\"result\":{resolved},")),
            "{placement}: {explained}"
        );
        let doc: Value = serde_json::from_str(&explained).unwrap();
        assert_eq!(doc["reason"], reason, "{placement}/{country}");

        let (code, out, err) = run(
            &[
                "explain",
                "--app",
                fixtures::APP1,
                "--placement",
                placement,
                "--body",
                &request,
                "--json",
            ],
            &env,
        );
        assert_eq!(code, Some(0), "{err}");
        let cli: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(cli, doc, "the command line explains as the endpoint does");
    }
    // An SDK key is not the admin token.
    let explain = explain_path("onboarding");
    let (status, _) = http(
        s.admin,
        "POST",
        &explain,
        Some(&s.key),
        body("u1", "US").as_bytes(),
    )
    .unwrap();
    assert_eq!(status, 401);

    let (code, out, _) = run(
        &[
            "explain",
            "--app",
            fixtures::APP1,
            "--placement",
            "onboarding",
            "--body",
            &body("u1", "DE"),
        ],
        &env,
    );
    assert_eq!(code, Some(0));
    assert!(
        out.contains(r#"rule 0: audience did not match at clause 0 {"country":{"$in":["US","CA"]}}: saw country = "DE""#),
        "{out}"
    );
    assert!(out.trim_end().ends_with("reason: default"), "{out}");
    let (code, _, err) = run(
        &[
            "explain",
            "--app",
            fixtures::APP1,
            "--placement",
            "onboarding",
            "--body",
            r#"{"user_id": 7}"#,
        ],
        &env,
    );
    assert_eq!(code, Some(4), "invalid input: {err}");
    assert!(err.contains("user_id: must be a string"), "{err}");
    let (code, _, _) = run(
        &[
            "explain",
            "--app",
            "20000000-0000-4000-8000-0000000000ff",
            "--placement",
            "onboarding",
            "--body",
            &body("u1", "US"),
        ],
        &env,
    );
    assert_eq!(code, Some(5), "unknown app");
}

/// Without `admin.token` the endpoint does not exist; a short token is a configuration error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_needs_a_strong_token() {
    let s = Served::start_on(Backend::Sqlite, &[]).await.unwrap();
    let explain = explain_path("onboarding");
    let (status, _) = http(
        s.admin,
        "POST",
        &explain,
        Some(TOKEN),
        body("u1", "US").as_bytes(),
    )
    .unwrap();
    assert_eq!(status, 404);
    let (code, _, err) = run(
        &["migrate"],
        &[
            ("FLOWGATE__DATABASE__URL", s.db.url.as_str()),
            ("FLOWGATE__ADMIN__TOKEN", "short"),
        ],
    );
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("admin.token") && !err.contains("short"),
        "{err}"
    );
}

/// `import --dry-run` prints the exact share of users a reweight moves and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_shows_who_moves_and_writes_nothing() {
    let s = Served::start_on(Backend::Sqlite, &[]).await.unwrap();
    let before = s.db.store.load_catalog().await.unwrap().revision;
    let mut doc = fixtures::catalog_json();
    let variants =
        &mut doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["experiment"]["variants"];
    variants[0]["weight"] = json!(7);
    variants[1]["weight"] = json!(3);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("reweight.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let env = [("FLOWGATE__DATABASE__URL", s.db.url.as_str())];
    let (code, out, err) = run(&["import", "--dry-run", file.to_str().unwrap()], &env);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("dry run, nothing written"), "{out}");
    assert!(
        out.contains("change variant 20.00%, enter 0.00%, leave 0.00%, keep variant 80.00%"),
        "{out}"
    );
    assert!(
        out.contains("control 50.00% -> 70.00%; new 50.00% -> 30.00%"),
        "{out}"
    );
    let (code, out, _) = run(
        &["import", "--dry-run", "--json", file.to_str().unwrap()],
        &env,
    );
    assert_eq!(code, Some(0));
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["experiments"][0]["change_variant"], 0.2);
    assert_eq!(report["changed"], true);
    assert_eq!(
        s.db.store.load_catalog().await.unwrap().revision,
        before,
        "nothing written"
    );
    // Invalid files fail as the import does.
    std::fs::write(&file, "{\"workspaces\": 1}").unwrap();
    let (code, _, _) = run(&["import", "--dry-run", file.to_str().unwrap()], &env);
    assert_eq!(code, Some(4));
}
