//! People, roles, sessions in the store and the audit log (D28) through the binary: the
//! command line adds people, the one-time link sets a password, each role can do what it may
//! and nothing more, and everything lands in the audit log (console page, CLI, admin API).

use std::net::SocketAddr;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use flowgate_store::Backend;
use serde_json::{json, Value};

use crate::browser::Browser;
use crate::console::{
    click, count, exchange, post, sign_in, text, try_sign_in, type_into, wait_path, Answer, TOKEN,
};
use crate::support::{flowgate, http, run, Served};

/// A server on SQLite with the console and `catalog.require_review` on.
async fn served_with_review() -> Served {
    Served::start_on(
        Backend::Sqlite,
        &[
            ("FLOWGATE__ADMIN__TOKEN", TOKEN),
            ("FLOWGATE__CATALOG__REQUIRE_REVIEW", "true"),
        ],
    )
    .await
    .unwrap()
}

/// The path and query of a link the CLI printed (`http://host:port/console/...`).
fn path_of(link: &str) -> String {
    let rest = link.split_once("://").map_or(link, |(_, rest)| rest);
    rest[rest.find('/').unwrap()..].to_owned()
}

/// `flowgate users add EMAIL --role ROLE --json` against `s`: the link's path.
pub(crate) fn add(s: &Served, email: &str, role: &str) -> String {
    let admin = s.admin.to_string();
    let env = [
        ("FLOWGATE__DATABASE__URL", s.db.url.as_str()),
        ("FLOWGATE__ADMIN__LISTEN", admin.as_str()),
    ];
    let (code, out, err) = run(&["users", "add", email, "--role", role, "--json"], &env);
    assert_eq!(code, Some(0), "users add: {err}");
    let added: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(added["role"], role);
    assert_eq!(added["password_set"], false);
    let link = added["link"].as_str().unwrap();
    assert!(
        link.starts_with(&format!("http://{admin}/console/set-password?token=")),
        "{link}"
    );
    path_of(link)
}

/// Opens the link's page and posts `password` twice (or `confirm`); the answer.
fn set_password(addr: SocketAddr, path: &str, password: &str, confirm: &str) -> Answer {
    let page = exchange(addr, "GET", path, &[], "");
    assert_eq!(page.status, 200, "{}", page.body);
    page.assert_security_headers("the password page");
    let token = path.rsplit_once("token=").unwrap().1;
    let pre = format!(
        "flowgate_console_sign_in={}",
        page.cookie("flowgate_console_sign_in").unwrap()
    );
    post(
        addr,
        "/console/set-password",
        &pre,
        &[
            ("csrf", &page.csrf()),
            ("token", token),
            ("password", password),
            ("confirm", confirm),
        ],
    )
}

/// Signs in with an email and a password; the answer to the post.
pub(crate) fn password_sign_in(addr: SocketAddr, email: &str, password: &str) -> Answer {
    let form = exchange(addr, "GET", "/console/sign-in", &[], "");
    let pre = format!(
        "flowgate_console_sign_in={}",
        form.cookie("flowgate_console_sign_in").unwrap()
    );
    post(
        addr,
        "/console/sign-in",
        &pre,
        &[
            ("csrf", &form.csrf()),
            ("email", email),
            ("password", password),
        ],
    )
}

/// The session cookie an answer set, and the CSRF token of the experiments page it opens.
pub(crate) fn session_of(addr: SocketAddr, answer: &Answer) -> (String, String) {
    assert_eq!(answer.status, 303, "{}", answer.body);
    let cookie = format!(
        "flowgate_console={}",
        answer.cookie("flowgate_console").unwrap()
    );
    let page = get(addr, "/console/experiments", &cookie);
    assert_eq!(page.status, 200, "{}", page.body);
    (cookie, page.csrf())
}

pub(crate) fn get(addr: SocketAddr, path: &str, cookie: &str) -> Answer {
    exchange(addr, "GET", path, &[("Cookie", cookie)], "")
}

/// The audit log as `flowgate audit list --json` prints it.
pub(crate) fn audit_cli(s: &Served, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["audit", "list", "--json"];
    all.extend_from_slice(args);
    let (code, out, err) = run(&all, &[("FLOWGATE__DATABASE__URL", s.db.url.as_str())]);
    assert_eq!(code, Some(0), "audit list: {err}");
    serde_json::from_str::<Value>(&out)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

pub(crate) fn has(entries: &[Value], actor: &str, action: &str, target: Option<&str>) -> bool {
    entries.iter().any(|e| {
        e["actor"] == actor && e["action"] == action && target.is_none_or(|t| e["target"] == t)
    })
}

fn keys_of(s: &Served) -> usize {
    crate::console::listed_keys(s, crate::fixtures::WS1).len()
}

#[tokio::test]
async fn people_sign_in_with_their_own_password_and_act_within_their_role() {
    let s = Served::start_on(
        Backend::Sqlite,
        &[
            ("FLOWGATE__ADMIN__TOKEN", TOKEN),
            ("FLOWGATE__CONSOLE__FAILED_SIGN_INS_PER_ACCOUNT", "3"),
        ],
    )
    .await
    .unwrap();
    let addr = s.admin;

    // The link: a short password and two that differ are refused and leave it working; a
    // good one signs in; the link works once.
    let vera = add(&s, "Vera@Example.com", "viewer");
    let short = set_password(addr, &vera, "too-short", "too-short");
    assert_eq!(short.status, 400, "{}", short.body);
    assert!(
        short.body.contains("at least 12 characters"),
        "{}",
        short.body
    );
    let differ = set_password(addr, &vera, "a good long password", "a good long passw0rd");
    assert_eq!(differ.status, 400);
    assert!(differ.body.contains("differ"), "{}", differ.body);
    let set = set_password(addr, &vera, "a good long password", "a good long password");
    let (vera_cookie, vera_csrf) = session_of(addr, &set);
    let again = set_password(
        addr,
        &vera,
        "another long password",
        "another long password",
    );
    assert_eq!(again.status, 410, "a link works once: {}", again.body);
    let forged = exchange(
        addr,
        "GET",
        "/console/set-password?token=%3Cscript%3E",
        &[],
        "",
    );
    assert_eq!(forged.status, 404);
    assert!(!forged.body.contains("<script>"));

    // The viewer sees the pages, not People, and a post beyond the role changes nothing.
    let page = get(addr, "/console/experiments", &vera_cookie);
    assert!(
        page.body.contains("vera@example.com (viewer)"),
        "{}",
        page.body
    );
    assert!(
        !page.body.contains("/console/people"),
        "no People link for a viewer"
    );
    assert_eq!(get(addr, "/console/people", &vera_cookie).status, 403);
    assert_eq!(get(addr, "/console/keys/created", &vera_cookie).status, 403);
    let before = keys_of(&s);
    let create = post(
        addr,
        "/console/keys",
        &vera_cookie,
        &[
            ("csrf", &vera_csrf),
            ("workspace", crate::fixtures::WS1),
            ("environment", "test"),
            ("type", "sdk"),
        ],
    );
    assert_eq!(create.status, 403, "{}", create.body);
    assert!(
        create.body.contains("needs the editor role"),
        "{}",
        create.body
    );
    assert_eq!(keys_of(&s), before, "the viewer's post created nothing");
    let add_person = post(
        addr,
        "/console/people",
        &vera_cookie,
        &[
            ("csrf", &vera_csrf),
            ("email", "x@example.com"),
            ("role", "admin"),
        ],
    );
    assert_eq!(add_person.status, 403);

    // An editor creates a key; the audit log names them.
    let edna = add(&s, "edna@example.com", "editor");
    let (edna_cookie, edna_csrf) = session_of(
        addr,
        &set_password(addr, &edna, "edna's long password", "edna's long password"),
    );
    let create = post(
        addr,
        "/console/keys",
        &edna_cookie,
        &[
            ("csrf", &edna_csrf),
            ("workspace", crate::fixtures::WS1),
            ("environment", "test"),
            ("type", "sdk"),
        ],
    );
    assert_eq!(create.status, 303, "{}", create.body);
    assert_eq!(keys_of(&s), before + 1);

    // Signing in: a wrong password is one answer for every cause, counted per account; past
    // the account's limit even the right password waits (429) from this address (another
    // address is not limited: sign_in_security.rs).
    let wrong = password_sign_in(addr, "vera@example.com", "not her password");
    assert_eq!(wrong.status, 401);
    assert!(wrong.body.contains("do not sign in"), "{}", wrong.body);
    let unknown = password_sign_in(addr, "nobody@example.com", "whatever password");
    assert_eq!(unknown.status, 401);
    assert!(unknown.body.contains("do not sign in"));
    let right = password_sign_in(addr, "VERA@example.com", "a good long password");
    session_of(addr, &right);
    for _ in 0..2 {
        assert_eq!(
            password_sign_in(addr, "vera@example.com", "wrong again!!").status,
            401
        );
    }
    let limited = password_sign_in(addr, "vera@example.com", "a good long password");
    assert_eq!(limited.status, 429, "{}", limited.body);
    assert!(limited.header("retry-after").is_some());
    // Another account is not affected.
    session_of(
        addr,
        &password_sign_in(addr, "edna@example.com", "edna's long password"),
    );

    // An admin disables the viewer: her sessions end at once, on every page.
    let (admin_cookie, admin_csrf) = sign_in(addr);
    let people = get(addr, "/console/people", &admin_cookie);
    assert_eq!(people.status, 200);
    people.assert_security_headers("the people page");
    let vera_id = {
        let at = people.body.find("data-email=\"vera@example.com\"").unwrap();
        let action = people.body[at..].find("action=\"/console/people/").unwrap() + at;
        people.body[action + 24..action + 24 + 36].to_owned()
    };
    let disabled = post(
        addr,
        &format!("/console/people/{vera_id}"),
        &admin_cookie,
        &[("csrf", &admin_csrf), ("action", "disable")],
    );
    assert_eq!(disabled.status, 303, "{}", disabled.body);
    let gone = get(addr, "/console/experiments", &vera_cookie);
    assert_eq!(gone.status, 303);
    assert_eq!(gone.header("location"), Some("/console/sign-in"));
    let (code, out, _) = run(
        &["users", "list", "--json"],
        &[("FLOWGATE__DATABASE__URL", s.db.url.as_str())],
    );
    assert_eq!(code, Some(0));
    let listed: Value = serde_json::from_str(&out).unwrap();
    let vera_listed = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["email"] == "vera@example.com")
        .unwrap();
    assert_eq!(vera_listed["disabled"], true);
    assert_eq!(vera_listed["password_set"], true);

    // The audit log: the same entries in the CLI, the admin API and the console.
    let entries = audit_cli(&s, &[]);
    assert!(has(&entries, "cli", "person.add", Some("vera@example.com")));
    assert!(has(
        &entries,
        "vera@example.com",
        "person.password",
        Some("vera@example.com")
    ));
    assert!(has(
        &entries,
        "vera@example.com",
        "sign_in",
        Some("vera@example.com")
    ));
    assert!(has(
        &entries,
        "vera@example.com",
        "sign_in.failed",
        Some("vera@example.com")
    ));
    assert!(has(&entries, "nobody@example.com", "sign_in.failed", None));
    assert!(has(&entries, "edna@example.com", "key.create", None));
    assert!(has(&entries, "admin-token", "sign_in", None));
    assert!(has(
        &entries,
        "admin-token",
        "person.disable",
        Some("vera@example.com")
    ));
    let ids: Vec<i64> = entries.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    let failed = audit_cli(
        &s,
        &["--action", "sign_in.failed", "--actor", "vera@example.com"],
    );
    assert_eq!(failed.len(), 3, "{failed:?}");
    let (code, _, err) = run(
        &["audit", "list", "--action", "sign_in.nope"],
        &[("FLOWGATE__DATABASE__URL", s.db.url.as_str())],
    );
    assert_eq!(code, Some(4));
    assert!(err.contains("sign_in.nope"), "{err}");

    let (status, body) = http(addr, "GET", "/admin/v1/audit?limit=1000", Some(TOKEN), b"").unwrap();
    assert_eq!(status, 200, "{body}");
    let from_api: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(from_api["entries"].as_array().unwrap(), &entries);
    let (status, _) = http(addr, "GET", "/admin/v1/audit", None, b"").unwrap();
    assert_eq!(status, 401);
    let (status, body) = http(
        addr,
        "GET",
        "/admin/v1/audit?since=yesterday",
        Some(TOKEN),
        b"",
    )
    .unwrap();
    assert_eq!(status, 400);
    assert!(
        body.contains("yesterday") && body.contains("invalid_request"),
        "{body}"
    );

    let page = get(addr, "/console/audit?action=person.disable", &admin_cookie);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("person.disable") && page.body.contains("vera@example.com"));
    assert!(
        !page.body.contains(">key.create<"),
        "filtered: {}",
        page.body
    );
}

/// A replica of `s`'s database with the same settings: another `flowgate serve`.
struct Replica {
    admin: SocketAddr,
    child: Child,
}

impl Replica {
    async fn start(db_url: &str) -> Replica {
        let admin: SocketAddr = format!("127.0.0.1:{}", flowgate_testkit::free_port())
            .parse()
            .unwrap();
        let api = format!("127.0.0.1:{}", flowgate_testkit::free_port());
        let child = flowgate()
            .arg("serve")
            .env("FLOWGATE__DATABASE__URL", db_url)
            .env("FLOWGATE__SERVER__LISTEN", &api)
            .env("FLOWGATE__ADMIN__LISTEN", admin.to_string())
            .env("FLOWGATE__ADMIN__TOKEN", TOKEN)
            .env("FLOWGATE__CATALOG__CACHE_PATH", "")
            .env("FLOWGATE__CATALOG__REFRESH_INTERVAL_MS", "200")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok((200, _)) = http(admin, "GET", "/readyz", None, b"") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the second replica never got ready"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Replica { admin, child }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// Multi-threaded: the proxy in front of PostgreSQL runs on this runtime while the test's
// requests block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_opened_on_one_replica_works_on_another_and_ends_on_both() {
    let s = Served::start_on(Backend::Postgres, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .expect("PostgreSQL runs (make pg-up)");
    let other = Replica::start(&s.db.url).await;

    // A sign-in form issued by one replica is accepted by the other (one key in the store).
    let form = exchange(s.admin, "GET", "/console/sign-in", &[], "");
    assert_eq!(form.status, 200, "{}", form.body);
    let pre = format!(
        "flowgate_console_sign_in={}",
        form.cookie("flowgate_console_sign_in").unwrap()
    );
    let signed = post(
        other.admin,
        "/console/sign-in",
        &pre,
        &[("csrf", &form.csrf()), ("token", TOKEN)],
    );
    assert_eq!(signed.status, 303, "{}", signed.body);
    let cookie = format!(
        "flowgate_console={}",
        signed.cookie("flowgate_console").unwrap()
    );
    // The session, opened on the other replica, works on the first, and its CSRF token too.
    let page = get(s.admin, "/console/experiments", &cookie);
    assert_eq!(page.status, 200, "{}", page.body);
    let csrf = page.csrf();
    // A key created on one replica is shown, once, by the other (the page it redirects to).
    let created = post(
        s.admin,
        "/console/keys",
        &cookie,
        &[
            ("csrf", &csrf),
            ("workspace", crate::fixtures::WS1),
            ("environment", "test"),
            ("type", "sdk"),
            ("name", "across replicas"),
        ],
    );
    assert_eq!(created.status, 303, "{}", created.body);
    let sealed = format!(
        "{cookie}; flowgate_new_key={}",
        created.cookie("flowgate_new_key").unwrap()
    );
    let shown = get(other.admin, "/console/keys/created", &sealed);
    assert_eq!(shown.status, 200, "{}", shown.body);
    assert!(
        shown.body.contains("id=\"new-key\">fg_test_"),
        "{}",
        shown.body
    );
    // Bound to its session: another session's page does not open it.
    let another = try_sign_in(other.admin, TOKEN);
    let (another_cookie, _) = session_of(other.admin, &another);
    let foreign = format!(
        "{another_cookie}; flowgate_new_key={}",
        created.cookie("flowgate_new_key").unwrap()
    );
    let refused = get(other.admin, "/console/keys/created", &foreign);
    assert_eq!(refused.status, 303, "{}", refused.body);
    assert!(!refused.body.contains("fg_test_"));
    let out = post(s.admin, "/console/sign-out", &cookie, &[("csrf", &csrf)]);
    assert_eq!(out.status, 303);
    // Signed out on the first: gone on the second as well.
    let gone = get(other.admin, "/console/experiments", &cookie);
    assert_eq!(gone.status, 303);
    // A restart signs nobody out: sessions are in the store.
    let kept = try_sign_in(other.admin, TOKEN);
    let (kept_cookie, _) = session_of(other.admin, &kept);
    drop(other);
    let restarted = Replica::start(&s.db.url).await;
    assert_eq!(
        get(restarted.admin, "/console/experiments", &kept_cookie).status,
        200
    );
}

const DEMO_APP: &str = "d0000000-0000-4000-8000-0000000000a1";
const DEMO_EXPERIMENT: &str = "d0000000-0000-4000-8000-0000000000c1";
const DEMO_TRIAL: &str = "d0000000-0000-4000-8000-0000000000b2";
const DEMO_TRIAL_FLOW: &str = "d0000000-0000-4000-8000-0000000000f3";

/// Imports the demo catalog into `s`'s store; its SDK key.
pub(crate) fn demo_key(s: &Served) -> String {
    let (code, out, err) = run(
        &["demo", "--json"],
        &[("FLOWGATE__DATABASE__URL", s.db.url.as_str())],
    );
    assert_eq!(code, Some(0), "demo: {err}");
    serde_json::from_str::<Value>(&out).unwrap()["key"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The flows the demo paywall gives 40 US users.
fn paywall_flows(s: &Served, key: &str) -> Vec<String> {
    (0..40)
        .map(|i| {
            let body = serde_json::json!({"user_id": format!("u-{i}"), "session_id": "s",
                "device_platform": "ios", "attributes": {"country": "US"}});
            let path = format!("/v1/apps/{DEMO_APP}/placements/paywall/resolve");
            let (status, reply) =
                http(s.api, "POST", &path, Some(key), body.to_string().as_bytes()).unwrap();
            assert_eq!(status, 200, "{reply}");
            serde_json::from_str::<Value>(&reply).unwrap()["flow_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

async fn wait_all_trial(s: &Served, key: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while paywall_flows(s, key).iter().any(|f| f != DEMO_TRIAL_FLOW) {
        assert!(Instant::now() < deadline, "the shipped flow is not served");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The value of the form field `name` of a page (a change page's hidden `change` JSON or
/// `base` revision), unescaped.
pub(crate) fn hidden_field(body: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = body
        .find(&marker)
        .unwrap_or_else(|| panic!("no field {name} in {body}"))
        + marker.len();
    let end = start + body[start..].find('"').unwrap();
    body[start..end].replace("&quot;", "\"")
}

/// A person of `role` signed in: cookie and CSRF token.
pub(crate) fn person(s: &Served, email: &str, role: &str) -> (String, String) {
    let link = add(s, email, role);
    let password = format!("{email} long password");
    session_of(s.admin, &set_password(s.admin, &link, &password, &password))
}

/// Opens the ship preview of the trial variant and returns the form's change JSON and base.
pub(crate) fn ship_preview(s: &Served, cookie: &str) -> (String, String, Answer) {
    let path =
        format!("/console/changes/new?kind=ship&experiment={DEMO_EXPERIMENT}&variant={DEMO_TRIAL}");
    let page = get(s.admin, &path, cookie);
    assert_eq!(page.status, 200, "{}", page.body);
    let field = |name: &str| hidden_field(&page.body, name);
    (field("change"), field("base"), page)
}

#[tokio::test]
async fn an_editor_ships_a_variant_with_a_comment_and_a_stale_change_writes_nothing() {
    let s = Served::start_on(Backend::Sqlite, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .unwrap();
    let key = demo_key(&s);
    let (edna, edna_csrf) = person(&s, "edna@example.com", "editor");
    let (ed, ed_csrf) = person(&s, "ed@example.com", "editor");
    let (vera, _) = person(&s, "vera@example.com", "viewer");

    // A viewer sees no change form and may not open one.
    let page = get(
        s.admin,
        &format!("/console/experiments/{DEMO_EXPERIMENT}"),
        &vera,
    );
    assert_eq!(page.status, 200);
    assert!(!page.body.contains("change-experiment"));
    let page = get(
        s.admin,
        &format!("/console/experiments/{DEMO_EXPERIMENT}"),
        &edna,
    );
    assert!(page.body.contains("Ship trial"), "{}", page.body);
    assert_eq!(
        get(s.admin, "/console/changes/new?kind=ship", &vera).status,
        403
    );

    // Both editors open the same change; the dry run shows users moving.
    let (change, base, preview) = ship_preview(&s, &edna);
    assert!(preview.body.contains("moved-share"), "{}", preview.body);
    assert!(preview.body.contains("ship"), "{}", preview.body);
    let (change2, base2, _) = ship_preview(&s, &ed);
    assert_eq!((&change, &base), (&change2, &base2));
    // A comment is required.
    let empty = post(
        s.admin,
        "/console/changes",
        &edna,
        &[
            ("csrf", &edna_csrf),
            ("change", &change),
            ("base", &base),
            ("comment", " "),
        ],
    );
    assert_eq!(empty.status, 400);
    let before = paywall_flows(&s, &key);
    assert!(
        before.iter().any(|f| f != DEMO_TRIAL_FLOW),
        "control is served before"
    );

    let applied = post(
        s.admin,
        "/console/changes",
        &edna,
        &[
            ("csrf", &edna_csrf),
            ("change", &change),
            ("base", &base),
            ("comment", "trial wins on purchases"),
        ],
    );
    assert_eq!(applied.status, 303, "{}", applied.body);
    wait_all_trial(&s, &key).await;

    // The second editor's change was made on the old revision: refused, nothing written.
    let revision = |s: &Served| {
        let (code, out, _) = run(
            &["catalog", "history", "--json"],
            &[("FLOWGATE__DATABASE__URL", s.db.url.as_str())],
        );
        assert_eq!(code, Some(0));
        serde_json::from_str::<Value>(&out).unwrap()[0]["revision"]
            .as_u64()
            .unwrap()
    };
    let at = revision(&s);
    let stale = post(
        s.admin,
        "/console/changes",
        &ed,
        &[
            ("csrf", &ed_csrf),
            ("change", &change2),
            ("base", &base2),
            ("comment", "me too"),
        ],
    );
    assert_eq!(stale.status, 409, "{}", stale.body);
    assert!(stale.body.contains("stale_base") && stale.body.contains("changed since"));
    assert_eq!(revision(&s), at, "nothing written");

    // The audit log names the editor, the comment and the revisions; the history the change.
    let entries = audit_cli(&s, &["--action", "catalog.change"]);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["actor"], "edna@example.com");
    assert_eq!(entries[0]["comment"], "trial wins on purchases");
    assert_eq!(entries[0]["revision_after"].as_u64(), Some(at));
    assert_eq!(
        entries[0]["revision_before"].as_u64(),
        base.parse::<u64>().ok()
    );
    assert!(entries[0]["detail"]["description"]
        .as_str()
        .unwrap()
        .contains("trial"));
    assert!(has(
        &audit_cli(&s, &[]),
        "cli",
        "catalog.import",
        Some("demo-catalog.json")
    ));
}

#[tokio::test]
async fn with_review_a_change_waits_for_another_person_and_resolve_is_unchanged_until_then() {
    let s = served_with_review().await;
    let key = demo_key(&s);
    let (edna, edna_csrf) = person(&s, "edna@example.com", "editor");
    let (ed, ed_csrf) = person(&s, "ed@example.com", "editor");
    let (change, base, preview) = ship_preview(&s, &edna);
    assert!(preview.body.contains("Propose for review"));
    // D35: a form that says it goes against the verdict is refused without its box ticked.
    let unconfirmed = post(
        s.admin,
        "/console/changes",
        &edna,
        &[
            ("csrf", &edna_csrf),
            ("change", &change),
            ("base", &base),
            ("comment", "ship it"),
            ("against", "Keep running"),
        ],
    );
    assert_eq!(unconfirmed.status, 400, "{}", unconfirmed.body);
    assert!(
        unconfirmed.body.contains("against the verdict"),
        "{}",
        unconfirmed.body
    );
    let proposed = post(
        s.admin,
        "/console/changes",
        &edna,
        &[
            ("csrf", &edna_csrf),
            ("change", &change),
            ("base", &base),
            ("comment", "ship it"),
        ],
    );
    assert_eq!(proposed.status, 303, "{}", proposed.body);
    let at = proposed.header("location").unwrap().to_owned();
    // Pending: resolve is unchanged.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(paywall_flows(&s, &key).iter().any(|f| f != DEMO_TRIAL_FLOW));
    let page = get(s.admin, &at, &edna);
    assert!(
        page.body.contains("pending") && page.body.contains("id=\"own\""),
        "{}",
        page.body
    );
    assert!(!page.body.contains("action=\"/console/changes/") || !page.body.contains("approve\""));
    // The author cannot approve, even by posting.
    let own = post(
        s.admin,
        &format!("{at}/approve"),
        &edna,
        &[("csrf", &edna_csrf), ("base", &base), ("comment", "me")],
    );
    assert_eq!(own.status, 403, "{}", own.body);
    // Another editor sees the dry run recomputed and approves.
    let page = get(s.admin, &at, &ed);
    assert!(page.body.contains("Approve and apply"), "{}", page.body);
    let approve_base = {
        let at = page.body.find("name=\"base\" value=\"").unwrap() + 19;
        page.body[at..at + page.body[at..].find('"').unwrap()].to_owned()
    };
    let approved = post(
        s.admin,
        &format!("{at}/approve"),
        &ed,
        &[
            ("csrf", &ed_csrf),
            ("base", &approve_base),
            ("comment", "agreed"),
        ],
    );
    assert_eq!(approved.status, 303, "{}", approved.body);
    wait_all_trial(&s, &key).await;
    let page = get(s.admin, &at, &ed);
    assert!(page.body.contains("applied"), "{}", page.body);
    // Approving twice: already decided.
    let again = post(
        s.admin,
        &format!("{at}/approve"),
        &ed,
        &[
            ("csrf", &ed_csrf),
            ("base", &approve_base),
            ("comment", "again"),
        ],
    );
    assert_eq!(again.status, 409);
    let entries = audit_cli(&s, &[]);
    assert!(has(&entries, "edna@example.com", "change.propose", None));
    assert!(has(&entries, "ed@example.com", "change.approve", None));
    assert!(has(&entries, "ed@example.com", "catalog.change", None));
}

/// D28 in a real browser: an editor opens the link `flowgate users add` printed, chooses a
/// password, ships the demo's trial from the experiment's page with a comment; resolve then
/// serves the trial's flow to everyone, and the audit log page names the editor and the
/// comment. Takes the screenshots of docs/console.md's new pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_ships_a_variant_in_a_browser_and_the_audit_log_names_them() {
    let s = Served::start_on(Backend::Sqlite, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .unwrap();
    let key = demo_key(&s);
    let link = add(&s, "edna@example.com", "editor");
    let base = format!("http://{}", s.admin);
    let browser = Browser::start().await;
    let c = &browser.client;

    c.goto(&format!("{base}{link}")).await.unwrap();
    wait_path(&browser, "/console/set-password").await;
    browser.screenshot("set-password").await;
    type_into(&browser, "#password", "edna's long password").await;
    type_into(&browser, "#confirm", "edna's long password").await;
    click(&browser, "#set-password button[type=submit]").await;
    wait_path(&browser, "/console/experiments").await;
    assert!(text(&browser, "header .who")
        .await
        .contains("edna@example.com (editor)"));

    c.goto(&format!("{base}/console/experiments/{DEMO_EXPERIMENT}"))
        .await
        .unwrap();
    wait_path(&browser, &format!("/console/experiments/{DEMO_EXPERIMENT}")).await;
    click(&browser, "form.ship button[data-variant=trial]").await;
    wait_path(&browser, "/console/changes/new").await;
    // D35: too few users for a verdict yet (keep running), so shipping goes against it: the
    // page says so and the form asks for a confirmation.
    let against = text(&browser, "#against-verdict").await;
    assert!(against.contains("Keep running"), "{against}");
    click(&browser, "#confirm-against").await;
    let described = text(&browser, "#change-description").await;
    assert!(described.contains("trial"), "{described}");
    // The dry run: the experiment stops, all its users leave it (for the shipped flow).
    let moved = text(&browser, "#moved tbody tr").await;
    assert!(
        moved.contains("running → concluded") && moved.contains("100.00%"),
        "{moved}"
    );
    type_into(&browser, "#comment", "trial wins on purchases").await;
    browser.screenshot("change").await;
    click(&browser, "#apply-change button[type=submit]").await;
    wait_path(&browser, "/console/changes").await;
    assert!(text(&browser, "#applied").await.contains("Applied"));
    wait_all_trial(&s, &key).await;

    c.goto(&format!("{base}/console/audit?action=catalog.change"))
        .await
        .unwrap();
    wait_path(&browser, "/console/audit").await;
    assert_eq!(
        text(&browser, "#audit tbody tr td.actor").await,
        "edna@example.com"
    );
    assert_eq!(
        text(&browser, "#audit tbody tr td.comment").await,
        "trial wins on purchases"
    );
    browser.screenshot("audit").await;

    // An admin's People page (the admin token's break glass, folded on the sign-in page).
    click(&browser, "form.sign-out button").await;
    wait_path(&browser, "/console/sign-in").await;
    click(&browser, "details summary").await;
    type_into(&browser, "#token", TOKEN).await;
    click(&browser, "#sign-in button[type=submit]").await;
    wait_path(&browser, "/console/experiments").await;
    c.goto(&format!("{base}/console/people")).await.unwrap();
    wait_path(&browser, "/console/people").await;
    assert!(text(&browser, "#people").await.contains("edna@example.com"));
    browser.screenshot("people").await;
}

/// Signs in the browser with an email and the password [`person`] gave it.
async fn browser_sign_in(browser: &Browser, base: &str, email: &str) {
    browser
        .client
        .goto(&format!("{base}/console/sign-in"))
        .await
        .unwrap();
    wait_path(browser, "/console/sign-in").await;
    type_into(browser, "#email", email).await;
    type_into(browser, "#password", &format!("{email} long password")).await;
    click(browser, "#password-sign-in button[type=submit]").await;
    wait_path(browser, "/console/experiments").await;
}

/// D28's review in a real browser: an editor proposes shipping the demo's trial; the change
/// waits, its author is offered no approval, and resolve is unchanged; another editor opens
/// it, approves with a comment, and resolve then serves the trial's flow.
#[tokio::test]
async fn with_review_another_editor_approves_in_a_browser() {
    let s = served_with_review().await;
    let key = demo_key(&s);
    person(&s, "edna@example.com", "editor");
    person(&s, "ed@example.com", "editor");
    let base = format!("http://{}", s.admin);
    let browser = Browser::start().await;
    let c = &browser.client;

    browser_sign_in(&browser, &base, "edna@example.com").await;
    c.goto(&format!("{base}/console/experiments/{DEMO_EXPERIMENT}"))
        .await
        .unwrap();
    wait_path(&browser, &format!("/console/experiments/{DEMO_EXPERIMENT}")).await;
    click(&browser, "form.ship button[data-variant=trial]").await;
    wait_path(&browser, "/console/changes/new").await;
    // D35: too few users for a verdict yet (keep running), so shipping goes against it: the
    // page says so and the form asks for a confirmation.
    let against = text(&browser, "#against-verdict").await;
    assert!(against.contains("Keep running"), "{against}");
    click(&browser, "#confirm-against").await;
    assert_eq!(
        text(&browser, "#apply-change button[type=submit]").await,
        "Propose for review"
    );
    type_into(&browser, "#comment", "trial wins, please check").await;
    click(&browser, "#apply-change button[type=submit]").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let change = loop {
        let path = crate::console::path_of(&browser).await;
        if path.starts_with("/console/changes/") && path != "/console/changes/new" {
            break path;
        }
        assert!(Instant::now() < deadline, "the browser shows {path}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    wait_path(&browser, &change).await;
    assert_eq!(text(&browser, "#change-state").await, "pending");
    assert!(text(&browser, "#own")
        .await
        .contains("another editor or admin"));
    assert_eq!(
        count(&browser, "#approve").await,
        0,
        "the author may not approve"
    );
    browser.screenshot("review-pending").await;
    // Until approved, resolve serves what it served.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(paywall_flows(&s, &key).iter().any(|f| f != DEMO_TRIAL_FLOW));

    click(&browser, "form.sign-out button").await;
    wait_path(&browser, "/console/sign-in").await;
    browser_sign_in(&browser, &base, "ed@example.com").await;
    c.goto(&format!("{base}{change}")).await.unwrap();
    wait_path(&browser, &change).await;
    assert_eq!(
        text(&browser, "#author").await.split(',').next(),
        Some("edna@example.com")
    );
    type_into(&browser, "#approve #comment", "checked: ship it").await;
    click(&browser, "#approve button[type=submit]").await;
    wait_path(&browser, &change).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while text(&browser, "#change-state").await != "applied" {
        assert!(Instant::now() < deadline, "the change was not applied");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_all_trial(&s, &key).await;
    let entries = audit_cli(&s, &["--action", "change.approve"]);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["actor"], "ed@example.com");
    assert_eq!(entries[0]["comment"], "checked: ship it");
}

/// The hidden fields of each form of class `class` on a page, in order.
fn forms_of(body: &str, class: &str) -> Vec<Vec<(String, String)>> {
    let marker = format!("<form class=\"{class}\"");
    body.match_indices(&marker)
        .map(|(at, _)| {
            let form = &body[at..at + body[at..].find("</form>").unwrap()];
            form.split("<input type=\"hidden\" ")
                .skip(1)
                .map(|input| {
                    let attr = |name: &str| {
                        let start = input.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
                        input[start..start + input[start..].find('"').unwrap()].to_owned()
                    };
                    (attr("name"), attr("value"))
                })
                .collect()
        })
        .collect()
}

/// Opens the change a catalog page's form asks for and applies it with `comment`.
fn apply_form(s: &Served, cookie: &str, csrf: &str, fields: &[(String, String)], comment: &str) {
    let query: Vec<String> = fields.iter().map(|(n, v)| format!("{n}={v}")).collect();
    let page = get(
        s.admin,
        &format!("/console/changes/new?{}", query.join("&")),
        cookie,
    );
    assert_eq!(page.status, 200, "{}", page.body);
    let field = |name: &str| hidden_field(&page.body, name);
    let applied = post(
        s.admin,
        "/console/changes",
        cookie,
        &[
            ("csrf", csrf),
            ("change", &field("change")),
            ("base", &field("base")),
            ("comment", comment),
        ],
    );
    assert_eq!(applied.status, 303, "{}", applied.body);
}

/// Resolve's answer for onboarding once it satisfies `done`, within 10 s (replicas read a
/// catalog change within their refresh interval).
async fn wait_onboarding(s: &Served, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, reply) = crate::support::resolve_onboarding(s);
        assert_eq!(status, 200, "{reply}");
        if done(&reply) {
            return reply;
        }
        assert!(Instant::now() < deadline, "resolve still answers {reply}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_editor_publishes_a_flow_version_and_turns_a_rule_off_from_the_catalog_page() {
    let s = Served::start_on(Backend::Sqlite, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .unwrap();
    // A third version of the onboarding flow, not published.
    let mut doc = crate::fixtures::catalog_json();
    let flow = &mut doc["workspaces"][0]["apps"][0]["flows"][0];
    flow["versions"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "id": "40000000-0000-4000-8000-0000000000f3", "version": 3, "schema_version": 3,
            "fonts": [], "flow_schema": {"screens": ["v3"]}
        }));
    crate::support::import(&s.db.url, &doc);
    let before = wait_onboarding(&s, |r| r["flow_version"] == 2).await;
    let (edna, edna_csrf) = person(&s, "edna@example.com", "editor");
    let (vera, _) = person(&s, "vera@example.com", "viewer");

    // A viewer's catalog page has no change forms.
    let page = get(s.admin, "/console/catalog", &vera);
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(forms_of(&page.body, "inline publish").is_empty());
    assert!(forms_of(&page.body, "inline rule-switch").is_empty());

    // Publish version 3, then go back to version 2: each through its dry run and a comment.
    let page = get(s.admin, "/console/catalog", &edna);
    let publish = forms_of(&page.body, "inline publish");
    let to_v3 = publish
        .iter()
        .find(|f| f.contains(&("version".into(), "3".into())))
        .unwrap_or_else(|| panic!("a form publishing version 3: {publish:?}"));
    apply_form(&s, &edna, &edna_csrf, to_v3, "version 3 is ready");
    wait_onboarding(&s, |r| r["flow_version"] == 3).await;
    let page = get(s.admin, "/console/catalog", &edna);
    let back = forms_of(&page.body, "inline publish")
        .into_iter()
        .find(|f| f.contains(&("version".into(), "2".into())))
        .expect("a form going back to version 2");
    apply_form(&s, &edna, &edna_csrf, &back, "back to 2");
    wait_onboarding(&s, |r| r["flow_version"] == 2).await;

    // Turn the first onboarding rule off: resolve no longer serves its flow; then on again.
    let page = get(s.admin, "/console/catalog", &edna);
    let switch = forms_of(&page.body, "inline rule-switch");
    let off = switch
        .iter()
        .find(|f| {
            f.contains(&("placement".into(), "onboarding".into()))
                && f.contains(&("enabled".into(), "false".into()))
        })
        .unwrap_or_else(|| panic!("a form turning an onboarding rule off: {switch:?}"))
        .clone();
    apply_form(&s, &edna, &edna_csrf, &off, "pause onboarding");
    let during = wait_onboarding(&s, |r| r["flow_id"] != before["flow_id"]).await;
    let page = get(s.admin, "/console/catalog", &edna);
    assert!(page.body.contains("off: "), "{}", page.body);
    let on: Vec<(String, String)> = off
        .iter()
        .map(|(n, v)| {
            (
                n.clone(),
                if n == "enabled" {
                    "true".into()
                } else {
                    v.clone()
                },
            )
        })
        .collect();
    apply_form(&s, &edna, &edna_csrf, &on, "resume onboarding");
    wait_onboarding(&s, |r| r["flow_id"] == before["flow_id"]).await;
    assert_ne!(during["flow_id"], before["flow_id"]);

    let entries = audit_cli(&s, &["--action", "catalog.change"]);
    let comments: Vec<&str> = entries
        .iter()
        .map(|e| e["comment"].as_str().unwrap())
        .collect();
    assert_eq!(
        comments,
        [
            "resume onboarding",
            "pause onboarding",
            "back to 2",
            "version 3 is ready"
        ]
    );
    assert!(entries.iter().all(|e| e["actor"] == "edna@example.com"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_deletes_expired_sessions_and_audit_entries_past_retention_when_it_starts() {
    use flowgate_domain::ids::PersonId;
    use flowgate_domain::people::{
        sha256_hex, AuditAction, AuditQuery, NewAuditEntry, Person, Role, SessionRecord,
    };
    use flowgate_domain::ports::{AuditLog as _, PeopleStore as _};
    use time::OffsetDateTime;

    let mut s = Served::start_on(
        Backend::Sqlite,
        &[
            ("FLOWGATE__ADMIN__TOKEN", TOKEN),
            ("FLOWGATE__AUDIT__RETENTION_DAYS", "30"),
        ],
    )
    .await
    .unwrap();
    let store = s.db.store.clone();
    let now = OffsetDateTime::now_utc();
    let ada = Person::new(PersonId::new_v7(now), "ada@example.com", Role::Viewer, now).unwrap();
    store.add_person(ada.clone()).await.unwrap();
    let session = |id: &str, expires_at: OffsetDateTime| SessionRecord {
        id_hash: sha256_hex(id.as_bytes()),
        person_id: Some(ada.id),
        actor: ada.email.clone(),
        role: Role::Viewer,
        csrf: "c".repeat(64),
        created_at: now - time::Duration::days(2),
        expires_at,
        address: None,
    };
    let ended = session("ended", now - time::Duration::hours(1));
    let open = session("open", now + time::Duration::hours(1));
    store.create_session(ended.clone()).await.unwrap();
    store.create_session(open.clone()).await.unwrap();
    let entry = |at: OffsetDateTime, target: &str| NewAuditEntry {
        at,
        actor: "cli".into(),
        action: AuditAction::PersonAdd,
        target: Some(target.into()),
        comment: None,
        revision_before: None,
        revision_after: None,
        detail: Value::Null,
    };
    store
        .append_audit(entry(now - time::Duration::days(31), "old@example.com"))
        .await
        .unwrap();
    store
        .append_audit(entry(now - time::Duration::days(29), "kept@example.com"))
        .await
        .unwrap();
    let targets = |entries: Vec<flowgate_domain::people::AuditEntry>| -> Vec<String> {
        entries.into_iter().filter_map(|e| e.target).collect()
    };
    let before = now - time::Duration::days(3);
    assert!(store
        .session(&ended.id_hash, before)
        .await
        .unwrap()
        .is_some());

    // The housekeeping runs when serve starts, then hourly.
    s.kill9();
    s.restart().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let gone = store
            .session(&ended.id_hash, before)
            .await
            .unwrap()
            .is_none();
        let audit = targets(store.list_audit(&AuditQuery::latest(100)).await.unwrap());
        if gone && !audit.iter().any(|t| t == "old@example.com") {
            assert!(audit.iter().any(|t| t == "kept@example.com"), "{audit:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after the restart: expired session gone {gone}, audit {audit:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(store.session(&open.id_hash, now).await.unwrap().is_some());
}

/// D35: a reviewer rejects a pending change with why; the change is `rejected`, nothing moves,
/// its author reads the why on its page, it cannot be approved after, and the audit log names
/// the reviewer. The author cannot reject their own (they withdraw it). The command line
/// rejects another, as `cli`.
#[tokio::test]
async fn with_review_a_reviewer_rejects_a_change_with_why() {
    let s = served_with_review().await;
    let key = demo_key(&s);
    let (edna, edna_csrf) = person(&s, "edna@example.com", "editor");
    let (ed, ed_csrf) = person(&s, "ed@example.com", "editor");
    let propose = |comment: &str| {
        let (change, base, _) = ship_preview(&s, &edna);
        let proposed = post(
            s.admin,
            "/console/changes",
            &edna,
            &[
                ("csrf", &edna_csrf),
                ("change", &change),
                ("base", &base),
                ("comment", comment),
            ],
        );
        assert_eq!(proposed.status, 303, "{}", proposed.body);
        proposed.header("location").unwrap().to_owned()
    };
    let at = propose("ship it");
    // The author sees no reject form and cannot reject by posting.
    assert!(!get(s.admin, &at, &edna).body.contains("id=\"reject\""));
    let own = post(
        s.admin,
        &format!("{at}/reject"),
        &edna,
        &[("csrf", &edna_csrf), ("comment", "me")],
    );
    assert_eq!(own.status, 403, "{}", own.body);
    // Another editor rejects it with why; a rejection without why is refused.
    assert!(get(s.admin, &at, &ed).body.contains("id=\"reject\""));
    let bare = post(
        s.admin,
        &format!("{at}/reject"),
        &ed,
        &[("csrf", &ed_csrf), ("comment", "  ")],
    );
    assert_eq!(bare.status, 400, "{}", bare.body);
    let rejected = post(
        s.admin,
        &format!("{at}/reject"),
        &ed,
        &[("csrf", &ed_csrf), ("comment", "not before the sale ends")],
    );
    assert_eq!(rejected.status, 303, "{}", rejected.body);
    let page = get(s.admin, &at, &edna);
    assert!(
        page.body.contains("rejected") && page.body.contains("not before the sale ends"),
        "{}",
        page.body
    );
    // Nothing moved, and it cannot be approved now.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(paywall_flows(&s, &key).iter().any(|f| f != DEMO_TRIAL_FLOW));
    let late = post(
        s.admin,
        &format!("{at}/approve"),
        &ed,
        &[("csrf", &ed_csrf), ("base", "0"), ("comment", "too late")],
    );
    assert_eq!(late.status, 409, "{}", late.body);
    let audit = audit_cli(&s, &["--action", "change.reject"]);
    assert!(
        audit
            .iter()
            .any(|e| e["actor"] == "ed@example.com" && e["comment"] == "not before the sale ends"),
        "{audit:?}"
    );

    // The command line rejects another proposal, as `cli`.
    let other = propose("ship it again");
    let id = other.rsplit('/').next().unwrap();
    let env = [("FLOWGATE__DATABASE__URL", s.db.url.as_str())];
    let (code, out, err) = run(
        &[
            "changes",
            "reject",
            id,
            "--comment",
            "one at a time",
            "--json",
        ],
        &env,
    );
    assert_eq!(code, Some(0), "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["state"], "rejected", "{shown}");
    let (code, _, err) = run(&["changes", "reject", id, "--comment", "again"], &env);
    assert_eq!(code, Some(4), "only a pending change is rejected: {err}");
    assert!(err.contains("only a pending change is rejected"), "{err}");
    assert!(has(&audit_cli(&s, &[]), "cli", "change.reject", Some(id)));

    // The admin API rejects a third, as `admin-token`: with the token only, with a comment
    // only, once.
    let third = propose("ship it a third time");
    let id = third.rsplit('/').next().unwrap();
    let path = format!("/admin/v1/changes/{id}/reject");
    let body = br#"{"comment": "not this week"}"#;
    let (status, _) = http(s.admin, "POST", &path, None, body).unwrap();
    assert_eq!(status, 401, "no token, nothing decided");
    let (status, problem) =
        http(s.admin, "POST", &path, Some(TOKEN), br#"{"comment": " "}"#).unwrap();
    assert_eq!(status, 400, "{problem}");
    assert!(problem.contains("\"invalid_comment\""), "{problem}");
    let (status, problem) = http(s.admin, "POST", &path, Some(TOKEN), br#"{"why": "x"}"#).unwrap();
    assert_eq!(status, 400, "{problem}");
    assert!(
        problem.contains("\"invalid_body\"") && problem.contains("why"),
        "{problem}"
    );
    let (status, shown) = http(s.admin, "POST", &path, Some(TOKEN), body).unwrap();
    assert_eq!(status, 200, "{shown}");
    let shown: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(
        (&shown["state"], &shown["decided_by"], &shown["note"]),
        (
            &json!("rejected"),
            &json!("admin-token"),
            &json!("not this week")
        )
    );
    let (status, problem) = http(s.admin, "POST", &path, Some(TOKEN), body).unwrap();
    assert_eq!(status, 409, "{problem}");
    assert!(problem.contains("\"not_pending\""), "{problem}");
    let missing = format!("/admin/v1/changes/{}/reject", uuid::Uuid::new_v4());
    let (status, _) = http(s.admin, "POST", &missing, Some(TOKEN), body).unwrap();
    assert_eq!(status, 404);
    assert!(has(
        &audit_cli(&s, &[]),
        "admin-token",
        "change.reject",
        Some(id)
    ));
}

/// D35: with `catalog.require_review`, `flowgate import` waits for review: refused without
/// `--author` or `--apply-now`; `--author EMAIL` (an editor) proposes it, which changes nothing
/// until another editor approves it in the console; `--apply-now` imports at once, audited as
/// break-glass.
#[tokio::test]
async fn with_review_an_import_is_proposed_or_breaks_glass() {
    let s = served_with_review().await;
    demo_key(&s);
    let (_edna, _) = person(&s, "edna@example.com", "editor");
    let (ed, ed_csrf) = person(&s, "ed@example.com", "editor");
    let review = [
        ("FLOWGATE__DATABASE__URL", s.db.url.as_str()),
        ("FLOWGATE__CATALOG__REQUIRE_REVIEW", "true"),
    ];
    let exported = |name_part: &str| {
        let (code, out, err) = run(&["catalog", "export"], &review);
        assert_eq!(code, Some(0), "{err}");
        out.contains(name_part)
    };
    let file_named = |name: &str| {
        let (_, out, _) = run(&["catalog", "export"], &review);
        let mut catalog: Value = serde_json::from_str(&out).unwrap();
        catalog["workspaces"][0]["name"] = name.into();
        let path = std::env::temp_dir().join(format!(
            "flowgate-review-{}.json",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::write(&path, catalog.to_string()).unwrap();
        path
    };
    let file = file_named("Renamed by review");
    let path = file.to_str().unwrap();
    let (code, _, err) = run(&["import", path], &review);
    assert_eq!(code, Some(4), "{err}");
    assert!(
        err.contains("catalog.require_review") && err.contains("--author"),
        "{err}"
    );
    let (code, _, err) = run(&["import", path, "--author", "nobody@example.com"], &review);
    assert_eq!(code, Some(4), "{err}");
    let (code, out, err) = run(
        &["import", path, "--author", "edna@example.com", "--json"],
        &review,
    );
    assert_eq!(code, Some(0), "{err}");
    let proposal: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(proposal["state"], "pending", "{proposal}");
    assert!(!exported("Renamed by review"), "a proposal imports nothing");
    // Another editor approves it in the console: imported then.
    let at = format!(
        "/console/changes/{}",
        proposal["change_id"].as_str().unwrap()
    );
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
    assert!(exported("Renamed by review"), "approved: imported");
    // Break-glass: at once, and the audit log says so.
    let file = file_named("Renamed in a hurry");
    let (code, _, err) = run(&["import", file.to_str().unwrap(), "--apply-now"], &review);
    assert_eq!(code, Some(0), "{err}");
    assert!(exported("Renamed in a hurry"));
    let imports = audit_cli(&s, &["--action", "catalog.import"]);
    assert!(
        imports
            .iter()
            .any(|e| e["actor"] == "cli"
                && e["comment"].as_str().unwrap_or("").contains("break-glass")),
        "{imports:?}"
    );
}
