//! Staged rollouts (D29) in the operator console through the binary: an editor starts one from
//! the form and pauses, resumes and rolls it back by posts, each in the audit log under their
//! email; a viewer sees the pages and can do nothing; refusals say why; names from the catalog
//! stay text. The onboarding placement's first rule (`FLOW_US`) is rolled to `FLOW_NEW`, with a
//! hold of a day, so the scheduler of `serve` takes no step while the test runs.

use std::net::SocketAddr;

use flowgate_store::Backend;
use serde_json::Value;

use crate::console::{exchange, post, Answer, TOKEN};
use crate::fixtures;
use crate::people::{audit_cli, get, has, person};
use crate::support::{import, run, Served};

/// A flow name that is markup: it must show as text, never run.
const SCRIPT_NAME: &str = "<script>window.pwned=1</script>";

/// The rollouts as `flowgate rollouts list --json` lists them.
fn listed(s: &Served) -> Vec<Value> {
    let (code, out, err) = run(
        &["rollouts", "list", "--json"],
        &[("FLOWGATE__DATABASE__URL", s.db.url.as_str())],
    );
    assert_eq!(code, Some(0), "rollouts list: {err}");
    serde_json::from_str::<Value>(&out)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The state of rollout `id` as `flowgate rollouts show --json` shows it.
fn state_of(s: &Served, id: &str) -> String {
    let (code, out, err) = run(
        &["rollouts", "show", id, "--json"],
        &[("FLOWGATE__DATABASE__URL", s.db.url.as_str())],
    );
    assert_eq!(code, Some(0), "rollouts show: {err}");
    serde_json::from_str::<Value>(&out).unwrap()["state"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The start form's fields: onboarding of app 1 to `FLOW_NEW`, with these steps.
pub(crate) fn start_form<'a>(csrf: &'a str, steps: &'a str) -> Vec<(&'static str, &'a str)> {
    vec![
        ("csrf", csrf),
        ("target", ONBOARDING),
        ("flow", fixtures::FLOW_NEW),
        ("steps", steps),
        ("hold", "24h"),
        ("minimum_users", "100"),
        ("guardrail", "flow_complete"),
        ("guardrail", "purchase_complete"),
        ("other_guardrails", "revenue"),
        ("comment", "new onboarding for everyone"),
    ]
}

/// The start form's value of app 1's onboarding placement.
const ONBOARDING: &str = "20000000-0000-4000-8000-000000000001/onboarding";

/// Starts the rollout from the form as the session of `cookie`: its page's path.
fn start(addr: SocketAddr, cookie: &str, csrf: &str) -> String {
    let started = post(
        addr,
        "/console/rollouts",
        cookie,
        &start_form(csrf, "1,5,25,50,100"),
    );
    assert_eq!(started.status, 303, "{}", started.body);
    let location = started.header("location").unwrap().to_owned();
    assert!(
        location.starts_with("/console/rollouts/"),
        "{location}: {}",
        started.body
    );
    location
}

/// Posts a move (`pause`, `resume`, `rollback`) of the rollout at `page` with a comment.
fn act(addr: SocketAddr, page: &str, cookie: &str, csrf: &str, action: &str) -> Answer {
    post(
        addr,
        &format!("{page}/{action}"),
        cookie,
        &[
            ("csrf", csrf),
            ("comment", &format!("{action} from the console")),
        ],
    )
}

/// Whether the page offers the form of `action` for the rollout at `page`.
fn offers(answer: &Answer, page: &str, action: &str) -> bool {
    answer.body.contains(&format!("action=\"{page}/{action}\""))
}

#[tokio::test]
async fn an_editor_moves_a_rollout_from_the_console_and_a_viewer_only_sees_it() {
    assert_eq!(ONBOARDING, format!("{}/onboarding", fixtures::APP1));
    let s = Served::start_on(Backend::Sqlite, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .unwrap();
    let addr = s.admin;
    let (edna, edna_csrf) = person(&s, "edna@example.com", "editor");
    let (vera, vera_csrf) = person(&s, "vera@example.com", "viewer");

    // A viewer sees the (empty) list and the navigation's entry, but no way to start one.
    let page = get(addr, "/console/rollouts", &vera);
    assert_eq!(page.status, 200, "{}", page.body);
    page.assert_security_headers("the rollouts");
    assert!(page.body.contains("href=\"/console/rollouts\""));
    assert!(page.body.contains("No rollout was started yet."));
    assert!(
        !page.body.contains("/console/rollouts/new"),
        "{}",
        page.body
    );
    assert_eq!(get(addr, "/console/rollouts/new", &vera).status, 403);
    let refused = post(
        addr,
        "/console/rollouts",
        &vera,
        &start_form(&vera_csrf, "1,5,25,50,100"),
    );
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(listed(&s).is_empty(), "a viewer started nothing");

    // The editor's form: the placements whose rule serves a flow, the flows' versions, the
    // plan's defaults.
    let page = get(addr, "/console/rollouts", &edna);
    assert!(page.body.contains("href=\"/console/rollouts/new\""));
    let form = get(addr, "/console/rollouts/new", &edna);
    assert_eq!(form.status, 200, "{}", form.body);
    form.assert_security_headers("the start form");
    for part in [
        format!("value=\"{ONBOARDING}\""),
        format!("value=\"{}\"", fixtures::FLOW_NEW),
        "name=\"steps\" value=\"1,5,25,50,100\"".to_owned(),
        "name=\"hold\" value=\"24h\"".to_owned(),
        "name=\"minimum_users\" value=\"100\"".to_owned(),
        "value=\"flow_complete\" checked".to_owned(),
        "value=\"revenue\" checked".to_owned(),
    ] {
        assert!(form.body.contains(&part), "{part} in {}", form.body);
    }
    assert!(
        !form.body.contains(&format!("{}/paywall", fixtures::APP1)),
        "paywall's rules run experiments"
    );
    // Every version of every flow: a published one by the flow's id, the others by number,
    // a flow that publishes none included (D29).
    for (value, label) in [
        (
            format!("{}@1", fixtures::FLOW_US),
            "US onboarding, version 1",
        ),
        (
            fixtures::FLOW_US.to_owned(),
            "US onboarding, version 2 (published)",
        ),
        (
            format!("{}@1", fixtures::FLOW_UNPUBLISHED),
            "Draft, version 1",
        ),
    ] {
        let option = format!("value=\"{value}\">{label}</option>");
        assert!(form.body.contains(&option), "{option} in {}", form.body);
    }

    // Started: its page shows step 1 applied, the next pending, and the forms for running.
    let at = start(addr, &edna, &edna_csrf);
    let id = at.trim_start_matches("/console/rollouts/").to_owned();
    let shown = get(addr, &at, &edna);
    assert_eq!(shown.status, 200, "{}", shown.body);
    shown.assert_security_headers("a rollout");
    assert!(
        shown
            .body
            .contains("data-step=\"1\" data-state=\"applied\""),
        "{}",
        shown.body
    );
    assert!(shown
        .body
        .contains("data-step=\"2\" data-state=\"pending\""));
    assert!(shown
        .body
        .contains("section class=\"rollout-state\" data-state=\"running\""));
    assert!(shown.body.contains("“US onboarding”") && shown.body.contains("“New”"));
    assert!(shown.body.contains("edna@example.com"));
    assert!(offers(&shown, &at, "pause") && offers(&shown, &at, "rollback"));
    assert!(!offers(&shown, &at, "resume"));
    assert_eq!(state_of(&s, &id), "running");

    // The viewer sees it, without a form, and their posts change nothing.
    let list = get(addr, "/console/rollouts", &vera);
    assert!(
        list.body.contains(&format!("href=\"{at}\"")),
        "{}",
        list.body
    );
    assert!(list.body.contains("data-state=\"running\""));
    let seen = get(addr, &at, &vera);
    assert_eq!(seen.status, 200);
    assert!(seen.body.contains("data-step=\"1\" data-state=\"applied\""));
    for action in ["pause", "resume", "rollback"] {
        assert!(!offers(&seen, &at, action), "{action} for a viewer");
        let refused = act(addr, &at, &vera, &vera_csrf, action);
        assert_eq!(refused.status, 403, "{action}: {}", refused.body);
    }
    assert_eq!(state_of(&s, &id), "running", "a viewer changed nothing");

    // A post without the session's CSRF token is refused before anything is read.
    let forged = post(
        addr,
        &format!("{at}/pause"),
        &edna,
        &[("comment", "cross-site")],
    );
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert!(forged.body.contains("CSRF"), "{}", forged.body);
    assert_eq!(state_of(&s, &id), "running");

    // A move the console does not know is 404 and changes nothing.
    let unknown = act(addr, &at, &edna, &edna_csrf, "complete");
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    assert_eq!(state_of(&s, &id), "running");

    // Pause, resume, roll back: each answered 303 to the page, which shows it.
    let paused = act(addr, &at, &edna, &edna_csrf, "pause");
    assert_eq!(paused.status, 303, "{}", paused.body);
    assert_eq!(paused.header("location"), Some(at.as_str()));
    let shown = get(addr, &at, &edna);
    assert!(
        shown.body.contains("data-state=\"paused\""),
        "{}",
        shown.body
    );
    assert!(shown
        .body
        .contains("paused by edna@example.com: pause from the console"));
    assert!(offers(&shown, &at, "resume") && offers(&shown, &at, "rollback"));
    assert!(!offers(&shown, &at, "pause"));
    assert_eq!(state_of(&s, &id), "paused");

    let resumed = act(addr, &at, &edna, &edna_csrf, "resume");
    assert_eq!(resumed.status, 303, "{}", resumed.body);
    let shown = get(addr, &at, &edna);
    assert!(shown
        .body
        .contains("section class=\"rollout-state\" data-state=\"running\""));
    assert_eq!(state_of(&s, &id), "running");

    let back = act(addr, &at, &edna, &edna_csrf, "rollback");
    assert_eq!(back.status, 303, "{}", back.body);
    let shown = get(addr, &at, &edna);
    assert!(
        shown.body.contains("data-state=\"rolled_back\""),
        "{}",
        shown.body
    );
    assert!(shown
        .body
        .contains("rolled back by edna@example.com: rollback from the console"));
    assert!(shown.body.contains("0% of users on the new flow"));
    for action in ["pause", "resume", "rollback"] {
        assert!(!offers(&shown, &at, action), "{action} after the rollback");
    }
    assert_eq!(state_of(&s, &id), "rolled_back");

    // A rolled back rollout does not resume: 409, the page with why.
    let again = act(addr, &at, &edna, &edna_csrf, "resume");
    assert_eq!(again.status, 409, "{}", again.body);
    again.assert_security_headers("a refused move");
    assert!(
        again.body.contains("data-code=\"wrong_state\"")
            && again
                .body
                .contains("is rolled_back: only a paused rollout resumes"),
        "{}",
        again.body
    );
    assert_eq!(state_of(&s, &id), "rolled_back");

    // Every move in the audit log, under the editor's email.
    let audit = audit_cli(&s, &[]);
    for action in [
        "rollout.step",
        "rollout.pause",
        "rollout.resume",
        "rollout.rollback",
    ] {
        assert!(
            has(&audit, "edna@example.com", action, Some(&id)),
            "{action} by edna: {audit:?}"
        );
    }
    assert!(
        !audit.iter().any(|e| e["actor"] == "vera@example.com"
            && e["action"].as_str().unwrap().starts_with("rollout.")),
        "{audit:?}"
    );
    let list = get(addr, "/console/rollouts", &vera);
    assert!(
        list.body.contains("data-state=\"rolled_back\""),
        "{}",
        list.body
    );
}

#[tokio::test]
async fn a_refused_start_shows_the_form_again_and_catalog_names_stay_text() {
    let s = Served::start_on(Backend::Sqlite, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .unwrap();
    let addr = s.admin;
    let mut catalog = fixtures::catalog_json();
    let flows = catalog["workspaces"][0]["apps"][0]["flows"]
        .as_array_mut()
        .unwrap();
    let new = flows
        .iter_mut()
        .find(|f| f["id"] == fixtures::FLOW_NEW)
        .unwrap();
    new["name"] = SCRIPT_NAME.into();
    import(&s.db.url, &catalog);
    let (edna, edna_csrf) = person(&s, "edna@example.com", "editor");
    let escaped = "&lt;script&gt;window.pwned=1&lt;/script&gt;";

    let form = get(addr, "/console/rollouts/new", &edna);
    assert_eq!(form.status, 200, "{}", form.body);
    assert!(!form.body.contains(SCRIPT_NAME), "{}", form.body);
    assert!(form.body.contains(escaped), "{}", form.body);

    // Steps that do not increase: 400, the form again with the value quoted and kept.
    let bad = post(
        addr,
        "/console/rollouts",
        &edna,
        &start_form(&edna_csrf, "5,1"),
    );
    assert_eq!(bad.status, 400, "{}", bad.body);
    bad.assert_security_headers("a refused start");
    assert!(
        bad.body
            .contains("invalid steps 5,1: each step is larger than the one before"),
        "{}",
        bad.body
    );
    assert!(bad.body.contains("id=\"start-rollout\""));
    assert!(bad.body.contains("name=\"steps\" value=\"5,1\""));
    assert!(
        bad.body.contains("new onboarding for everyone"),
        "the comment is kept"
    );
    assert!(!bad.body.contains(SCRIPT_NAME));
    // A hold that is no duration, quoted too.
    let mut fields = start_form(&edna_csrf, "1,100");
    fields.retain(|(name, _)| *name != "hold");
    fields.push(("hold", "soon"));
    let bad_hold = post(addr, "/console/rollouts", &edna, &fields);
    assert_eq!(bad_hold.status, 400, "{}", bad_hold.body);
    assert!(
        bad_hold.body.contains("&quot;soon&quot; is not a duration"),
        "{}",
        bad_hold.body
    );
    // Without the CSRF token: 403.
    let mut fields = start_form(&edna_csrf, "1,5,25,50,100");
    fields.retain(|(name, _)| *name != "csrf");
    let forged = post(addr, "/console/rollouts", &edna, &fields);
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert!(listed(&s).is_empty(), "nothing was started");

    // Started: the new flow's name shows as text on its page and in the list.
    let at = start(addr, &edna, &edna_csrf);
    for path in [at.as_str(), "/console/rollouts"] {
        let page = get(addr, path, &edna);
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        page.assert_security_headers(path);
        assert!(!page.body.contains(SCRIPT_NAME), "{path}: {}", page.body);
        assert!(page.body.contains(escaped), "{path}: {}", page.body);
    }
    // An id that is none: 404 with the console's headers.
    let none = exchange(
        addr,
        "GET",
        "/console/rollouts/not-a-rollout",
        &[("Cookie", &edna)],
        "",
    );
    assert_eq!(none.status, 404, "{}", none.body);
    none.assert_security_headers("an unknown rollout");
    assert_eq!(listed(&s).len(), 1);
}

/// Issue 65, item 3 (D35): with `catalog.require_review`, a rollout start from the console is
/// a proposal that moves nobody until another editor approves it, and approving starts the
/// rollout as its author's; the CLI's start is refused unless it names its author (a
/// proposal) or breaks glass (`--apply-now`, audited as such).
#[tokio::test]
async fn with_review_a_rollout_start_waits_for_another_editor() {
    let s = Served::start_on(
        Backend::Sqlite,
        &[
            ("FLOWGATE__ADMIN__TOKEN", TOKEN),
            ("FLOWGATE__CATALOG__REQUIRE_REVIEW", "true"),
        ],
    )
    .await
    .unwrap();
    import(&s.db.url, &fixtures::catalog_json());
    let (edna, edna_csrf) = person(&s, "edna@example.com", "editor");
    let (ed, ed_csrf) = person(&s, "ed@example.com", "editor");
    let proposed = post(
        s.admin,
        "/console/rollouts",
        &edna,
        &start_form(&edna_csrf, "1,5,25,50,100"),
    );
    assert_eq!(proposed.status, 303, "{}", proposed.body);
    let at = proposed.header("location").unwrap().to_owned();
    assert!(at.starts_with("/console/changes/"), "{at}");
    assert!(listed(&s).is_empty(), "nothing moved before the review");
    // The author cannot approve it.
    let page = get(s.admin, &at, &edna);
    assert!(page.body.contains("pending"), "{}", page.body);
    let own = post(
        s.admin,
        &format!("{at}/approve"),
        &edna,
        &[("csrf", &edna_csrf), ("base", "0"), ("comment", "me")],
    );
    assert_eq!(own.status, 403, "{}", own.body);
    // Another editor approves: the rollout starts, as edna's, at its first step.
    let page = get(s.admin, &at, &ed);
    assert!(page.body.contains("Approve and apply"), "{}", page.body);
    let base = {
        let from = page.body.find("name=\"base\" value=\"").unwrap() + 19;
        page.body[from..from + page.body[from..].find('"').unwrap()].to_owned()
    };
    let approved = post(
        s.admin,
        &format!("{at}/approve"),
        &ed,
        &[("csrf", &ed_csrf), ("base", &base), ("comment", "agreed")],
    );
    assert_eq!(approved.status, 303, "{}", approved.body);
    let rollouts = listed(&s);
    assert_eq!(rollouts.len(), 1, "{rollouts:?}");
    assert_eq!(rollouts[0]["state"], "running");
    assert_eq!(rollouts[0]["share"], 1.0);
    assert_eq!(rollouts[0]["created_by"], "edna@example.com");
    assert_eq!(rollouts[0]["plan"]["steps"][1], 5.0);
    let audit = audit_cli(&s, &[]);
    assert!(has(&audit, "ed@example.com", "change.approve", None));
    assert!(has(&audit, "ed@example.com", "rollout.step", None));
    let id = rollouts[0]["id"].as_str().unwrap().to_owned();

    // The command line: a safety action applies at once; a start waits for review.
    let env = [
        ("FLOWGATE__DATABASE__URL", s.db.url.as_str()),
        ("FLOWGATE__CATALOG__REQUIRE_REVIEW", "true"),
    ];
    let (code, _, err) = run(&["rollouts", "rollback", &id], &env);
    assert_eq!(code, Some(0), "{err}");
    let start = |extra: &[&str]| {
        let mut args = vec![
            "rollouts",
            "start",
            "--app",
            fixtures::APP1,
            "--placement",
            "onboarding",
            "--flow",
            fixtures::FLOW_NEW,
            "--steps",
            "10,100",
            "--comment",
            "from the shell",
        ];
        args.extend_from_slice(extra);
        run(&args, &env)
    };
    let (code, _, err) = start(&[]);
    assert_eq!(code, Some(4), "{err}");
    assert!(
        err.contains("catalog.require_review") && err.contains("--author"),
        "{err}"
    );
    let (code, _, err) = start(&["--author", "nobody@example.com"]);
    assert_eq!(code, Some(4), "{err}");
    let (code, out, err) = start(&["--author", "edna@example.com", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let proposal: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(proposal["state"], "pending", "{proposal}");
    assert_eq!(proposal["author"], "edna@example.com");
    assert_eq!(listed(&s).len(), 1, "a proposal starts nothing");
    let (code, out, err) = start(&["--apply-now", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let started: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(started["state"], "running", "{started}");
    let audit = audit_cli(&s, &["--action", "rollout.step"]);
    assert!(
        audit
            .iter()
            .any(|e| e["actor"] == "cli"
                && e["comment"].as_str().unwrap_or("").contains("break-glass")),
        "{audit:?}"
    );
    // The proposal, approved now, is refused: the placement has a rollout running.
    let proposal_at = format!(
        "/console/changes/{}",
        proposal["change_id"].as_str().unwrap()
    );
    let page = get(s.admin, &proposal_at, &ed);
    assert!(
        page.body
            .contains("It cannot be applied to the catalog as it is now")
            && !page.body.contains("Approve and apply"),
        "{}",
        page.body
    );
    let refused = post(
        s.admin,
        &format!("{proposal_at}/approve"),
        &ed,
        &[("csrf", &ed_csrf), ("base", &base), ("comment", "late")],
    );
    assert_ne!(refused.status, 303, "{}", refused.body);
    assert_eq!(listed(&s).len(), 2);
}

/// A `start_rollout` change posted as a plain catalog change would put a rollout's experiment on
/// the rule with no rollout to step it: the one change path refuses it (`rollout_only`), and
/// nothing is written.
#[tokio::test]
async fn a_rollout_start_posted_as_a_plain_change_is_refused() {
    let s = Served::start_on(Backend::Sqlite, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .unwrap();
    import(&s.db.url, &fixtures::catalog_json());
    let (edna, edna_csrf) = person(&s, "edna@example.com", "editor");
    let change = serde_json::json!({
        "format": 1, "kind": "start_rollout", "app": fixtures::APP1,
        "placement": "onboarding", "rule": 0,
        "experiment": "50000000-0000-4000-8000-000000000071", "name": "Rollout of New",
        "control": "60000000-0000-4000-8000-000000000071",
        "treatment": "60000000-0000-4000-8000-000000000072", "flow": fixtures::FLOW_NEW,
        "share": 50.0, "guardrails": ["flow_complete"], "minimum_users": 100,
    })
    .to_string();
    let refused = post(
        s.admin,
        "/console/changes",
        &edna,
        &[
            ("csrf", &edna_csrf),
            ("change", &change),
            ("base", "0"),
            ("comment", "sneak it in"),
        ],
    );
    assert_ne!(refused.status, 303, "{}", refused.body);
    assert!(
        refused
            .body
            .contains("a start_rollout change starts a rollout"),
        "{}",
        refused.body
    );
    let (code, out, err) = run(
        &["catalog", "export"],
        &[("FLOWGATE__DATABASE__URL", s.db.url.as_str())],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        !out.contains("Rollout of New"),
        "nothing was written: {out}"
    );
    assert!(listed(&s).is_empty());
}
