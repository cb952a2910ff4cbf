//! The operator console (D24) through the binary: in a real browser (headless Chromium over
//! WebDriver) against `serve` on SQLite with the demo's traffic, and its security rules over
//! plain HTTP: sessions, CSRF, headers, cookies, escaping, the sign-in limit.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use fantoccini::Locator;
use flowgate_store::Backend;
use serde_json::Value;

use crate::browser::Browser;
use crate::fixtures;
use crate::support::{import, run, Served};

pub(crate) const TOKEN: &str = "console-admin-token-0123456789abcdef";
const DEMO_WORKSPACE: &str = "d0000000-0000-4000-8000-000000000001";
const DEMO_APP: &str = "d0000000-0000-4000-8000-0000000000a1";
const DEMO_EXPERIMENT: &str = "d0000000-0000-4000-8000-0000000000c1";
/// Names a catalog may hold that must show as text, never run.
const SCRIPT_NAME: &str = "<script>window.pwned=1</script>";
const ATTRIBUTE_NAME: &str = "\"onload=\"window.pwned=2";
const IMAGE_NAME: &str = "<img src=x onerror=window.pwned=3>";

/// The headers every console response carries.
const SECURITY_HEADERS: [(&str, &str); 4] = [
    (
        "content-security-policy",
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("cache-control", "no-store"),
];

/// One HTTP/1.1 exchange: status, headers (names in lower case) and body.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Answer {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn cookies(&self) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == "set-cookie")
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The value of cookie `name` this answer sets.
    pub(crate) fn cookie(&self, name: &str) -> Option<String> {
        self.cookies().into_iter().find_map(|c| {
            c.split(';')
                .next()
                .and_then(|pair| pair.split_once('='))
                .filter(|(n, _)| *n == name)
                .map(|(_, v)| v.to_owned())
        })
    }

    /// The CSRF token of the page's first form.
    pub(crate) fn csrf(&self) -> String {
        let at = self
            .body
            .find("name=\"csrf\" value=\"")
            .unwrap_or_else(|| panic!("a CSRF field in {}", self.body));
        self.body[at + 19..at + 19 + 64].to_owned()
    }

    pub(crate) fn assert_security_headers(&self, what: &str) {
        for (name, value) in SECURITY_HEADERS {
            let got = self.header(name);
            // The stylesheet may be cached; everything else may not.
            if name == "cache-control" && got == Some("max-age=3600") {
                continue;
            }
            assert_eq!(got, Some(value), "{name} of {what}: {:?}", self.headers);
        }
    }
}

pub(crate) fn exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// A form post, with cookies.
pub(crate) fn post(addr: SocketAddr, path: &str, cookie: &str, form: &[(&str, &str)]) -> Answer {
    let body: Vec<String> = form
        .iter()
        .map(|(n, v)| format!("{n}={}", encode(v)))
        .collect();
    exchange(
        addr,
        "POST",
        path,
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Cookie", cookie),
        ],
        &body.join("&"),
    )
}

/// Percent-encodes a form value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Asks for the sign-in form, then posts it with `token` (and the form's own CSRF token and
/// cookie): the answer to the post.
pub(crate) fn try_sign_in(addr: SocketAddr, token: &str) -> Answer {
    let form = exchange(addr, "GET", "/console/sign-in", &[], "");
    let pre = format!(
        "flowgate_console_sign_in={}",
        form.cookie("flowgate_console_sign_in").unwrap()
    );
    post(
        addr,
        "/console/sign-in",
        &pre,
        &[("csrf", &form.csrf()), ("token", token)],
    )
}

/// Signs in over HTTP; the session cookie (`name=value`) and the session's CSRF token.
pub(crate) fn sign_in(addr: SocketAddr) -> (String, String) {
    let signed = try_sign_in(addr, TOKEN);
    assert_eq!(signed.status, 303, "{}", signed.body);
    let cookie = format!(
        "flowgate_console={}",
        signed.cookie("flowgate_console").unwrap()
    );
    let page = exchange(
        addr,
        "GET",
        "/console/experiments",
        &[("Cookie", &cookie)],
        "",
    );
    assert_eq!(page.status, 200, "{}", page.body);
    (cookie, page.csrf())
}

/// The fixture catalog with names that are markup.
fn catalog_with_markup_names() -> Value {
    let mut catalog = fixtures::catalog_json();
    let other = &mut catalog["workspaces"][1];
    other["name"] = SCRIPT_NAME.into();
    other["apps"][0]["name"] = ATTRIBUTE_NAME.into();
    other["apps"][0]["flows"][0]["name"] = IMAGE_NAME.into();
    catalog
}

/// The keys of a workspace, as `flowgate keys list --json` lists them.
pub(crate) fn listed_keys(s: &Served, workspace: &str) -> Vec<Value> {
    let (code, out, err) = run(
        &["keys", "list", "--workspace", workspace, "--json"],
        &[("FLOWGATE__DATABASE__URL", s.db.url.as_str())],
    );
    assert_eq!(code, Some(0), "{err}");
    serde_json::from_str::<Value>(&out)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn without_a_token_there_is_no_console() {
    let s = Served::start_on(Backend::Sqlite, &[]).await.unwrap();
    for path in ["/console/", "/console/sign-in", "/console/style.css"] {
        let answer = exchange(s.admin, "GET", path, &[], "");
        assert_eq!(answer.status, 404, "{path}: {}", answer.body);
    }
}

#[tokio::test]
async fn the_console_refuses_what_a_session_did_not_ask_for() {
    let s = Served::start_on(Backend::Sqlite, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .unwrap();
    import(&s.db.url, &catalog_with_markup_names());
    let admin = s.admin;

    // Without a session, every page and every form post goes to the sign-in page.
    let pages = [
        "/console/",
        "/console/experiments",
        &format!("/console/experiments/{DEMO_EXPERIMENT}"),
        "/console/catalog",
        "/console/explain",
        "/console/preview",
        "/console/history",
        "/console/keys",
        "/console/keys/00000000-0000-4000-8000-000000000000/revoke",
        "/console/no-such-page",
    ];
    for path in pages {
        let answer = exchange(admin, "GET", path, &[], "");
        assert_eq!(answer.status, 303, "GET {path}");
        assert_eq!(
            answer.header("location"),
            Some("/console/sign-in"),
            "GET {path}"
        );
        answer.assert_security_headers(path);
    }
    for path in ["/console/keys", "/console/explain", "/console/sign-out"] {
        let answer = post(admin, path, "", &[("csrf", "x")]);
        assert_eq!(answer.status, 303, "POST {path}");
        assert_eq!(answer.header("location"), Some("/console/sign-in"));
    }
    let style = exchange(admin, "GET", "/console/style.css", &[], "");
    assert_eq!(style.status, 200);
    assert!(style
        .header("content-type")
        .unwrap()
        .starts_with("text/css"));
    style.assert_security_headers("the stylesheet");

    // The sign-in form: its token must come back with its cookie.
    let form = exchange(admin, "GET", "/console/sign-in", &[], "");
    assert_eq!(form.status, 200);
    form.assert_security_headers("the sign-in page");
    let pre = format!(
        "flowgate_console_sign_in={}",
        form.cookie("flowgate_console_sign_in").unwrap()
    );
    let no_token = post(admin, "/console/sign-in", &pre, &[("token", TOKEN)]);
    assert_eq!(no_token.status, 403, "{}", no_token.body);
    assert!(no_token.cookie("flowgate_console").is_none());
    let other_token = post(
        admin,
        "/console/sign-in",
        &pre,
        &[("csrf", &"0".repeat(64)), ("token", TOKEN)],
    );
    assert_eq!(other_token.status, 403);
    // A cookie and field this server never issued, even equal, are refused (issue 49: before,
    // any equal pair signed in).
    let made_up = "0123456789abcdef".repeat(4);
    let forged_pair = post(
        admin,
        "/console/sign-in",
        &format!("flowgate_console_sign_in={made_up}"),
        &[("csrf", &made_up), ("token", TOKEN)],
    );
    assert_eq!(forged_pair.status, 403, "{}", forged_pair.body);
    assert!(forged_pair.cookie("flowgate_console").is_none());
    let wrong = post(
        admin,
        "/console/sign-in",
        &pre,
        &[
            ("csrf", &form.csrf()),
            ("token", "not-the-admin-token-at-all"),
        ],
    );
    assert_eq!(wrong.status, 401);
    assert!(
        wrong.body.contains("That is not the admin token."),
        "{}",
        wrong.body
    );
    assert!(wrong.cookie("flowgate_console").is_none());
    wrong.assert_security_headers("a refused sign-in");

    // The session cookie's attributes, plain and behind a TLS proxy.
    let signed = post(
        admin,
        "/console/sign-in",
        &pre,
        &[("csrf", &form.csrf()), ("token", TOKEN)],
    );
    assert_eq!(signed.status, 303);
    assert_eq!(signed.header("location"), Some("/console/experiments"));
    signed.assert_security_headers("the sign-in");
    let session = signed
        .cookies()
        .into_iter()
        .find(|c| c.starts_with("flowgate_console="))
        .unwrap()
        .to_owned();
    for attribute in [
        "HttpOnly",
        "SameSite=Strict",
        "Path=/console",
        "Max-Age=28800",
    ] {
        assert!(
            session.split("; ").any(|a| a == attribute),
            "{attribute} in {session}"
        );
    }
    assert!(
        !session.contains("Secure"),
        "not over plain HTTP: {session}"
    );
    let form = exchange(
        admin,
        "GET",
        "/console/sign-in",
        &[("X-Forwarded-Proto", "https")],
        "",
    );
    // Over TLS the sign-in form's cookie is `__Host-` prefixed (issue 65).
    let pre_tls = format!(
        "__Host-flowgate_console_sign_in={}",
        form.cookie("__Host-flowgate_console_sign_in").unwrap()
    );
    let over_tls = exchange(
        admin,
        "POST",
        "/console/sign-in",
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Cookie", &pre_tls),
            ("X-Forwarded-Proto", "https"),
        ],
        &format!("csrf={}&token={TOKEN}", form.csrf()),
    );
    let tls_cookie = over_tls
        .cookies()
        .into_iter()
        .find(|c| c.starts_with("flowgate_console="))
        .unwrap()
        .to_owned();
    assert!(
        tls_cookie.split("; ").any(|a| a == "Secure"),
        "{tls_cookie}"
    );

    let cookie = session.split(';').next().unwrap().to_owned();
    let page = exchange(admin, "GET", "/console/keys", &[("Cookie", &cookie)], "");
    assert_eq!(page.status, 200);
    page.assert_security_headers("the keys page");
    let csrf = page.csrf();

    // Posts without the session's CSRF token change nothing.
    let before = listed_keys(&s, fixtures::WS1);
    let create = [
        ("workspace", fixtures::WS1),
        ("environment", "test"),
        ("type", "sdk"),
        ("name", "forged"),
    ];
    let without = post(admin, "/console/keys", &cookie, &create);
    assert_eq!(without.status, 403, "{}", without.body);
    without.assert_security_headers("a refused form");
    let mut forged = create.to_vec();
    forged.push(("csrf", "f00d"));
    assert_eq!(post(admin, "/console/keys", &cookie, &forged).status, 403);
    let mut other_session = forged.clone();
    other_session.pop();
    let (_, their_csrf) = sign_in(admin);
    other_session.push(("csrf", &their_csrf));
    assert_eq!(
        post(admin, "/console/keys", &cookie, &other_session).status,
        403,
        "another session's token"
    );
    let revoke = format!(
        "/console/keys/{}/revoke?workspace={}",
        before[0]["id"].as_str().unwrap(),
        fixtures::WS1
    );
    assert_eq!(
        post(admin, &revoke, &cookie, &[("csrf", "f00d")]).status,
        403
    );
    assert_eq!(listed_keys(&s, fixtures::WS1), before, "nothing changed");
    // With it, the same post creates the key.
    let mut allowed = create.to_vec();
    allowed.push(("csrf", &csrf));
    let created = post(admin, "/console/keys", &cookie, &allowed);
    // Post/Redirect/Get (issue 49): the post answers 303 to the page that shows the key once,
    // so reloading that page creates no second key (before: 200 with the key).
    assert_eq!(created.status, 303, "{}", created.body);
    assert_eq!(created.header("location"), Some("/console/keys/created"));
    assert_eq!(listed_keys(&s, fixtures::WS1).len(), before.len() + 1);
    // The key travels sealed in a cookie of that page alone (any replica opens it).
    let sealed = created.cookie("flowgate_new_key").unwrap();
    assert!(
        sealed.starts_with("v1.") && !sealed.contains("fg_test_"),
        "{sealed}"
    );
    let shown = exchange(
        admin,
        "GET",
        "/console/keys/created",
        &[("Cookie", &format!("{cookie}; flowgate_new_key={sealed}"))],
        "",
    );
    assert_eq!(shown.status, 200, "{}", shown.body);
    assert_eq!(
        shown.cookie("flowgate_new_key").as_deref(),
        Some(""),
        "removed"
    );
    shown.assert_security_headers("the new key's page");
    assert!(
        shown.body.contains("id=\"new-key\">fg_test_"),
        "{}",
        shown.body
    );
    let reloaded = exchange(
        admin,
        "GET",
        "/console/keys/created",
        &[("Cookie", &cookie)],
        "",
    );
    assert_eq!(reloaded.status, 303, "shown once: {}", reloaded.body);
    assert_eq!(reloaded.header("location"), Some("/console/keys"));
    assert!(!reloaded.body.contains("fg_test_"));
    assert_eq!(
        listed_keys(&s, fixtures::WS1).len(),
        before.len() + 1,
        "a reload creates no key"
    );
    // A post with no body at all is a post without the CSRF token: 403, as docs/console.md
    // says (before: 400), and nothing is revoked.
    let empty = exchange(admin, "POST", &revoke, &[("Cookie", &cookie)], "");
    assert_eq!(empty.status, 403, "{}", empty.body);
    empty.assert_security_headers("a post without a body");
    assert_eq!(
        listed_keys(&s, fixtures::WS1)[0],
        before[0],
        "nothing revoked"
    );

    // Names that are markup are escaped in the HTML (the browser test checks the DOM).
    let catalog = exchange(admin, "GET", "/console/catalog", &[("Cookie", &cookie)], "");
    assert_eq!(catalog.status, 200);
    assert!(!catalog.body.contains(SCRIPT_NAME), "{}", catalog.body);
    assert!(!catalog.body.contains(IMAGE_NAME));
    assert!(catalog
        .body
        .contains("&lt;script&gt;window.pwned=1&lt;/script&gt;"));
    assert!(catalog.body.contains("&quot;onload=&quot;window.pwned=2"));
    assert!(!catalog.body.to_ascii_lowercase().contains("<script"));

    // Signing out ends the session: its cookie opens nothing any more.
    let out = post(admin, "/console/sign-out", &cookie, &[("csrf", &csrf)]);
    assert_eq!(out.status, 303);
    assert!(
        out.cookies()
            .iter()
            .any(|c| c.starts_with("flowgate_console=;")),
        "{:?}",
        out.headers
    );
    let after = exchange(admin, "GET", "/console/keys", &[("Cookie", &cookie)], "");
    assert_eq!(after.status, 303);
    assert_eq!(after.header("location"), Some("/console/sign-in"));

    // Sign-in attempts are limited per address: this test made seven, of which the three the
    // CSRF check refused spent nothing (a cross-site post cannot use up an address's
    // attempts), the burst is ten, and one more comes back each minute (the test may have
    // taken one).
    let mut refused = None;
    for attempt in 0..12 {
        let answer = try_sign_in(admin, "not-the-admin-token-at-all");
        if answer.status == 429 {
            refused = Some((attempt, answer));
            break;
        }
        assert_eq!(answer.status, 401);
    }
    let (attempt, answer) = refused.expect("the sign-in limit refuses an eleventh attempt");
    assert!(
        (6..=7).contains(&attempt),
        "ten attempts in all pass, not {}",
        attempt + 4
    );
    let retry: u64 = answer.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    answer.assert_security_headers("a limited sign-in");
    // The right token is refused too while limited.
    let limited = try_sign_in(admin, TOKEN);
    assert_eq!(limited.status, 429);
    assert!(limited.cookie("flowgate_console").is_none());
}

/// Resolves the demo paywall with `key` through the API; the status.
fn resolve_status(s: &Served, key: &str) -> u16 {
    let path = format!("/v1/apps/{DEMO_APP}/placements/paywall/resolve");
    let body = br#"{"user_id": "console-user", "session_id": "s", "device_platform": "ios"}"#;
    crate::support::http(s.api, "POST", &path, Some(key), body)
        .unwrap()
        .0
}

/// Waits until resolving with `key` answers `status` (the catalog refreshes keys).
async fn wait_resolve(s: &Served, key: &str, status: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = resolve_status(s, key);
        if got == status {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "resolve with the key: {got}, not {status}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The text of the element `css` selects, once the page shows it (within 10 s). A form's
/// submission navigates while the element is looked for: chromedriver then aborts the lookup
/// ("aborted by navigation") or the element found goes stale (also reported as a node that
/// "does not belong to the document"), and the lookup starts again on the new page; any
/// other error fails at once.
pub(crate) async fn text(browser: &Browser, css: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let found = browser
            .client
            .wait()
            .at_most(remaining)
            .for_element(Locator::Css(css))
            .await;
        let error = match found {
            Ok(element) => match element.text().await {
                Ok(text) => return text,
                Err(e) => e,
            },
            Err(e) => e,
        };
        let message = error.to_string();
        let navigating = message.contains("aborted by navigation")
            || message.contains("stale element")
            || message.contains("does not belong to the document");
        assert!(navigating && Instant::now() < deadline, "{css}: {message}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Clicks the element `css` selects.
pub(crate) async fn click(browser: &Browser, css: &str) {
    browser
        .client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("click {css}: {e}"));
}

/// Types `text` into the field `css` selects.
pub(crate) async fn type_into(browser: &Browser, css: &str, text: &str) {
    browser
        .client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .send_keys(text)
        .await
        .unwrap_or_else(|e| panic!("type into {css}: {e}"));
}

pub(crate) async fn count(browser: &Browser, css: &str) -> usize {
    browser
        .client
        .find_all(Locator::Css(css))
        .await
        .unwrap()
        .len()
}

pub(crate) async fn path_of(browser: &Browser) -> String {
    browser
        .client
        .current_url()
        .await
        .unwrap()
        .path()
        .to_owned()
}

/// Waits until the browser shows `path` (a click that submits a form returns before the next
/// page has loaded), within 10 s.
pub(crate) async fn wait_path(browser: &Browser, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = path_of(browser).await;
        let ready: Value = browser
            .client
            .execute("return document.readyState", vec![])
            .await
            .unwrap();
        if now == path && ready == "complete" {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the browser shows {now}, not {path}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the element `css` selects has a text containing `part`, within 10 s, and
/// returns that text; with `reload`, reloading the page between looks (the server reads a
/// catalog import within its refresh interval), else waiting for a navigation to end.
async fn wait_for_text(browser: &Browser, css: &str, part: &str, reload: bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = text(browser, css).await;
        if now.contains(part) {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "{css} shows {now:?}, without {part:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        if reload {
            browser.client.refresh().await.unwrap();
        }
    }
}

/// The text a script returns on the page (`return ...`), or null.
async fn script(browser: &Browser, code: &str) -> Value {
    browser.client.execute(code, vec![]).await.unwrap()
}

/// D27's verdict in words, as the console's heading says it when no variant is named.
fn verdict_words(verdict: &str) -> &'static str {
    match verdict {
        "keep_running" => "Keep running",
        "no_decision" => "No decision",
        other => panic!("the test expects no {other} verdict"),
    }
}

/// The verdict section shows `report`'s decision (the CLI's): the verdict in words, and each
/// reason's message with its code, in order.
async fn assert_verdict(browser: &Browser, report: &Value) {
    let decision = &report["decision"];
    let verdict = decision["verdict"].as_str().unwrap();
    assert_eq!(
        script(
            browser,
            "return document.querySelector('#verdict').dataset.verdict"
        )
        .await,
        verdict
    );
    assert_eq!(
        text(browser, "#verdict h2 .words").await,
        verdict_words(verdict)
    );
    let reasons = decision["reasons"].as_array().unwrap();
    assert!(!reasons.is_empty(), "{decision}");
    assert_eq!(
        count(browser, "#verdict ul.reasons li").await,
        reasons.len()
    );
    for (i, reason) in reasons.iter().enumerate() {
        let css = format!("#verdict ul.reasons li:nth-child({})", i + 1);
        assert_eq!(
            text(browser, &css).await,
            reason["message"].as_str().unwrap()
        );
        let code = script(
            browser,
            &format!("return document.querySelector('{css}').dataset.code"),
        )
        .await;
        assert_eq!(code, reason["code"]);
    }
}

/// `catalog` with `analysis` (D27, catalog format 2) on the experiment `id`.
fn with_analysis(mut catalog: Value, id: &str, analysis: Value) -> Value {
    catalog["format"] = 2.into();
    let experiment = catalog["workspaces"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .flat_map(|w| w["apps"].as_array_mut().unwrap().iter_mut())
        .flat_map(|a| a["placements"].as_array_mut().unwrap().iter_mut())
        .filter_map(|p| p.get_mut("rules").and_then(Value::as_array_mut))
        .flat_map(|rules| rules.iter_mut())
        .filter_map(|r| r.get_mut("experiment"))
        .find(|e| e["id"] == id)
        .unwrap_or_else(|| panic!("no experiment {id}"));
    experiment["analysis"] = analysis;
    catalog
}

#[tokio::test]
async fn an_operator_uses_the_console_in_a_browser() {
    let s = Served::start_on(Backend::Sqlite, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .unwrap();
    import(&s.db.url, &catalog_with_markup_names());
    let api = s.api.to_string();
    let env = [
        ("FLOWGATE__DATABASE__URL", s.db.url.as_str()),
        ("FLOWGATE__SERVER__LISTEN", api.as_str()),
    ];
    let (code, out, err) = run(&["demo", "--traffic", "300", "--json"], &env);
    assert_eq!(code, Some(0), "demo --traffic: {err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    // The demo experiment's analysis (D27): flow_complete is a guardrail, and a verdict needs
    // more users than the demo sent, so the console's verdict is to keep running.
    let (code, exported, err) = run(&["catalog", "export"], &env);
    assert_eq!(code, Some(0), "catalog export: {err}");
    let analysed = with_analysis(
        serde_json::from_str(&exported).unwrap(),
        DEMO_EXPERIMENT,
        serde_json::json!({
            "primary_metric": "purchase_complete",
            "guardrail_metrics": ["flow_complete"],
            "minimum_users": 1000,
        }),
    );
    import(&s.db.url, &analysed);
    let (code, out, err) = run(&["experiments", "results", DEMO_EXPERIMENT, "--json"], &env);
    assert_eq!(code, Some(0), "{err}");
    let report_analysed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report_analysed["decision"]["verdict"], "keep_running");
    assert_eq!(report_analysed["method"], "sequential");
    let base = format!("http://{}", s.admin);
    let browser = Browser::start().await;
    let c = &browser.client;

    // Without a session: the sign-in page, which says when the token is wrong.
    c.goto(&format!("{base}/console/experiments"))
        .await
        .unwrap();
    wait_path(&browser, "/console/sign-in").await;
    browser.screenshot("sign-in").await;
    for token in ["not-the-admin-token-at-all", TOKEN] {
        // The admin token's break-glass form is folded under the people's sign-in.
        click(&browser, "details summary").await;
        type_into(&browser, "#token", token).await;
        click(&browser, "#sign-in button[type=submit]").await;
        if token != TOKEN {
            let message = text(&browser, "p.error").await;
            assert_eq!(message, "That is not the admin token.");
        }
    }
    wait_path(&browser, "/console/experiments").await;
    // The session cookie is HttpOnly: the page's script cannot read it.
    let visible: Value = c.execute("return document.cookie", vec![]).await.unwrap();
    assert_eq!(visible, Value::String(String::new()));

    // Experiments, and one's results with its chart: a line per variant.
    let row = format!("#experiments a[href='/console/experiments/{DEMO_EXPERIMENT}']");
    assert_eq!(text(&browser, &row).await, "paywall-price-test");
    browser.screenshot("experiments").await;
    click(&browser, &row).await;
    wait_path(&browser, &format!("/console/experiments/{DEMO_EXPERIMENT}")).await;
    // D27: the verdict first, in words with its reasons, and which intervals the page shows.
    let method = wait_for_text(&browser, "#verdict #method", "at least 1000 users", true).await;
    assert!(
        method.contains("sequential: valid however often you read this report"),
        "{method}"
    );
    assert_eq!(
        script(
            &browser,
            "return document.querySelector('main > h1').nextElementSibling.id"
        )
        .await,
        "verdict",
        "the verdict is the first thing under the title"
    );
    assert_eq!(
        script(&browser, "return document.querySelector('main section').id").await,
        "verdict"
    );
    assert_verdict(&browser, &report_analysed).await;
    assert!(count(&browser, "#verdict li[data-code='minimum_users']").await >= 1);
    // Then the primary metric, then the guardrail, then the others: the store's too, since
    // the demo's traffic made a webhook key for its workspace (D30).
    let roles = script(
        &browser,
        "return [...document.querySelectorAll('section.metric')].map(s => s.dataset.role + ' ' + s.dataset.metric)",
    )
    .await;
    assert_eq!(
        roles,
        serde_json::json!([
            "primary purchase_complete",
            "guardrail flow_complete",
            "other revenue",
            "other trial_started",
            "other trial_converted",
            "other paid",
            "other refunded",
            "other proceeds"
        ])
    );
    assert!(text(&browser, "section.metric[data-role='primary'] h3")
        .await
        .contains("primary metric"));
    assert!(text(&browser, "section.metric[data-role='guardrail'] h3")
        .await
        .contains("guardrail"));
    assert_eq!(
        text(&browser, "section.metric th.lift-interval").await,
        "Lift 95% CI (sequential)"
    );
    let variants = report["variants"].as_array().unwrap().len();
    assert_eq!(variants, 2);
    assert_eq!(
        count(&browser, "#exposure-chart svg polyline.series").await,
        variants
    );
    assert_eq!(count(&browser, "#variants tbody tr").await, variants);
    assert_eq!(
        text(&browser, "#exposed-users").await,
        report["exposed_users"].to_string(),
        "the CLI's report"
    );
    // Each metric has its chart of means (a dot per variant), its chart of lifts (an interval
    // per treatment with an estimate) and its table, chance to win included.
    let metrics = report["metrics"].as_array().unwrap().len();
    assert_eq!(
        count(&browser, "section.metric figure[id^='metric-chart'] > svg").await,
        metrics
    );
    assert_eq!(
        count(
            &browser,
            "section.metric figure[id^='metric-chart'] > svg circle"
        )
        .await,
        metrics * variants
    );
    let estimates = report_analysed["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["variants"].as_array().unwrap().iter().skip(1))
        .filter(|v| v["lift"].is_number())
        .count();
    assert!(estimates > 0, "{report_analysed}");
    assert_eq!(
        count(
            &browser,
            "section.metric figure[id^='lift-chart'] > svg circle.lift"
        )
        .await,
        estimates
    );
    assert_eq!(
        count(
            &browser,
            "section.metric figure[id^='lift-chart'] > svg polyline.zero"
        )
        .await,
        count(&browser, "section.metric figure[id^='lift-chart']").await
    );
    assert!(text(
        &browser,
        "section.metric figure[id^='lift-chart'] figcaption"
    )
    .await
    .contains("95% interval (sequential"),);
    let chances = report["metrics"][0]["variants"][1]["chance_to_win"]
        .as_f64()
        .unwrap();
    let metric = report["metrics"][0]["metric"].as_str().unwrap();
    assert_eq!(
        text(
            &browser,
            &format!("section.metric[data-metric='{metric}'] td.chance")
        )
        .await,
        format!("{:.2}%", chances * 100.0)
    );
    browser.screenshot("experiment").await;
    browser.set_window_size(390, 844).await;
    browser.screenshot("experiment-phone").await;
    browser.set_window_size(1280, 900).await;

    // Exposures that break the comparison: 200 more users in one variant (a sample ratio
    // mismatch) and 20 who saw both variants. The page says so in words, as the CLI's report.
    let demo_key = s.create_key(DEMO_WORKSPACE);
    wait_resolve(&s, &demo_key, 200).await;
    let mut flows = std::collections::BTreeMap::new();
    for i in 0..500 {
        if flows.len() == 2 {
            break;
        }
        let body = format!(
            r#"{{"user_id": "probe-{i}", "session_id": "s", "device_platform": "ios", "attributes": {{"country": "US"}}}}"#
        );
        let path = format!("/v1/apps/{DEMO_APP}/placements/paywall/resolve");
        let (_, answer) =
            crate::support::http(s.api, "POST", &path, Some(&demo_key), body.as_bytes()).unwrap();
        let answer: Value = serde_json::from_str(&answer).unwrap();
        if let Some(name) = answer["variant_name"].as_str() {
            flows.insert(name.to_owned(), answer);
        }
    }
    let exposure = |user: String, flow: &Value| {
        serde_json::json!({
            "event_id": uuid::Uuid::new_v4().to_string(), "app_id": DEMO_APP,
            "flow_id": flow["flow_id"], "flow_version_id": flow["flow_version_id"],
            "experiment_id": flow["experiment_id"], "variant_id": flow["variant_id"],
            "variant_name": flow["variant_name"], "placement_id": "paywall",
            "user_id": user, "session_id": "s", "device_platform": "ios",
            "event_type": "flow_open", "sdk_version": "console-test",
            "timestamp": time::OffsetDateTime::now_utc()
                .format(&time::format_description::well_known::Rfc3339).unwrap(),
        })
    };
    let mut events: Vec<Value> = (0..200)
        .map(|i| exposure(format!("srm-{i}"), &flows["trial"]))
        .collect();
    for i in 0..20 {
        events.push(exposure(format!("both-{i}"), &flows["control"]));
        events.push(exposure(format!("both-{i}"), &flows["trial"]));
    }
    for chunk in events.chunks(100) {
        let body = serde_json::to_vec(chunk).unwrap();
        let path = format!("/v1/apps/{DEMO_APP}/events");
        let (status, answer) =
            crate::support::http(s.api, "POST", &path, Some(&demo_key), &body).unwrap();
        assert_eq!(status, 202, "{answer}");
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(
            answer["accepted"].as_u64(),
            Some(chunk.len() as u64),
            "{answer}"
        );
    }
    c.refresh().await.unwrap();
    let (code, out, err) = run(&["experiments", "results", DEMO_EXPERIMENT, "--json"], &env);
    assert_eq!(code, Some(0), "{err}");
    let after: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        text(&browser, "#exposed-users").await,
        after["exposed_users"].to_string()
    );
    for code in ["srm", "multiple_exposures"] {
        let message = after["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["code"] == code)
            .unwrap_or_else(|| panic!("a {code} warning in {after}"))["message"]
            .as_str()
            .unwrap()
            .to_owned();
        let shown = text(&browser, &format!("p.warning[data-code='{code}']")).await;
        assert_eq!(shown, format!("Warning: {message}"));
    }
    assert_eq!(
        count(&browser, "p.ok").await,
        0,
        "no \"no warning\" beside them"
    );
    // The sample ratio mismatch makes the figures untrustworthy: no decision, and why.
    assert_eq!(after["decision"]["verdict"], "no_decision");
    assert_verdict(&browser, &after).await;
    assert!(count(&browser, "#verdict li[data-code='srm']").await >= 1);
    browser.screenshot("experiment-warnings").await;

    // A reader may read the fixed-horizon intervals instead, for this report only.
    assert_eq!(
        script(
            &browser,
            "return document.querySelector('#method-choice').value"
        )
        .await,
        "",
        "the experiment's setting"
    );
    click(&browser, "#method-choice option[value='fixed']").await;
    click(&browser, "form.window button[type=submit]").await;
    let method = wait_for_text(&browser, "#verdict #method", "fixed horizon", false).await;
    assert!(
        method.contains("valid for one look at a horizon set in advance")
            && method.contains("the experiment's setting is sequential"),
        "{method}"
    );
    let url = c.current_url().await.unwrap();
    assert!(
        url.query().unwrap_or_default().contains("method=fixed"),
        "{url}"
    );
    assert_eq!(
        text(&browser, "section.metric th.lift-interval").await,
        "Lift 95% CI (fixed horizon)"
    );
    assert_eq!(
        script(
            &browser,
            "return document.querySelector('#method-choice').value"
        )
        .await,
        "fixed"
    );
    assert!(text(
        &browser,
        "section.metric figure[id^='lift-chart'] figcaption"
    )
    .await
    .contains("95% interval (fixed horizon"),);

    // The catalog: names that are markup are text in the DOM, and ran nothing.
    c.goto(&format!("{base}/console/catalog")).await.unwrap();
    let headings = c
        .find_all(Locator::Css("section.workspace h2"))
        .await
        .unwrap();
    let mut names = Vec::new();
    for h in headings {
        names.push(h.text().await.unwrap());
    }
    assert!(
        names.contains(&format!("Workspace {SCRIPT_NAME}")),
        "{names:?}"
    );
    let apps = c.find_all(Locator::Css("section.app h3")).await.unwrap();
    let mut app_names = Vec::new();
    for h in apps {
        app_names.push(h.text().await.unwrap());
    }
    assert!(
        app_names.contains(&format!("App {ATTRIBUTE_NAME}")),
        "{app_names:?}"
    );
    let flows = text(&browser, "body").await;
    assert!(flows.contains(IMAGE_NAME), "the flow's name as text");
    assert_eq!(count(&browser, "script").await, 0);
    assert_eq!(count(&browser, "img").await, 0);
    let pwned: Value = c
        .execute("return typeof window.pwned", vec![])
        .await
        .unwrap();
    assert_eq!(pwned, Value::String("undefined".into()));
    browser.screenshot("catalog").await;

    // Explain: the trace of a request, whose result is what the API resolves.
    c.goto(&format!("{base}/console/explain")).await.unwrap();
    click(&browser, &format!("#app option[value='{DEMO_APP}']")).await;
    type_into(&browser, "#placement", "paywall").await;
    click(&browser, "#explain button[type=submit]").await;
    let reason = text(&browser, "#reason").await;
    assert!(
        ["experiment", "holdout"].contains(&reason.as_str()),
        "{reason}"
    );
    let explained: Value = serde_json::from_str(&text(&browser, "pre#result").await).unwrap();
    let (status, resolved) = crate::support::http(
        s.api,
        "POST",
        &format!("/v1/apps/{DEMO_APP}/placements/paywall/resolve"),
        Some(&demo_key),
        br#"{"user_id": "user-1", "session_id": "session-1", "device_platform": "ios", "attributes": {"country": "US"}}"#,
    )
    .unwrap();
    assert_eq!(status, 200, "{resolved}");
    let resolved: Value = serde_json::from_str(&resolved).unwrap();
    assert_eq!(explained, resolved, "explain shows what resolve answers");
    assert!(count(&browser, "ol.trace li.decided").await >= 1);
    browser.screenshot("explain").await;

    // Change preview: a reweighted experiment; the share of users moved is the CLI's.
    let mut reweighted = fixtures::catalog_json();
    reweighted["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["experiment"]["variants"]
        [0]["weight"] = 3.into();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("catalog-reweighted.json");
    std::fs::write(&file, reweighted.to_string()).unwrap();
    let path = file.to_str().unwrap();
    let (code, out, err) = run(&["import", "--dry-run", "--json", path], &env);
    assert_eq!(code, Some(0), "{err}");
    let dry: Value = serde_json::from_str(&out).unwrap();
    let shift = dry["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == fixtures::EXP)
        .unwrap_or_else(|| panic!("{dry}"))
        .clone();
    let moved = shift["change_variant"].as_f64().unwrap();
    assert!(moved > 0.1, "{shift}");
    let (_, history_before, _) = run(&["catalog", "history", "--json"], &env);
    c.goto(&format!("{base}/console/preview")).await.unwrap();
    type_into(&browser, "#file", path).await;
    click(&browser, "#preview button[type=submit]").await;
    let row = format!(
        "#moved tr[data-experiment='{}'] td.moved-share",
        fixtures::EXP
    );
    assert_eq!(text(&browser, &row).await, format!("{:.2}%", moved * 100.0));
    browser.screenshot("preview").await;
    let (_, history_after, _) = run(&["catalog", "history", "--json"], &env);
    assert_eq!(history_before, history_after, "a preview writes nothing");

    // Import history.
    c.goto(&format!("{base}/console/history")).await.unwrap();
    let imports = serde_json::from_str::<Value>(&history_after).unwrap();
    assert_eq!(
        count(&browser, "#history tbody tr").await,
        imports.as_array().unwrap().len()
    );
    browser.screenshot("history").await;

    // Keys: create one (shown once), use it, revoke it after confirming.
    c.goto(&format!("{base}/console/keys?workspace={DEMO_WORKSPACE}"))
        .await
        .unwrap();
    browser.screenshot("keys").await;
    click(&browser, "#environment option[value='test']").await;
    type_into(&browser, "#name", "browser test key").await;
    click(&browser, "#create-key button[type=submit]").await;
    let key = text(&browser, "#new-key").await;
    assert!(key.starts_with("fg_test_"), "{key}");
    browser.screenshot("key-created").await;
    wait_resolve(&s, &key, 200).await;
    c.goto(&format!("{base}/console/keys?workspace={DEMO_WORKSPACE}"))
        .await
        .unwrap();
    let record = listed_keys(&s, DEMO_WORKSPACE)
        .into_iter()
        .find(|k| k["name"] == "browser test key")
        .unwrap();
    let id = record["id"].as_str().unwrap();
    click(&browser, &format!("tr[data-key='{id}'] a.revoke")).await;
    wait_path(&browser, &format!("/console/keys/{id}/revoke")).await;
    browser.screenshot("revoke").await;
    assert_eq!(
        resolve_status(&s, &key),
        200,
        "not revoked before confirming"
    );
    click(&browser, "#revoke-key button[type=submit]").await;
    wait_path(&browser, "/console/keys").await;
    assert!(
        text(&browser, &format!("tr[data-key='{id}'] td.key-status"))
            .await
            .starts_with("revoked")
    );
    wait_resolve(&s, &key, 401).await;

    // Signing out: the pages need a session again.
    click(&browser, "form.sign-out button").await;
    wait_path(&browser, "/console/sign-in").await;
    c.goto(&format!("{base}/console/keys")).await.unwrap();
    wait_path(&browser, "/console/sign-in").await;
    browser.finish().await;
}

/// Issue 49: the admin token cannot be guessed at full speed on the admin API either. 275
/// wrong tokens to `GET /admin/v1/experiments` from one address: ten 401s, then 429
/// `rate_limited` with `Retry-After`, for the right token too and on the console's sign-in
/// (one budget); the log has a few sampled warnings and never the token. (Before: 275 times
/// 401 and no warning.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_admin_tokens_are_limited_and_logged_on_every_admin_route() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let mut s = Served::launch(
        Backend::Sqlite,
        &[
            ("FLOWGATE__ADMIN__TOKEN", TOKEN),
            ("FLOWGATE__LOG__LEVEL", "info"),
            ("FLOWGATE__LOG__FORMAT", "json"),
        ],
        crate::support::Launch {
            log_file: Some(log.clone()),
            ..crate::support::Launch::default()
        },
    )
    .await
    .unwrap();
    let admin = s.admin;
    let guess = "guessed-admin-token-0123456789abcdef";
    let bearer = format!("Bearer {guess}");
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    let mut limited = None;
    for _ in 0..275 {
        let answer = exchange(
            admin,
            "GET",
            "/admin/v1/experiments",
            &[("Authorization", &bearer)],
            "",
        );
        *statuses.entry(answer.status).or_default() += 1;
        if answer.status == 429 {
            limited = Some(answer);
        }
    }
    assert_eq!(
        statuses,
        [(401, 10), (429, 265)].into_iter().collect(),
        "ten wrong tokens pass, the rest wait"
    );
    let limited = limited.unwrap();
    let retry: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(
        limited.header("content-type"),
        Some("application/problem+json")
    );
    let problem: Value = serde_json::from_str(&limited.body).unwrap();
    assert_eq!(problem["code"], "rate_limited", "{problem}");
    // The right token waits too, on every admin route and on the console's sign-in.
    let right = format!("Bearer {TOKEN}");
    for path in [
        "/admin/v1/experiments",
        &format!("/admin/v1/experiments/{DEMO_EXPERIMENT}/results"),
    ] {
        let answer = exchange(admin, "GET", path, &[("Authorization", &right)], "");
        assert_eq!(answer.status, 429, "{path}: {}", answer.body);
    }
    let explain = exchange(
        admin,
        "POST",
        &format!(
            "/admin/v1/apps/{}/placements/onboarding/explain",
            fixtures::APP1
        ),
        &[
            ("Authorization", &right),
            ("Content-Type", "application/json"),
        ],
        r#"{"user_id":"u1","session_id":"s","device_platform":"ios"}"#,
    );
    assert_eq!(explain.status, 429, "{}", explain.body);
    let sign_in = try_sign_in(admin, TOKEN);
    assert_eq!(sign_in.status, 429, "{}", sign_in.body);
    assert!(sign_in.cookie("flowgate_console").is_none());

    assert_eq!(s.terminate().await, Some(0));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains(guess), "the token is never logged");
    assert!(!text.contains(TOKEN), "the token is never logged");
    let warnings: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["level"] == "WARN" && l.to_string().contains("admin token"))
        .collect();
    assert!(
        (2..=4).contains(&warnings.len()),
        "the first failure and the limit, sampled: {warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.to_string().contains("127.0.0.1")),
        "the address is named: {warnings:?}"
    );
}

/// D30: a webhook key is created on the keys page (the type is a choice of the form), listed
/// with its type, shown once, and revoked after the confirmation, all behind the session and
/// its CSRF token as any key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_key_is_created_listed_and_revoked_in_the_console() {
    let s = Served::start_on(Backend::Sqlite, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .unwrap();
    let admin = s.admin;
    let (cookie, csrf) = sign_in(admin);
    let page = exchange(admin, "GET", "/console/keys", &[("Cookie", &cookie)], "");
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("<option value=\"webhook\">"),
        "{}",
        page.body
    );

    let before = listed_keys(&s, fixtures::WS1);
    let create = [
        ("workspace", fixtures::WS1),
        ("environment", "test"),
        ("type", "webhook"),
        ("name", ""),
    ];
    let refused = post(admin, "/console/keys", &cookie, &create);
    assert_eq!(refused.status, 403, "no CSRF token: {}", refused.body);
    assert_eq!(listed_keys(&s, fixtures::WS1), before);
    let mut allowed = create.to_vec();
    allowed.push(("csrf", &csrf));
    let created = post(admin, "/console/keys", &cookie, &allowed);
    assert_eq!(created.status, 303, "{}", created.body);
    let sealed = created.cookie("flowgate_new_key").unwrap();
    let shown = exchange(
        admin,
        "GET",
        "/console/keys/created",
        &[("Cookie", &format!("{cookie}; flowgate_new_key={sealed}"))],
        "",
    );
    assert_eq!(shown.status, 200, "{}", shown.body);
    assert!(
        shown.body.contains("id=\"new-key\">fg_test_") && shown.body.contains("webhook"),
        "{}",
        shown.body
    );
    let after = listed_keys(&s, fixtures::WS1);
    assert_eq!(after.len(), before.len() + 1);
    let key = after.last().unwrap();
    assert_eq!(
        (key["type"].as_str(), key["name"].as_str()),
        (Some("webhook"), Some("webhook key"))
    );
    let id = key["id"].as_str().unwrap();
    let page = exchange(
        admin,
        "GET",
        &format!("/console/keys?workspace={}", fixtures::WS1),
        &[("Cookie", &cookie)],
        "",
    );
    let row = page
        .body
        .split("<tr ")
        .find(|row| row.contains(id))
        .unwrap_or_else(|| panic!("no row for {id}: {}", page.body));
    assert!(row.contains("<td>webhook</td>"), "{row}");

    let revoke = format!("/console/keys/{id}/revoke?workspace={}", fixtures::WS1);
    let confirm = exchange(admin, "GET", &revoke, &[("Cookie", &cookie)], "");
    assert_eq!(confirm.status, 200);
    assert!(
        confirm.body.contains("Store notifications that carry key"),
        "{}",
        confirm.body
    );
    assert_eq!(
        post(admin, &revoke, &cookie, &[("csrf", "f00d")]).status,
        403
    );
    let revoked = post(admin, &revoke, &cookie, &[("csrf", &csrf)]);
    assert_eq!(revoked.status, 303, "{}", revoked.body);
    let key = listed_keys(&s, fixtures::WS1)
        .into_iter()
        .find(|k| k["id"] == id)
        .unwrap();
    assert!(key["revoked_at"].is_string(), "{key}");
}
