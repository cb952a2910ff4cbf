//! OFREP checked against OpenFeature's own providers, not our reading of the spec (D32):
//! `@openfeature/ofrep-provider` with `@openfeature/server-sdk` on Node, and
//! `@openfeature/ofrep-web-provider` with `@openfeature/web-sdk` in headless Chromium, both run
//! by `reliability/ofrep-clients/evaluate.mjs` against this test's server. Every user's
//! answer through each provider must be what single resolve answers for the same identity,
//! with the reason and variant flowgate's own OFREP evaluation gives; the web provider, which
//! bulk-evaluates and answers from its cache, must also be answered 304 when it asks again
//! with the ETag it holds.
//!
//! Node.js 20 and `/usr/bin/chromium` (`make browser-up`) are required: the test fails, it
//! does not skip, without them.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{json, Value};

use crate::fixtures::*;
use crate::support::{on_sqlite, server, Backend, TestServer};

const FLAGS: [&str; 2] = ["paywall", "onboarding"];

/// The users: countries of `onboarding`'s US/CA rule and of its default, the `beta` group's
/// two members (outside the US and Canada), every platform.
fn users() -> Vec<Value> {
    let countries = ["US", "CA", "FR", "DE", "BR", "JP"];
    let platforms = ["ios", "android", "web"];
    let mut users: Vec<Value> = (0..58)
        .map(|n| {
            json!({
                "targetingKey": format!("user-{n}"),
                "session_id": format!("s-{n}"),
                "device_platform": platforms[n % platforms.len()],
                "country": countries[n % countries.len()],
            })
        })
        .collect();
    for (n, beta) in ["u-beta-1", "u-beta-2"].into_iter().enumerate() {
        users.push(json!({
            "targetingKey": beta, "session_id": format!("s-beta-{n}"),
            "device_platform": platforms[n], "country": "FR",
        }));
    }
    users
}

/// What a provider must answer for one user and flag: resolve's value, and the reason and
/// variant D32 derives from it (SPLIT and the variant inside an experiment, else
/// TARGETING_MATCH when a rule matched or DEFAULT, and the flow version).
#[derive(Debug, PartialEq)]
struct Expected {
    value: Value,
    reason: Value,
    variant: Value,
}

async fn expected(s: &TestServer, user: &Value, flag: &str) -> Expected {
    let resolve = json!({
        "user_id": user["targetingKey"], "session_id": user["session_id"],
        "device_platform": user["device_platform"],
        "attributes": {"country": user["country"]},
    });
    let resolved = s
        .post(
            &format!("/v1/apps/{APP1}/placements/{flag}/resolve"),
            &resolve,
        )
        .await;
    assert_eq!(resolved.status, 200, "{:?}", resolved.json());
    let value = resolved.json();
    let in_experiment = value["experiment_id"].is_string();
    let reason = if in_experiment {
        "SPLIT"
    } else if flag == "onboarding" && value["flow_id"] != FLOW_DEFAULT {
        "TARGETING_MATCH"
    } else {
        "DEFAULT"
    };
    let variant = if in_experiment {
        value["variant_id"].clone()
    } else {
        value["flow_version_id"].clone()
    };
    let expected = Expected {
        value,
        reason: json!(reason),
        variant,
    };
    // flowgate's own answer over plain HTTP, as the providers must see it.
    let evaluated = s
        .post(
            &format!("/v1/apps/{APP1}/ofrep/v1/evaluate/flags/{flag}"),
            &json!({ "context": user }),
        )
        .await
        .json();
    let direct = Expected {
        value: evaluated["value"].clone(),
        reason: evaluated["reason"].clone(),
        variant: evaluated.get("variant").cloned().unwrap_or(Value::Null),
    };
    assert_eq!(direct, expected, "flowgate's OFREP answer for {user}");
    expected
}

/// Runs `evaluate.mjs` with `input` on its standard input, off the server's runtime (the
/// script calls this very server), and returns what it printed.
async fn run_clients(input: Value) -> Value {
    let dir = flowgate_testkit::node_project("ofrep-clients");
    actix_web::rt::task::spawn_blocking(move || {
        flowgate_testkit::npm_ci(&dir);
        let mut child = Command::new("node")
            .arg("evaluate.mjs")
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node (Node.js 20 or later) must be installed to run the OFREP provider tests");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "evaluate.mjs failed: {stderr}");
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("evaluate.mjs printed no JSON ({e}); stderr: {stderr}"))
    })
    .await
    .unwrap()
}

/// Checks one provider's results against `want`: every user and flag answered exactly once
/// (per pass), with resolve's value, flowgate's reason and variant, and no error.
fn check(provider: &str, results: &[Value], want: &BTreeMap<(String, String), Expected>) {
    let mut seen = BTreeSet::new();
    for r in results {
        let user = r["user"].as_str().unwrap().to_owned();
        let flag = r["flag"].as_str().unwrap().to_owned();
        let pass = r.get("pass").and_then(Value::as_u64).unwrap_or(1);
        assert!(
            seen.insert((user.clone(), flag.clone(), pass)),
            "{provider}: {user} {flag} answered twice"
        );
        assert_eq!(
            r["errorCode"],
            Value::Null,
            "{provider}: {user} {flag}: {r}"
        );
        let e = &want[&(user.clone(), flag.clone())];
        let want = Expected {
            value: as_javascript_reads(&e.value),
            reason: e.reason.clone(),
            variant: e.variant.clone(),
        };
        let got = Expected {
            value: as_javascript_reads(&r["value"]),
            reason: r["reason"].clone(),
            variant: r["variant"].clone(),
        };
        assert_eq!(got, want, "{provider}: {user} {flag} (pass {pass})");
    }
    let passes = seen.iter().map(|(_, _, p)| *p).collect::<BTreeSet<_>>();
    assert_eq!(
        seen.len(),
        want.len() * passes.len(),
        "{provider}: every user and flag answered in every pass"
    );
}

on_sqlite!(openfeature_providers_get_resolves_assignment);

async fn openfeature_providers_get_resolves_assignment(backend: Backend) {
    let s = server!(backend);
    let users = users();
    let mut want = BTreeMap::new();
    for user in &users {
        for flag in FLAGS {
            let key = (
                user["targetingKey"].as_str().unwrap().to_owned(),
                flag.to_owned(),
            );
            want.insert(key, expected(&s, user, flag).await);
        }
    }
    // The users cover the experiment's two variants and each of onboarding's outcomes.
    let outcomes = |flag: &str| -> BTreeSet<(String, String)> {
        want.iter()
            .filter(|((_, f), _)| f == flag)
            .map(|(_, e)| {
                let id = |v: &Value| v.as_str().unwrap_or("null").to_owned();
                let which = if flag == "paywall" {
                    "variant_id"
                } else {
                    "flow_id"
                };
                (id(&e.reason), id(&e.value[which]))
            })
            .collect()
    };
    assert_eq!(
        outcomes("paywall"),
        BTreeSet::from([
            ("SPLIT".to_owned(), VAR_CONTROL.to_owned()),
            ("SPLIT".to_owned(), VAR_NEW.to_owned()),
        ])
    );
    assert_eq!(
        outcomes("onboarding"),
        BTreeSet::from([
            ("DEFAULT".to_owned(), FLOW_DEFAULT.to_owned()),
            ("TARGETING_MATCH".to_owned(), FLOW_NEW.to_owned()),
            ("TARGETING_MATCH".to_owned(), FLOW_US.to_owned()),
        ])
    );

    let started = Instant::now();
    let out = run_clients(json!({
        "baseUrl": s.base, "appId": APP1, "sdkKey": s.keys.sdk.expose(),
        "flags": FLAGS, "users": users,
    }))
    .await;
    eprintln!(
        "{} users x {} flags through both providers in {:?} (ms: {})",
        users.len(),
        FLAGS.len(),
        started.elapsed(),
        out["ms"]
    );

    check("server provider", out["server"].as_array().unwrap(), &want);
    // At flowgate's own origin, the web provider asked twice per user: the first answer with
    // an ETag, the second asked with it and answered 304 (the provider kept its cache, which
    // pass 2 checked).
    let requests = check_web("web provider", &out["web"], &want);
    assert_eq!(
        (count(&requests, 200, false), count(&requests, 304, true)),
        (users.len(), users.len()),
        "the web provider's bulk requests: {requests:?}"
    );
    // From another origin, through CORS (D11): the same answers, and the tag readable and
    // sendable there too (ETag exposed, If-None-Match allowed), so the repeats are 304.
    let requests = check_web("web provider (cross-origin)", &out["webCrossOrigin"], &want);
    assert_eq!(
        (count(&requests, 200, false), count(&requests, 304, true)),
        (users.len(), users.len()),
        "the cross-origin web provider's bulk requests: {requests:?}"
    );
}

/// `value` with every number as a JavaScript number (a double): the fixture's flow schema
/// holds an integer beyond 2^53 (12345678901234567890), which flowgate passes through as
/// written and `JSON.parse` rounds, in any JavaScript client.
fn as_javascript_reads(value: &Value) -> Value {
    match value {
        Value::Number(n) => n.as_f64().map_or(Value::Null, Value::from),
        Value::Array(items) => items.iter().map(as_javascript_reads).collect(),
        Value::Object(members) => Value::Object(
            members
                .iter()
                .map(|(k, v)| (k.clone(), as_javascript_reads(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Checks one run of the web provider (no error, every answer as `want`) and returns its bulk
/// requests, each successful.
fn check_web(
    provider: &str,
    out: &Value,
    want: &BTreeMap<(String, String), Expected>,
) -> Vec<Value> {
    assert_eq!(out["errors"], json!([]), "{provider}: errors");
    check(provider, out["results"].as_array().unwrap(), want);
    let requests = out["requests"].as_array().unwrap().clone();
    assert!(
        requests.len() >= want.len() / FLAGS.len()
            && requests
                .iter()
                .all(|r| r["status"] == 200 || r["status"] == 304),
        "{provider}: bulk requests {requests:?}"
    );
    requests
}

/// How many of `requests` were answered `status`, with an `If-None-Match` or without.
fn count(requests: &[Value], status: u64, conditional: bool) -> usize {
    requests
        .iter()
        .filter(|r| r["status"] == status && r["ifNoneMatch"].is_string() == conditional)
        .count()
}
