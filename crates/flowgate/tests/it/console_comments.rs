//! Issue 65: a console comment the store cannot keep (a NUL character, which PostgreSQL's
//! `text` refuses) is permanent bad input. Each form that takes one (a catalog change, starting
//! a rollout, moving one) refuses it 400 with the reason and the comment quoted, writes
//! nothing, and never answers the 503 "retry later" that retrying could not help.

use flowgate_store::Backend;
use serde_json::Value;

use crate::console::{post, Answer, TOKEN};
use crate::console_rollouts::start_form;
use crate::fixtures;
use crate::people::{get, hidden_field, person};
use crate::support::{run, Served};

/// A comment with a NUL character in it.
const NUL_COMMENT: &str = "launch\0now";

/// The refusal names the character and quotes the comment (as text: `\0` in the quote).
fn refused(answer: &Answer, what: &str) {
    assert_eq!(answer.status, 400, "{what}: {}", answer.body);
    assert!(
        answer.body.contains("NUL character (U+0000)") && answer.body.contains(r"launch\0now"),
        "{what}: {}",
        answer.body
    );
}

/// `flowgate <what> list --json`.
fn listed(s: &Served, what: &str) -> Vec<Value> {
    let (code, out, err) = run(
        &[what, "list", "--json"],
        &[("FLOWGATE__DATABASE__URL", s.db.url.as_str())],
    );
    assert_eq!(code, Some(0), "{what} list: {err}");
    serde_json::from_str::<Value>(&out)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

// Multi-threaded: the proxy in front of PostgreSQL runs on this runtime while the test's
// requests block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_comment_with_a_nul_character_is_refused_on_postgresql() {
    let Some(s) = Served::start_on(Backend::Postgres, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)]).await
    else {
        return;
    };
    let addr = s.admin;
    let (edna, csrf) = person(&s, "edna@example.com", "editor");

    // A catalog change (onboarding's first rule turned off).
    let path = format!(
        "/console/changes/new?kind=rule&app={}&placement=onboarding&rule=0&enabled=false",
        fixtures::APP1
    );
    let page = get(addr, &path, &edna);
    assert_eq!(page.status, 200, "{}", page.body);
    let (change, base) = (
        hidden_field(&page.body, "change"),
        hidden_field(&page.body, "base"),
    );
    let answer = post(
        addr,
        "/console/changes",
        &edna,
        &[
            ("csrf", &csrf),
            ("change", &change),
            ("base", &base),
            ("comment", NUL_COMMENT),
        ],
    );
    refused(&answer, "a change");
    assert!(listed(&s, "changes").is_empty(), "no change stored");

    // Starting a rollout.
    let mut form = start_form(&csrf, "1,5,25,50,100");
    form.retain(|(name, _)| *name != "comment");
    form.push(("comment", NUL_COMMENT));
    refused(&post(addr, "/console/rollouts", &edna, &form), "a start");
    assert!(listed(&s, "rollouts").is_empty(), "no rollout started");

    // Moving one: started with a good comment, its pause with a NUL is refused.
    let started = post(
        addr,
        "/console/rollouts",
        &edna,
        &start_form(&csrf, "1,5,25,50,100"),
    );
    assert_eq!(started.status, 303, "{}", started.body);
    let at = started.header("location").unwrap().to_owned();
    let pause = post(
        addr,
        &format!("{at}/pause"),
        &edna,
        &[("csrf", &csrf), ("comment", NUL_COMMENT)],
    );
    refused(&pause, "a pause");
    let rollouts = listed(&s, "rollouts");
    assert_eq!(rollouts.len(), 1);
    assert_eq!(rollouts[0]["state"], "running", "not paused");

    // A key's name, the console's other free text that reaches the store, likewise.
    let (ada, ada_csrf) = person(&s, "ada@example.com", "admin");
    let answer = post(
        addr,
        "/console/keys",
        &ada,
        &[
            ("csrf", &ada_csrf),
            ("workspace", fixtures::WS1),
            ("environment", "test"),
            ("type", "sdk"),
            ("name", "key\0name"),
        ],
    );
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert!(
        answer.body.contains("NUL character (U+0000)") && answer.body.contains(r"key\0name"),
        "{}",
        answer.body
    );
}
