//! Every console route and post, per role (D24, D28): signed out, each goes to the sign-in
//! page; a lesser role's request is 403 and changes nothing; every signed-in post without the
//! session's CSRF token is 403 and changes nothing; the role that may use a route is never
//! refused. The table is checked against the routes the console registers, so a new route
//! cannot miss it.

use std::net::SocketAddr;

use flowgate_store::Backend;

use crate::console::{exchange, post, Answer, TOKEN};
use crate::console_rollouts::start_form;
use crate::people::{
    add, demo_key, get, hidden_field, password_sign_in, person, session_of, ship_preview,
};
use crate::support::{run, Served};

/// The console's routes as its source registers them.
const CONSOLE_SOURCE: &str = include_str!("../../../flowgate-http/src/console/mod.rs");

/// Roles from least to most.
const ROLES: [&str; 3] = ["viewer", "editor", "admin"];

/// One request of the table: the route as registered, the path with ids filled in, the least
/// role that may use it (`None`: public) and, for a post, the fields of a form that would act.
struct Request {
    method: &'static str,
    route: &'static str,
    path: String,
    least: Option<&'static str>,
    form: Vec<(&'static str, String)>,
}

/// `(method, route)` of every route `console::scope` registers.
fn registered_routes() -> Vec<(String, String)> {
    let scope = &CONSOLE_SOURCE[CONSOLE_SOURCE.find("web::scope(\"/console\")").unwrap()..];
    let scope = &scope[..scope.find(".default_service").unwrap()];
    let mut routes = Vec::new();
    for piece in scope.split("route!(\"").skip(1) {
        let route = &piece[..piece.find('"').unwrap()];
        for (method, marker) in [("GET", "web::get()"), ("POST", "web::post()")] {
            if piece.contains(marker) {
                routes.push((method.to_owned(), route.to_owned()));
            }
        }
    }
    routes.sort();
    routes
}

/// What a refused request must not change: the audit log, the people, the keys, the
/// rollouts and the catalog's history, as the command line lists them.
fn state(s: &Served) -> Vec<String> {
    let env = [("FLOWGATE__DATABASE__URL", s.db.url.as_str())];
    [
        &["audit", "list", "--json", "--limit", "1000"][..],
        &["users", "list", "--json"],
        &[
            "keys",
            "list",
            "--workspace",
            crate::fixtures::WS1,
            "--json",
        ],
        &["rollouts", "list", "--json"],
        &["catalog", "history", "--json", "--limit", "1000"],
    ]
    .iter()
    .map(|args| {
        let (code, out, err) = run(args, &env);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        out
    })
    .collect()
}

/// The request of `r` with `cookie`, its form completed with `csrf` when one is given.
fn send(addr: SocketAddr, r: &Request, cookie: &str, csrf: Option<&str>) -> Answer {
    if r.method == "GET" {
        return get(addr, &r.path, cookie);
    }
    let mut form: Vec<(&str, &str)> = r.form.iter().map(|(n, v)| (*n, v.as_str())).collect();
    if let Some(csrf) = csrf {
        form.push(("csrf", csrf));
    }
    if r.route == "/preview" {
        return multipart(addr, &r.path, cookie, &form);
    }
    post(addr, &r.path, cookie, &form)
}

/// A `multipart/form-data` post of text fields and a small catalog file.
fn multipart(addr: SocketAddr, path: &str, cookie: &str, fields: &[(&str, &str)]) -> Answer {
    let boundary = "flowgate-roles-boundary";
    let mut body = String::new();
    for (name, value) in fields {
        body.push_str(&format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
        ));
    }
    body.push_str(&format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"c.json\"\r\n\
         Content-Type: application/json\r\n\r\n{{}}\r\n--{boundary}--\r\n"
    ));
    let content_type = format!("multipart/form-data; boundary={boundary}");
    exchange(
        addr,
        "POST",
        path,
        &[("Content-Type", &content_type), ("Cookie", cookie)],
        &body,
    )
}

fn rank(role: &str) -> usize {
    ROLES.iter().position(|r| *r == role).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_console_route_and_post_is_refused_below_its_role_and_without_csrf() {
    let s = Served::start_on(Backend::Sqlite, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .unwrap();
    let addr = s.admin;
    demo_key(&s);
    let sessions: Vec<(String, String)> = ROLES
        .iter()
        .map(|role| person(&s, &format!("{role}@example.com"), role))
        .collect();
    let (editor, _) = &sessions[rank("editor")];
    let (change, base, _) = ship_preview(&s, editor);
    add(&s, "bystander@example.com", "viewer");
    let people = get(addr, "/console/people", &sessions[rank("admin")].0);
    let bystander_id = {
        let at = people
            .body
            .find("data-email=\"bystander@example.com\"")
            .unwrap();
        let action = people.body[at..].find("action=\"/console/people/").unwrap() + at + 24;
        people.body[action..action + 36].to_owned()
    };
    let key_id = crate::console::listed_keys(&s, crate::fixtures::WS1)[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A second session of the viewer's, to be revoked (the first one stays in use).
    let (second, _) = session_of(
        addr,
        &password_sign_in(
            addr,
            "viewer@example.com",
            "viewer@example.com long password",
        ),
    );
    let session_id = {
        let page = get(addr, "/console/sessions", &second);
        let row = &page.body[page.body.find("(this session)").unwrap()..];
        hidden_field(row, "session")
    };
    let unknown = "00000000-0000-4000-8000-00000000dead";
    let experiment = "d0000000-0000-4000-8000-0000000000c1";
    let owned = |pairs: &[(&'static str, &str)]| -> Vec<(&'static str, String)> {
        pairs.iter().map(|(n, v)| (*n, (*v).to_owned())).collect()
    };
    let rollout_form: Vec<(&'static str, String)> = start_form("", "1,50,100")
        .into_iter()
        .filter(|(n, _)| *n != "csrf")
        .map(|(n, v)| (n, v.to_owned()))
        .collect();
    let comment = owned(&[("comment", "a refused change")]);
    let page = |route: &'static str, path: String, least: Option<&'static str>| Request {
        method: "GET",
        route,
        path,
        least,
        form: Vec::new(),
    };
    let form = |route: &'static str, path: String, least, form| Request {
        method: "POST",
        route,
        path,
        least,
        form,
    };
    let at = |p: &str| format!("/console{p}");
    let table = vec![
        page("", at(""), Some("viewer")),
        page("/", at("/"), Some("viewer")),
        page("/style.css", at("/style.css"), None),
        page("/sign-in", at("/sign-in"), None),
        form("/sign-in", at("/sign-in"), None, Vec::new()),
        page("/oidc/start", at("/oidc/start"), None),
        page("/oidc/callback", at("/oidc/callback"), None),
        page("/set-password", at("/set-password"), None),
        form("/set-password", at("/set-password"), None, Vec::new()),
        page("/people", at("/people"), Some("admin")),
        form(
            "/people",
            at("/people"),
            Some("admin"),
            owned(&[("email", "new@example.com"), ("role", "admin")]),
        ),
        form(
            "/people/{personId}",
            at(&format!("/people/{bystander_id}")),
            Some("admin"),
            owned(&[("action", "disable")]),
        ),
        page("/sessions", at("/sessions"), Some("viewer")),
        form(
            "/sessions/revoke",
            at("/sessions/revoke"),
            Some("viewer"),
            owned(&[("session", &session_id)]),
        ),
        page("/audit", at("/audit"), Some("viewer")),
        page("/changes", at("/changes"), Some("viewer")),
        form(
            "/changes",
            at("/changes"),
            Some("editor"),
            owned(&[
                ("change", &change),
                ("base", &base),
                ("comment", "a refused ship"),
            ]),
        ),
        page(
            "/changes/new",
            at(&format!(
                "/changes/new?kind=ship&experiment={experiment}&variant=d0000000-0000-4000-8000-0000000000b2"
            )),
            Some("editor"),
        ),
        page(
            "/changes/{changeId}",
            at(&format!("/changes/{unknown}")),
            Some("viewer"),
        ),
        form(
            "/changes/{changeId}/approve",
            at(&format!("/changes/{unknown}/approve")),
            Some("editor"),
            owned(&[("base", &base)]),
        ),
        form(
            "/changes/{changeId}/withdraw",
            at(&format!("/changes/{unknown}/withdraw")),
            Some("editor"),
            Vec::new(),
        ),
        form(
            "/changes/{changeId}/reject",
            at(&format!("/changes/{unknown}/reject")),
            Some("editor"),
            comment.clone(),
        ),
        page("/rollouts", at("/rollouts"), Some("viewer")),
        form("/rollouts", at("/rollouts"), Some("editor"), rollout_form),
        page("/rollouts/new", at("/rollouts/new"), Some("editor")),
        page(
            "/rollouts/{rolloutId}",
            at(&format!("/rollouts/{unknown}")),
            Some("viewer"),
        ),
        form(
            "/rollouts/{rolloutId}/{move}",
            at(&format!("/rollouts/{unknown}/pause")),
            Some("editor"),
            comment.clone(),
        ),
        page("/experiments", at("/experiments"), Some("viewer")),
        page(
            "/experiments/{experimentId}",
            at(&format!("/experiments/{experiment}")),
            Some("viewer"),
        ),
        page("/catalog", at("/catalog"), Some("viewer")),
        page("/explain", at("/explain"), Some("viewer")),
        form(
            "/explain",
            at("/explain"),
            Some("viewer"),
            owned(&[("placement", "onboarding")]),
        ),
        page("/preview", at("/preview"), Some("viewer")),
        form("/preview", at("/preview"), Some("viewer"), Vec::new()),
        page("/history", at("/history"), Some("viewer")),
        page("/keys", at("/keys"), Some("viewer")),
        form(
            "/keys",
            at("/keys"),
            Some("editor"),
            owned(&[
                ("workspace", crate::fixtures::WS1),
                ("environment", "test"),
                ("type", "sdk"),
            ]),
        ),
        page("/keys/created", at("/keys/created"), Some("editor")),
        page(
            "/keys/{keyId}/revoke",
            at(&format!("/keys/{key_id}/revoke")),
            Some("editor"),
        ),
        form(
            "/keys/{keyId}/revoke",
            at(&format!("/keys/{key_id}/revoke")),
            Some("editor"),
            Vec::new(),
        ),
        // Last: it ends the session it is sent with.
        form("/sign-out", at("/sign-out"), Some("viewer"), Vec::new()),
    ];
    let mut listed: Vec<(String, String)> = table
        .iter()
        .map(|r| (r.method.to_owned(), r.route.to_owned()))
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        registered_routes(),
        "the table lists every console route, once"
    );

    let before = state(&s);
    for r in table.iter().filter(|r| r.least.is_some()) {
        let what = format!("{} {}", r.method, r.path);
        // Signed out: the sign-in page, whatever the form.
        let answer = send(addr, r, "", Some("x"));
        assert_eq!(answer.status, 303, "{what} signed out: {}", answer.body);
        assert_eq!(
            answer.header("location"),
            Some("/console/sign-in"),
            "{what}"
        );
        answer.assert_security_headers(&what);
        // Every post needs the session's CSRF token, even the admin's.
        if r.method == "POST" {
            let (admin, _) = &sessions[rank("admin")];
            for csrf in [None, Some("0".repeat(64))] {
                let answer = send(addr, r, admin, csrf.as_deref());
                assert_eq!(answer.status, 403, "{what} csrf {csrf:?}: {}", answer.body);
                assert!(
                    answer.body.contains("CSRF token"),
                    "{what}: {}",
                    answer.body
                );
            }
        }
        // A lesser role: 403, nothing done.
        let least = rank(r.least.unwrap());
        for (role, (cookie, csrf)) in ROLES.iter().zip(&sessions).take(least) {
            let answer = send(addr, r, cookie, Some(csrf));
            assert_eq!(answer.status, 403, "{what} as {role}: {}", answer.body);
            assert!(
                answer
                    .body
                    .contains(&format!("needs the {} role", ROLES[least])),
                "{what} as {role}: {}",
                answer.body
            );
            answer.assert_security_headers(&what);
        }
    }
    assert_eq!(
        state(&s),
        before,
        "refused requests changed nothing (audit log, people, keys, rollouts, history)"
    );

    // The role that may use a route is never refused (an unknown id is 404, an invalid
    // form 400; the posts above that would act now may).
    for r in table.iter().filter(|r| r.least.is_some()) {
        let least = rank(r.least.unwrap());
        for (role, (cookie, csrf)) in ROLES.iter().zip(&sessions).skip(least) {
            let what = format!("{} {} as {role}", r.method, r.path);
            let answer = send(addr, r, cookie, Some(csrf));
            assert!(
                [200, 303, 400, 404, 409, 410, 422].contains(&answer.status),
                "{what}: {} {}",
                answer.status,
                answer.body
            );
            if r.route == "/sign-out" {
                assert_eq!(answer.status, 303, "{what}: {}", answer.body);
                let after = get(addr, "/console/experiments", cookie);
                assert_eq!(after.header("location"), Some("/console/sign-in"), "{what}");
            } else if answer.status == 303 {
                assert_ne!(
                    answer.header("location"),
                    Some("/console/sign-in"),
                    "{what}: {}",
                    answer.body
                );
            }
            answer.assert_security_headers(&what);
        }
    }
}
