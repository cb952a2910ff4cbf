//! Scheduling a catalog change from the console (D29): the change page's "Apply at" stores the
//! change pending with its time, the scheduler of `serve` applies it then as `scheduler`, and
//! its author may withdraw one before its time.

use std::time::{Duration, Instant};

use flowgate_store::Backend;
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::OffsetDateTime;

use crate::console::{post, Answer, TOKEN};
use crate::fixtures;
use crate::people::{audit_cli, get, has, hidden_field, person};
use crate::support::{resolve_onboarding, run, Served};

/// Opens the change page of onboarding's first rule turned `enabled`: the page, its change
/// JSON and base revision.
fn rule_change(s: &Served, cookie: &str, enabled: bool) -> (Answer, String, String) {
    let path = format!(
        "/console/changes/new?kind=rule&app={}&placement=onboarding&rule=0&enabled={enabled}",
        fixtures::APP1
    );
    let page = get(s.admin, &path, cookie);
    assert_eq!(page.status, 200, "{}", page.body);
    let field = |name: &str| hidden_field(&page.body, name);
    let (change, base) = (field("change"), field("base"));
    (page, change, base)
}

/// `flowgate changes list --json`.
fn changes(s: &Served) -> Vec<Value> {
    let (code, out, err) = run(
        &["changes", "list", "--json"],
        &[("FLOWGATE__DATABASE__URL", s.db.url.as_str())],
    );
    assert_eq!(code, Some(0), "changes list: {err}");
    serde_json::from_str::<Value>(&out)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn flow_of(s: &Served) -> Value {
    let (status, body) = resolve_onboarding(s);
    assert_eq!(status, 200, "{body}");
    body["flow_id"].clone()
}

#[tokio::test]
async fn an_editor_schedules_a_change_that_the_scheduler_applies_at_its_time() {
    let s = Served::start_on(
        Backend::Sqlite,
        &[
            ("FLOWGATE__ADMIN__TOKEN", TOKEN),
            ("FLOWGATE__SCHEDULER__INTERVAL_MS", "200"),
        ],
    )
    .await
    .unwrap();
    let (edna, csrf) = person(&s, "edna@example.com", "editor");
    assert_eq!(flow_of(&s), fixtures::FLOW_US);

    let (page, change, base) = rule_change(&s, &edna, false);
    assert!(
        page.body
            .contains(r#"type="datetime-local" name="apply_at""#),
        "{}",
        page.body
    );
    assert!(page.body.contains("The time is UTC"), "{}", page.body);
    let form = |apply_at: &str| {
        vec![
            ("csrf", csrf.clone()),
            ("change", change.clone()),
            ("base", base.clone()),
            ("comment", "launch at noon".to_owned()),
            ("apply_at", apply_at.to_owned()),
        ]
    };
    let send = |fields: &[(&str, String)], cookie: &str| {
        let fields: Vec<(&str, &str)> = fields.iter().map(|(n, v)| (*n, v.as_str())).collect();
        post(s.admin, "/console/changes", cookie, &fields)
    };

    // A time past, or one that does not parse: the form again, quoting it; nothing stored.
    let minutes = format_description!("[year]-[month]-[day]T[hour]:[minute]");
    let past = (OffsetDateTime::now_utc() - time::Duration::hours(1))
        .format(&minutes)
        .unwrap();
    for bad in [past.as_str(), "tomorrow at noon"] {
        let refused = send(&form(bad), &edna);
        assert_eq!(refused.status, 400, "{bad}: {}", refused.body);
        assert!(refused.body.contains(bad), "{}", refused.body);
        assert!(
            refused.body.contains("id=\"apply-change\""),
            "{}",
            refused.body
        );
        assert!(refused.body.contains("launch at noon"), "{}", refused.body);
    }
    // Without the CSRF token: 403.
    let at = (OffsetDateTime::now_utc() + time::Duration::seconds(3))
        .replace_nanosecond(0)
        .unwrap();
    let rfc = at.format(&Rfc3339).unwrap();
    let forged = send(&form(&rfc)[1..], &edna);
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert!(changes(&s).is_empty(), "nothing stored");

    // Scheduled: pending with its time, resolve unchanged until then.
    let scheduled = send(&form(&rfc), &edna);
    assert_eq!(scheduled.status, 303, "{}", scheduled.body);
    assert_eq!(
        flow_of(&s),
        fixtures::FLOW_US,
        "nothing changes before its time"
    );
    let location = scheduled.header("location").unwrap().to_owned();
    let id = location.rsplit('/').next().unwrap().to_owned();
    let listed = changes(&s);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["author"], "edna@example.com");
    assert_eq!(listed[0]["state"], "pending", "{listed:?}");
    let stored = OffsetDateTime::parse(listed[0]["apply_at"].as_str().unwrap(), &Rfc3339);
    assert_eq!(stored.unwrap(), at, "{listed:?}");
    let shown = format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC");
    let shown = at.format(&shown).unwrap();
    let page = get(s.admin, &location, &edna);
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains(&format!("scheduled for {shown}")),
        "{}",
        page.body
    );
    let entries = audit_cli(&s, &["--action", "change.propose"]);
    assert!(has(
        &entries,
        "edna@example.com",
        "change.propose",
        Some(&id)
    ));
    assert_eq!(entries[0]["detail"]["apply_at"], rfc.as_str());
    assert_eq!(entries[0]["comment"], "launch at noon");

    // Applied by the scheduler once its time has come, and resolve follows.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listed = changes(&s);
        if listed[0]["state"] == "applied" && flow_of(&s) != fixtures::FLOW_US {
            assert_eq!(listed[0]["decided_by"], "scheduler");
            let decided =
                OffsetDateTime::parse(listed[0]["decided_at"].as_str().unwrap(), &Rfc3339);
            assert!(decided.unwrap() >= at, "not before its time: {listed:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not applied after 20 s: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Another one, an hour ahead (as a datetime-local input sends it): listed with its time,
    // and withdrawn by its author before it.
    let (_, change, base) = rule_change(&s, &edna, true);
    let later = (OffsetDateTime::now_utc() + time::Duration::hours(1))
        .format(&minutes)
        .unwrap();
    let fields = [
        ("csrf", csrf.as_str()),
        ("change", change.as_str()),
        ("base", base.as_str()),
        ("comment", "back on later"),
        ("apply_at", later.as_str()),
    ];
    let scheduled = post(s.admin, "/console/changes", &edna, &fields);
    assert_eq!(scheduled.status, 303, "{}", scheduled.body);
    let location = scheduled.header("location").unwrap().to_owned();
    let list = get(s.admin, "/console/changes", &edna);
    assert!(
        list.body.contains(&format!(
            "scheduled for {} UTC",
            later.replace('T', " ") + ":00"
        )),
        "{}",
        list.body
    );
    let page = get(s.admin, &location, &edna);
    assert!(page.body.contains("id=\"withdraw\""), "{}", page.body);
    let withdrawn = post(
        s.admin,
        &format!("{location}/withdraw"),
        &edna,
        &[("csrf", csrf.as_str())],
    );
    assert_eq!(withdrawn.status, 303, "{}", withdrawn.body);
    let id = location.rsplit('/').next().unwrap();
    let listed = changes(&s);
    let withdrawn = listed.iter().find(|c| c["id"] == id).unwrap();
    assert_eq!(withdrawn["state"], "withdrawn", "{listed:?}");
    assert_eq!(withdrawn["decided_by"], "edna@example.com");
    assert_ne!(flow_of(&s), fixtures::FLOW_US, "the rule stays off");
}

#[tokio::test]
async fn with_review_the_console_does_not_schedule() {
    let s = Served::start_on(
        Backend::Sqlite,
        &[
            ("FLOWGATE__ADMIN__TOKEN", TOKEN),
            ("FLOWGATE__CATALOG__REQUIRE_REVIEW", "true"),
        ],
    )
    .await
    .unwrap();
    let (edna, csrf) = person(&s, "edna@example.com", "editor");
    let (page, change, base) = rule_change(&s, &edna, false);
    assert!(!page.body.contains("name=\"apply_at\""), "{}", page.body);
    let later = (OffsetDateTime::now_utc() + time::Duration::hours(1))
        .format(&Rfc3339)
        .unwrap();
    let refused = post(
        s.admin,
        "/console/changes",
        &edna,
        &[
            ("csrf", csrf.as_str()),
            ("change", change.as_str()),
            ("base", base.as_str()),
            ("comment", "later"),
            ("apply_at", later.as_str()),
        ],
    );
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(
        refused.body.contains(
            "with catalog.require_review, a change is applied after its approval; \
             schedule it with flowgate changes schedule"
        ),
        "{}",
        refused.body
    );
    assert!(changes(&s).is_empty(), "nothing stored");
}
