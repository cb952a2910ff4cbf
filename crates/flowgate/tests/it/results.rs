//! Experiment results (D22) through the binary: simulated users of the demo experiment sent
//! through the real API, the report read back with the CLI and the admin API, checked against
//! the stored rows; and a report that cannot finish in time while resolve and event writes go on.

use std::time::Duration;

use flowgate_store::Backend;
use serde_json::Value;

use crate::fixtures;
use crate::support::{event, http, resolve_onboarding, run, Served};

const TOKEN: &str = "results-admin-token-0123456789abcdef";
const DEMO_APP: &str = "d0000000-0000-4000-8000-0000000000a1";
const DEMO_EXPERIMENT: &str = "d0000000-0000-4000-8000-0000000000c1";
const NO_SUCH_EXPERIMENT: &str = "d0000000-0000-4000-8000-0000000000cf";

/// An admin API exchange with `token`: status and the body as JSON.
fn admin(s: &Served, path: &str, token: Option<&str>) -> (u16, Value) {
    let (status, body) = http(s.admin, "GET", path, token, b"").unwrap();
    (
        status,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

/// The number before `label` in `text` ("... 12 in the experiment, ...").
fn count_before(text: &str, label: &str) -> u64 {
    let at = text
        .find(label)
        .unwrap_or_else(|| panic!("{label:?} in {text}"));
    text[..at]
        .split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a number before {label:?} in {text}"))
}

/// One metric's figures by variant name (the report lists variants with ids).
fn metric_sums(report: &Value, metric: &str) -> Vec<(String, f64, u64)> {
    let names: std::collections::HashMap<&str, &str> = report["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["variant_id"].as_str().unwrap(),
                v["name"].as_str().unwrap(),
            )
        })
        .collect();
    let m = report["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == metric)
        .unwrap_or_else(|| panic!("metric {metric} in {report}"));
    m["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                names[v["variant_id"].as_str().unwrap()].to_owned(),
                v["sum"].as_f64().unwrap(),
                v["users"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn demo_traffic_reads_the_same_in_the_cli_and_the_admin_api_and_matches_the_stored_rows() {
    let s = Served::start_on(Backend::Sqlite, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .expect("SQLite needs no server");
    let api = s.api.to_string();
    let env = [
        ("FLOWGATE__DATABASE__URL", s.db.url.as_str()),
        ("FLOWGATE__SERVER__LISTEN", api.as_str()),
    ];

    let (code, out, err) = run(&["demo", "--traffic", "300", "--json"], &env);
    assert_eq!(code, Some(0), "demo --traffic: {err}");
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let exposed = count_before(&err, "in the experiment");
    let accepted = count_before(&err, "events accepted");
    assert_eq!(count_before(&err, "rejected"), 0, "{err}");
    assert!(
        exposed > 200,
        "most of the 300 users are in the experiment: {err}"
    );

    // The report against the rows as stored, counted with SQL of its own.
    assert_eq!(report["experiment_id"], DEMO_EXPERIMENT);
    assert_eq!(report["exposed_users"].as_u64(), Some(exposed), "{report}");
    // Only the demo's users sent events to this store.
    let stored = |event_type: &str| {
        format!("SELECT COUNT(*) AS n FROM analytics_events WHERE event_type = '{event_type}'")
    };
    assert_eq!(s.db.count(&stored("flow_open")).await as u64, exposed);
    let completes = metric_sums(&report, "flow_complete");
    let purchases = metric_sums(&report, "purchase_complete");
    let revenue = metric_sums(&report, "revenue");
    let total = |sums: &[(String, f64, u64)]| sums.iter().map(|(_, sum, _)| sum).sum::<f64>();
    assert_eq!(
        total(&completes),
        s.db.count(&stored("flow_complete")).await as f64
    );
    assert_eq!(
        total(&purchases),
        s.db.count(&stored("purchase_complete")).await as f64
    );
    assert_eq!(
        exposed as f64 + total(&completes) + total(&purchases),
        accepted as f64,
        "every accepted event is an exposure, a completion or a purchase"
    );
    // Each variant's revenue: its buyers at the demo's price.
    for (name, price) in [("control", 29.99), ("trial", 24.99)] {
        let buyers = purchases.iter().find(|(n, ..)| n == name).unwrap().1;
        let paid = revenue.iter().find(|(n, ..)| n == name).unwrap().1;
        assert!(
            (paid - buyers * price).abs() < 1e-6,
            "{name}: {paid} from {buyers} buyers at {price}"
        );
    }
    let by_variant: u64 = report["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["users"].as_u64().unwrap())
        .sum();
    assert_eq!(by_variant, exposed);

    // Both stores reported on the buyers (D30): the App Store's notifications signed by the
    // development config's demo root, which the server trusts; each buyer started a trial.
    let notifications = |source: &str| {
        format!("SELECT COUNT(*) AS n FROM store_notifications WHERE source = '{source}'")
    };
    let (apple, revenuecat) = (
        s.db.count(&notifications("apple")).await,
        s.db.count(&notifications("revenuecat")).await,
    );
    assert!(
        apple > 0 && revenuecat > 0,
        "{apple} from Apple, {revenuecat} from RevenueCat"
    );
    let trials = s
        .db
        .count("SELECT COUNT(DISTINCT user_id) AS n FROM store_notifications WHERE trial = true")
        .await;
    assert_eq!(total(&metric_sums(&report, "trial_started")), trials as f64);
    assert_eq!(
        total(&purchases),
        trials as f64,
        "each buyer's trial is reported"
    );
    let apple_trials =
        s.db.count(
            "SELECT COUNT(DISTINCT user_id) AS n FROM store_notifications \
             WHERE trial = true AND source = 'apple'",
        )
        .await;
    assert!(apple_trials > 0, "trials reported by the App Store");

    // The CLI and the admin API give the same report for the same window.
    let to = report["to"].as_str().unwrap().to_owned();
    let path = format!("/admin/v1/experiments/{DEMO_EXPERIMENT}/results?to={to}");
    let (status, from_admin) = admin(&s, &path, Some(TOKEN));
    assert_eq!(status, 200, "{from_admin}");
    let (code, out, err) = run(
        &[
            "experiments",
            "results",
            DEMO_EXPERIMENT,
            "--to",
            &to,
            "--json",
        ],
        &env,
    );
    assert_eq!(code, Some(0), "{err}");
    let from_cli: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(from_cli, from_admin);
    assert_eq!(from_cli["exposed_users"].as_u64(), Some(exposed));

    // The table names the variants and the metrics.
    let (code, table, err) = run(&["experiments", "results", DEMO_EXPERIMENT], &env);
    assert_eq!(code, Some(0), "{err}");
    for word in [
        "control",
        "trial",
        "flow_complete",
        "purchase_complete",
        "revenue",
    ] {
        assert!(table.contains(word), "{word} in\n{table}");
    }

    // The list: the same in both, with the exposed users.
    let (code, out, err) = run(&["experiments", "list", "--app", DEMO_APP, "--json"], &env);
    assert_eq!(code, Some(0), "{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    let (status, listed_admin) = admin(
        &s,
        &format!("/admin/v1/experiments?app_id={DEMO_APP}"),
        Some(TOKEN),
    );
    assert_eq!(status, 200, "{listed_admin}");
    assert_eq!(listed, listed_admin);
    assert!(
        listed
            .to_string()
            .contains(&format!("\"exposed_users\":{exposed}")),
        "{listed}"
    );

    // A caller's mistakes: exit 4 in the CLI, 4xx problems in the admin API, value quoted.
    for (args, quoted) in [
        (
            vec!["experiments", "results", NO_SUCH_EXPERIMENT],
            NO_SUCH_EXPERIMENT,
        ),
        (
            vec![
                "experiments",
                "results",
                DEMO_EXPERIMENT,
                "--from",
                "yesterday",
            ],
            "yesterday",
        ),
        (
            vec![
                "experiments",
                "results",
                DEMO_EXPERIMENT,
                "--metric",
                "no such",
            ],
            "no such",
        ),
    ] {
        let (code, _, err) = run(&args, &env);
        assert_eq!(code, Some(4), "{args:?}: {err}");
        assert!(err.contains(quoted), "{args:?}: {err}");
    }
    let results = format!("/admin/v1/experiments/{DEMO_EXPERIMENT}/results");
    assert_eq!(admin(&s, &results, None).0, 401);
    assert_eq!(
        admin(&s, &results, Some("results-admin-token-0123456789abcdee")).0,
        401
    );
    let (status, problem) = admin(
        &s,
        &format!("/admin/v1/experiments/{NO_SUCH_EXPERIMENT}/results"),
        Some(TOKEN),
    );
    assert_eq!(
        (status, &problem["code"]),
        (404, &Value::from("experiment_not_found"))
    );
    for (query, quoted) in [("from=yesterday", "yesterday"), ("colour=red", "colour")] {
        let (status, problem) = admin(&s, &format!("{results}?{query}"), Some(TOKEN));
        assert_eq!(status, 400, "{query}: {problem}");
        assert_eq!(problem["code"], "invalid_request", "{query}: {problem}");
        assert!(
            problem["detail"].as_str().unwrap().contains(quoted),
            "{problem}"
        );
    }
    assert!(
        s.metric("flowgate_results_queries_total{outcome=\"ok\"}") >= Some(2.0),
        "the admin reads are counted"
    );
}

// The proxy in front of PostgreSQL runs on the test's runtime, which the blocking HTTP client
// holds while waiting: a second worker forwards meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_that_runs_out_of_time_fails_clearly_while_resolve_and_events_go_on() {
    let settings = [
        ("FLOWGATE__ADMIN__TOKEN", TOKEN),
        ("FLOWGATE__EXPERIMENTS__QUERY_TIMEOUT_MS", "500"),
    ];
    let Some(s) = Served::start(&settings).await else {
        return;
    };
    let env = [
        ("FLOWGATE__DATABASE__URL", s.db.url.as_str()),
        ("FLOWGATE__EXPERIMENTS__QUERY_TIMEOUT_MS", "500"),
    ];
    let from = "2020-01-01T00:00:00Z";
    let results = format!(
        "/admin/v1/experiments/{}/results?from={from}",
        fixtures::EXP
    );
    let (status, report) = admin(&s, &results, Some(TOKEN));
    assert_eq!(status, 200, "{report}");

    // An earlier day's partition of the events, locked: reading the window waits on it, writing
    // today's events does not.
    let today = time::OffsetDateTime::now_utc().date();
    let today = format!(
        "analytics_events_p{:04}{:02}{:02}",
        today.year(),
        u8::from(today.month()),
        today.day()
    );
    let earlier =
        s.db.texts(&format!(
            "SELECT relname::text AS t FROM pg_class WHERE relname LIKE 'analytics\\_events\\_p%' \
             AND relkind = 'r' AND relname < '{today}' ORDER BY relname DESC LIMIT 1"
        ))
        .await;
    let earlier = earlier.first().expect("a partition before today's");
    let lock = s.db.lock_table(earlier).await;

    let (status, problem) = admin(&s, &results, Some(TOKEN));
    assert_eq!(status, 503, "{problem}");
    assert_eq!(problem["code"], "results_timeout", "{problem}");
    let (status, problem) = admin(&s, "/admin/v1/experiments", Some(TOKEN));
    assert_eq!(
        (status, &problem["code"]),
        (503, &Value::from("results_timeout"))
    );
    let (code, _, err) = run(
        &["experiments", "results", fixtures::EXP, "--from", from],
        &env,
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("query_timeout_ms"), "{err}");

    // Meanwhile the SDK routes answer, and an accepted event is stored.
    assert_eq!(resolve_onboarding(&s).0, 200);
    let id = uuid::Uuid::new_v4().to_string();
    let path = format!("/v1/apps/{}/events", fixtures::APP1);
    let (status, body) = http(
        s.api,
        "POST",
        &path,
        Some(&s.key),
        event(&id).to_string().as_bytes(),
    )
    .unwrap();
    assert_eq!(status, 202, "{body}");
    // Read from today's partition: the whole table waits on the lock.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let stored = format!("SELECT COUNT(*) AS n FROM {today} WHERE event_id = '{id}'");
    while s.db.count(&stored).await != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the event {id} is not stored"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        s.metric("flowgate_results_queries_total{outcome=\"timeout\"}") >= Some(2.0),
        "the timeouts are counted"
    );

    lock.release().await;
    // No read that ran out of time left a connection inside a transaction (holding locks).
    let open = "SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = current_database() \
                AND state LIKE 'idle in transaction%'";
    assert_eq!(s.db.count(open).await, 0);
    let (status, report) = admin(&s, &results, Some(TOKEN));
    assert_eq!(status, 200, "{report}");
}

/// Resolves the paywall placement for `user` (200, asserted): the served flow and assignment.
fn resolve_paywall(s: &Served, user: &str) -> Value {
    let body = serde_json::json!({"user_id": user, "session_id": format!("{user}-s"),
        "device_platform": "ios"});
    let path = format!("/v1/apps/{}/placements/paywall/resolve", fixtures::APP1);
    let (status, reply) = http(
        s.api,
        "POST",
        &path,
        Some(&s.key),
        body.to_string().as_bytes(),
    )
    .unwrap();
    assert_eq!(status, 200, "{reply}");
    serde_json::from_str::<Value>(&reply).unwrap()
}

/// Waits (20 s at most) until the server serves an imported catalog whose experiment control
/// shows `FLOW_US`: it learns the catalog with its next refresh.
async fn wait_for_control_flow(s: &Served) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while (0..20).all(|i| resolve_paywall(s, &format!("probe-{i}"))["flow_id"] != fixtures::FLOW_US)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the catalog is not served"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A seeded generator (SplitMix64): the simulation is the same on every run.
struct Seeded(u64);

impl Seeded {
    /// Uniform in [0, 1).
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as f64 / 2f64.powi(64)
    }
}

/// Simulated users per day of [`an_experiment_without_effect_read_every_day_declares_no_winner`].
const USERS_PER_DAY: usize = 200;

/// D27 through the binary, on both stores: an experiment with no true effect (both variants
/// convert alike), its users sent through the real API day by day over ten simulated days
/// (event timestamps in the past), read after each day with the CLI and the admin API. Under
/// sequential testing (the default) no look declares a winner or a loser; both readers give the
/// same JSON, the decision included; the table opens with the verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_experiment_without_effect_read_every_day_declares_no_winner() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let Some(s) = Served::start_on(backend, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)]).await else {
            continue;
        };
        // The fixture's 50/50 experiment, both variants showing a flow (so every exposure is an
        // SDK `flow_open` at its simulated time), read with analysis settings: purchases decide,
        // completions must not get worse, 100 users per variant before a verdict.
        let mut doc = fixtures::catalog_json();
        doc["format"] = 2.into();
        let experiment =
            &mut doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["experiment"];
        assert_eq!(experiment["id"], fixtures::EXP);
        experiment["variants"][0]["flow_id"] = fixtures::FLOW_US.into();
        experiment["analysis"] = serde_json::json!({
            "primary_metric": "purchase_complete", "guardrail_metrics": ["flow_complete"],
            "minimum_users": 100,
        });
        crate::support::import(&s.db.url, &doc);
        let resolve = |user: &str| resolve_paywall(&s, user);
        // The server serves the new catalog after its next refresh.
        wait_for_control_flow(&s).await;

        let now = time::OffsetDateTime::now_utc();
        let start = now.replace_time(time::Time::MIDNIGHT) - time::Duration::days(11);
        let mut rng = Seeded(0x5eed_0051);
        let mut verdicts = Vec::new();
        let mut sent = 0;
        for day in 0..10_i64 {
            let mut events = Vec::new();
            for i in 0..USERS_PER_DAY {
                let user = format!("sim-{day}-{i}");
                let flow = resolve(&user);
                let at = start
                    + time::Duration::days(day)
                    + time::Duration::seconds((rng.next() * 80_000.0) as i64);
                let event = |event_type: &str, after: i64| {
                    let timestamp = (at + time::Duration::seconds(after))
                        .format(&time::format_description::well_known::Rfc3339)
                        .unwrap();
                    serde_json::json!({
                        "event_id": uuid::Uuid::new_v4().to_string(), "app_id": fixtures::APP1,
                        "flow_id": flow["flow_id"], "flow_version_id": flow["flow_version_id"],
                        "experiment_id": flow["experiment_id"], "variant_id": flow["variant_id"],
                        "placement_id": "paywall", "user_id": user, "session_id": format!("{user}-s"),
                        "device_platform": "ios", "event_type": event_type, "timestamp": timestamp,
                        "sdk_version": "2.0.0",
                    })
                };
                events.push(event("flow_open", 0));
                // The same chances in both variants: no true effect.
                if rng.next() < 0.4 {
                    events.push(event("flow_complete", 60));
                }
                if rng.next() < 0.1 {
                    let mut purchase = event("purchase_complete", 90);
                    purchase["revenue"] = 9.99.into();
                    purchase["currency"] = "USD".into();
                    events.push(purchase);
                }
            }
            for batch in events.chunks(100) {
                let path = format!("/v1/apps/{}/events", fixtures::APP1);
                let body = Value::Array(batch.to_vec()).to_string();
                let (status, reply) =
                    http(s.api, "POST", &path, Some(&s.key), body.as_bytes()).unwrap();
                assert_eq!(status, 202, "{reply}");
                let reply: Value = serde_json::from_str(&reply).unwrap();
                assert_eq!(reply["rejected"], 0, "{reply}");
            }
            sent += events.len();
            let stored = "SELECT COUNT(*) AS n FROM analytics_events";
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while (s.db.count(stored).await as usize) < sent {
                assert!(std::time::Instant::now() < deadline, "events stored");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }

            // The day's look, as a growth team would take it each morning.
            let to = (start + time::Duration::days(day + 1) - time::Duration::seconds(1))
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap();
            let path = format!("/admin/v1/experiments/{}/results?to={to}", fixtures::EXP);
            let (status, from_admin) = admin(&s, &path, Some(TOKEN));
            assert_eq!(status, 200, "{from_admin}");
            let env = [("FLOWGATE__DATABASE__URL", s.db.url.as_str())];
            let (code, out, err) = run(
                &[
                    "experiments",
                    "results",
                    fixtures::EXP,
                    "--to",
                    &to,
                    "--json",
                ],
                &env,
            );
            assert_eq!(code, Some(0), "{err}");
            let from_cli: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(from_cli, from_admin, "{backend:?} day {day}");
            assert_eq!(from_admin["method"], "sequential");
            assert_eq!(
                from_admin["exposed_users"].as_u64(),
                Some((day as u64 + 1) * USERS_PER_DAY as u64)
            );
            let decision = &from_admin["decision"];
            verdicts.push(decision["verdict"].as_str().unwrap().to_owned());
            let codes: Vec<&str> = decision["reasons"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["code"].as_str().unwrap())
                .collect();
            if day == 0 {
                // 200 users in two variants: fewer than 100 in at least one.
                assert_eq!(codes[0], "minimum_users", "{decision}");
            } else if day >= 2 {
                assert!(
                    codes.iter().all(|c| *c == "no_significant_difference"),
                    "{backend:?} day {day}: {decision}"
                );
            }
            if day == 9 {
                // The table opens with the same verdict, in words.
                let (code, table, err) = run(
                    &["experiments", "results", fixtures::EXP, "--to", &to],
                    &env,
                );
                assert_eq!(code, Some(0), "{err}");
                assert!(table.starts_with("Verdict: Keep running\n"), "{table}");
                assert!(table.contains("purchase_complete [primary]"), "{table}");
                assert!(table.contains("flow_complete [guardrail]"), "{table}");
                // The same look read with the fixed-horizon test, for this report only.
                let (status, fixed) = admin(&s, &format!("{path}&method=fixed"), Some(TOKEN));
                assert_eq!(status, 200, "{fixed}");
                assert_eq!(fixed["method"], "fixed_horizon");
                let interval = |r: &Value| {
                    let m = &r["metrics"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|m| m["metric"] == "purchase_complete")
                        .unwrap()["variants"][1];
                    m["ci_high"].as_f64().unwrap() - m["ci_low"].as_f64().unwrap()
                };
                assert!(
                    interval(&from_admin) > interval(&fixed),
                    "the sequential interval is the wider"
                );
                let (status, problem) = admin(&s, &format!("{path}&method=bayes"), Some(TOKEN));
                assert_eq!(
                    (status, &problem["code"]),
                    (400, &Value::from("invalid_request"))
                );
                assert!(
                    problem["detail"].as_str().unwrap().contains("\"bayes\""),
                    "{problem}"
                );
            }
        }
        assert!(
            verdicts.iter().all(|v| v == "keep_running"),
            "{backend:?}: no look declares a winner or a loser: {verdicts:?}"
        );
    }
}

/// D30 through the binary, on both stores: the treatment starts more trials (its
/// `purchase_complete` rate is higher) but converts fewer of them to paid, and more of its paid
/// purchases are refunded. RevenueCat's webhooks, sent with a webhook key made by the CLI,
/// are stored once; the report's store figures equal what the test's SQL counts over what it
/// sent; and the verdict on `proceeds` (roll back) is not the one on `purchase_complete`
/// (ship).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_revenue_decides_otherwise_than_the_purchases_the_app_saw() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let Some(s) = Served::start_on(backend, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)]).await else {
            continue;
        };
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
        let webhook: Value = serde_json::from_str(&out).unwrap();
        let webhook = webhook["key"].as_str().unwrap().to_owned();
        let import = |primary: &str| {
            let mut doc = fixtures::catalog_json();
            doc["format"] = 2.into();
            let experiment =
                &mut doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["experiment"];
            experiment["variants"][0]["flow_id"] = fixtures::FLOW_US.into();
            experiment["analysis"] =
                serde_json::json!({"primary_metric": primary, "sequential": false});
            crate::support::import(&s.db.url, &doc);
        };
        import("purchase_complete");
        let resolve = |user: &str| resolve_paywall(&s, user);
        wait_for_control_flow(&s).await;
        // The webhook key is known to the server after its next refresh.
        let at = time::OffsetDateTime::now_utc() - time::Duration::days(3);
        let ms = |t: time::OffsetDateTime| t.unix_timestamp() * 1000;
        let send = |event: Value| {
            let path = format!("/v1/apps/{}/store/revenuecat", fixtures::APP1);
            let body = serde_json::json!({"api_version": "1.0", "event": event}).to_string();
            http(s.api, "POST", &path, Some(&webhook), body.as_bytes()).unwrap()
        };
        let probe = serde_json::json!({"id": "probe", "type": "TEST"});
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while send(probe.clone()).0 != 200 {
            assert!(
                std::time::Instant::now() < deadline,
                "the webhook key is not served"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }

        let mut rng = Seeded(0x5eed_0052);
        let mut events = Vec::new();
        let mut sent = 0_usize;
        for i in 0..1_200 {
            let user = format!("buyer-{i}");
            let flow = resolve(&user);
            let treatment = flow["variant_name"] == "new";
            let event = |event_type: &str, after: i64| {
                serde_json::json!({
                    "event_id": uuid::Uuid::new_v4().to_string(), "app_id": fixtures::APP1,
                    "flow_id": flow["flow_id"], "flow_version_id": flow["flow_version_id"],
                    "experiment_id": flow["experiment_id"], "variant_id": flow["variant_id"],
                    "placement_id": "paywall", "user_id": user, "session_id": "s",
                    "device_platform": "ios", "event_type": event_type, "sdk_version": "2.0.0",
                    "timestamp": (at + time::Duration::seconds(after))
                        .format(&time::format_description::well_known::Rfc3339).unwrap(),
                })
            };
            events.push(event("flow_open", 0));
            // The treatment starts more trials; fewer convert; more paid ones are refunded.
            let (trial, convert, refund) = if treatment {
                (0.30, 0.15, 0.5)
            } else {
                (0.15, 0.7, 0.05)
            };
            if rng.next() < trial {
                events.push(event("purchase_complete", 60));
                let original = format!("o-{user}");
                let (status, reply) = send(serde_json::json!({"id": format!("e-{user}-1"),
                    "type": "INITIAL_PURCHASE", "app_user_id": user, "period_type": "TRIAL",
                    "transaction_id": format!("t-{user}-1"), "original_transaction_id": original,
                    "purchased_at_ms": ms(at + time::Duration::minutes(1)), "price": 0}));
                assert_eq!(status, 200, "{reply}");
                sent += 1;
                if rng.next() < convert {
                    let paid = serde_json::json!({"id": format!("e-{user}-2"), "type": "RENEWAL",
                        "app_user_id": user, "period_type": "NORMAL",
                        "transaction_id": format!("t-{user}-2"), "original_transaction_id": original,
                        "purchased_at_ms": ms(at + time::Duration::days(2)),
                        "price_in_purchased_currency": 20.0, "currency": "USD"});
                    assert_eq!(send(paid.clone()).0, 200);
                    // Sent again, as RevenueCat retries: stored once.
                    assert_eq!(send(paid.clone()).0, 200);
                    sent += 1;
                    if rng.next() < refund {
                        let mut refund = paid;
                        refund["id"] = format!("e-{user}-3").into();
                        refund["type"] = "CANCELLATION".into();
                        refund["cancel_reason"] = "CUSTOMER_SUPPORT".into();
                        // RevenueCat sends a refund's price negative ("Can be negative for
                        // refunds"): it is stored, and proceeds drop by it.
                        refund["price_in_purchased_currency"] = (-20.0).into();
                        let (status, reply) = send(refund);
                        assert_eq!(status, 200, "{reply}");
                        sent += 1;
                    }
                }
            }
        }
        for batch in events.chunks(100) {
            let path = format!("/v1/apps/{}/events", fixtures::APP1);
            let body = Value::Array(batch.to_vec()).to_string();
            let (status, reply) =
                http(s.api, "POST", &path, Some(&s.key), body.as_bytes()).unwrap();
            assert_eq!(status, 202, "{reply}");
        }
        let stored =
            s.db.count("SELECT COUNT(*) AS n FROM store_notifications")
                .await as usize;
        assert_eq!(stored, sent + 1, "each notification once (and the probe)");
        let total = events.len();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while (s
            .db
            .count("SELECT COUNT(*) AS n FROM analytics_events")
            .await as usize)
            < total
        {
            assert!(std::time::Instant::now() < deadline, "events stored");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        let report = |extra: &str| {
            let path = format!("/admin/v1/experiments/{}/results{extra}", fixtures::EXP);
            let (status, report) = admin(&s, &path, Some(TOKEN));
            assert_eq!(status, 200, "{report}");
            report
        };
        let r = report("");
        let names: Vec<&str> = r["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["metric"].as_str().unwrap())
            .collect();
        for m in [
            "trial_started",
            "trial_converted",
            "paid",
            "refunded",
            "proceeds",
        ] {
            assert!(names.contains(&m), "{m} in {names:?}");
        }
        // The report against the test's own SQL over what was stored.
        let exposed =
            "SELECT user_id, variant_id FROM analytics_events WHERE event_type = 'flow_open'";
        for (variant, name) in [
            (fixtures::VAR_CONTROL, "control"),
            (fixtures::VAR_NEW, "new"),
        ] {
            let users_of = |condition: &str| {
                format!(
                    "SELECT COUNT(DISTINCT x.user_id) AS n FROM ({exposed}) x JOIN store_notifications n \
                     ON n.user_id = x.user_id WHERE x.variant_id = '{variant}' AND {condition}"
                )
            };
            let figure = |metric: &str| {
                let m = r["metrics"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|m| m["metric"] == metric)
                    .unwrap();
                let v = m["variants"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|v| v["variant_id"] == variant)
                    .unwrap();
                v["sum"].as_f64().unwrap()
            };
            for (metric, condition) in [
                ("trial_started", "n.trial"),
                ("paid", "n.price > 0 AND NOT n.trial"),
                ("refunded", "n.refunded"),
            ] {
                let sql = users_of(
                    &condition
                        .replace(
                            "n.trial",
                            if backend == Backend::Sqlite {
                                "n.trial = 1"
                            } else {
                                "n.trial"
                            },
                        )
                        .replace(
                            "n.refunded",
                            if backend == Backend::Sqlite {
                                "n.refunded = 1"
                            } else {
                                "n.refunded"
                            },
                        ),
                );
                assert_eq!(
                    figure(metric),
                    s.db.count(&sql).await as f64,
                    "{name} {metric}"
                );
            }
            assert_eq!(
                figure("trial_converted"),
                figure("paid"),
                "{name}: every paid one followed a trial"
            );
            // Proceeds: 20 per paid user less 20 per refunded one.
            assert_eq!(
                figure("proceeds"),
                20.0 * (figure("paid") - figure("refunded")),
                "{name}"
            );
        }
        // purchase_complete decides: ship the treatment; proceeds decide: roll it back.
        assert_eq!(r["decision"]["verdict"], "ship", "{}", r["decision"]);
        import("proceeds");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut r = report("");
        while r["analysis"]["primary_metric"] != "proceeds" {
            assert!(
                std::time::Instant::now() < deadline,
                "the new analysis settings are served"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
            r = report("");
        }
        assert_eq!(r["decision"]["verdict"], "roll_back", "{}", r["decision"]);
        // A horizon of one day leaves out the paid purchases, bought two days after exposure,
        // and keeps the trials, bought a minute after.
        let short = report("?horizon=1");
        let sum = |r: &Value, metric: &str| -> f64 {
            let m = r["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["metric"] == metric)
                .unwrap();
            m["variants"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v["sum"].as_f64().unwrap())
                .sum()
        };
        assert!(sum(&r, "paid") > 0.0);
        assert_eq!(sum(&short, "paid"), 0.0);
        assert_eq!(sum(&short, "trial_started"), sum(&r, "trial_started"));
        let (status, problem) = admin(
            &s,
            &format!("/admin/v1/experiments/{}/results?horizon=0", fixtures::EXP),
            Some(TOKEN),
        );
        assert_eq!(
            (status, &problem["code"]),
            (400, &Value::from("invalid_request"))
        );
    }
}
