//! OpenID Connect sign-in to the console (D28) through the binary, in a real browser, against
//! a real provider (`flowgate_testkit::OidcProvider`: Node's `oidc-provider`, its development
//! login and consent forms). The console is reached as `localhost` and the provider as
//! `127.0.0.1`: two sites, so the provider's redirect back is a cross-site navigation, as in
//! production, and the console's `SameSite` cookies are tested for real.

use std::time::{Duration, Instant};

use fantoccini::Locator;
use flowgate_store::Backend;
use flowgate_testkit::{free_port, OidcProvider};

use crate::browser::Browser;
use crate::console::{click, exchange, text, type_into, wait_path, TOKEN};
use crate::people::{audit_cli, get, has};
use crate::support::{run, Launch, Served};

/// A console whose people sign in at `provider`: the provider's group `flowgate-editors` makes
/// an editor, an email of `flowgate.test` a viewer.
async fn console_of(admin_port: u16, provider: &OidcProvider) -> Served {
    let redirect = format!("http://localhost:{admin_port}/console/oidc/callback");
    let settings = [
        ("FLOWGATE__ADMIN__TOKEN", TOKEN),
        ("FLOWGATE__CONSOLE__OIDC__ISSUER", provider.issuer.as_str()),
        ("FLOWGATE__CONSOLE__OIDC__CLIENT_ID", "client-a"),
        ("FLOWGATE__CONSOLE__OIDC__CLIENT_SECRET", "secret-a"),
        ("FLOWGATE__CONSOLE__OIDC__REDIRECT_URL", redirect.as_str()),
        (
            "FLOWGATE__CONSOLE__OIDC__SCOPES",
            r#"["openid", "email", "groups"]"#,
        ),
        (
            "FLOWGATE__CONSOLE__OIDC__ROLES",
            r#"[{group = "flowgate-editors", role = "editor"}, {email_domain = "flowgate.test", role = "viewer"}]"#,
        ),
    ];
    let launch = Launch {
        admin_port: Some(admin_port),
        ..Launch::default()
    };
    Served::launch(Backend::Sqlite, &settings, launch)
        .await
        .unwrap()
}

/// From the console's sign-in page through the provider's forms as `login`, until the browser
/// is back on the console (any page of it).
async fn sign_in_at_provider(browser: &Browser, base: &str, login: &str) {
    let c = &browser.client;
    c.goto(&format!("{base}/console/sign-in")).await.unwrap();
    wait_path(browser, "/console/sign-in").await;
    click(browser, "#oidc-sign-in").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(
            Instant::now() < deadline,
            "still at the provider after 20 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let url = c.current_url().await.unwrap();
        if url.host_str() == Some("localhost") {
            let ready = c
                .execute("return document.readyState", vec![])
                .await
                .unwrap();
            if ready == "complete" {
                return;
            }
            continue;
        }
        // The provider's login form, then its consent form (when it asks).
        if let Ok(field) = c.find(Locator::Css("input[name=login]")).await {
            field.send_keys(login).await.unwrap();
            type_into(browser, "input[name=password]", "any password").await;
            click(browser, "button[type=submit]").await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        } else if let Ok(button) = c.find(Locator::Css("button[type=submit]")).await {
            let _ = button.click().await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

/// Signs the browser out of the provider (its cookies are the provider host's), so the next
/// sign-in asks who it is.
async fn forget_provider_session(browser: &Browser, provider: &OidcProvider) {
    let c = &browser.client;
    c.goto(&format!(
        "{}/.well-known/openid-configuration",
        provider.issuer
    ))
    .await
    .unwrap();
    c.delete_all_cookies().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_sign_in_with_openid_connect_and_get_the_role_their_groups_give() {
    let admin_port = free_port();
    let callback = format!("http://localhost:{admin_port}/console/oidc/callback");
    let provider = OidcProvider::start(None, &[callback.as_str()]);
    let s = console_of(admin_port, &provider).await;
    let base = format!("http://localhost:{admin_port}");
    let browser = Browser::start().await;

    // Ada's groups make her an editor; she is added on her first sign-in.
    sign_in_at_provider(&browser, &base, "ada").await;
    wait_path(&browser, "/console/experiments").await;
    assert_eq!(
        text(&browser, "header .who").await,
        "ada@flowgate.test (editor)"
    );
    let entries = audit_cli(&s, &[]);
    assert!(
        has(&entries, "oidc", "person.add", Some("ada@flowgate.test")),
        "{entries:?}"
    );
    assert!(
        has(&entries, "ada@flowgate.test", "sign_in", None),
        "{entries:?}"
    );
    let (code, out, err) = run(
        &["users", "list", "--json"],
        &[("FLOWGATE__DATABASE__URL", s.db.url.as_str())],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("ada@flowgate.test"), "{out}");

    // Someone the rules give no role is refused, and nobody is added.
    click(&browser, "form.sign-out button").await;
    wait_path(&browser, "/console/sign-in").await;
    forget_provider_session(&browser, &provider).await;
    sign_in_at_provider(&browser, &base, "outsider").await;
    wait_path(&browser, "/console/oidc/callback").await;
    let alert = text(&browser, "p.error").await;
    assert!(alert.contains("no role in this console"), "{alert}");
    let entries = audit_cli(&s, &[]);
    assert!(
        has(
            &entries,
            "oidc",
            "sign_in.failed",
            Some("outsider@elsewhere.test")
        ),
        "{entries:?}"
    );
    assert!(!has(
        &entries,
        "oidc",
        "person.add",
        Some("outsider@elsewhere.test")
    ));

    // A person disabled here is refused though the provider vouches for them.
    let (code, _, err) = run(
        &["users", "disable", "ada@flowgate.test"],
        &[("FLOWGATE__DATABASE__URL", s.db.url.as_str())],
    );
    assert_eq!(code, Some(0), "{err}");
    forget_provider_session(&browser, &provider).await;
    sign_in_at_provider(&browser, &base, "ada").await;
    wait_path(&browser, "/console/oidc/callback").await;
    let alert = text(&browser, "p.error").await;
    assert!(alert.contains("disabled"), "{alert}");
    browser.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_is_refused_without_its_sign_in_or_with_another_state() {
    let admin_port = free_port();
    let callback = format!("http://localhost:{admin_port}/console/oidc/callback");
    let provider = OidcProvider::start(None, &[callback.as_str()]);
    let s = console_of(admin_port, &provider).await;

    // The sign-in page links to the provider.
    let page = exchange(s.admin, "GET", "/console/sign-in", &[], "");
    assert!(
        page.body.contains("href=\"/console/oidc/start\""),
        "{}",
        page.body
    );
    page.assert_security_headers("the sign-in page");

    // A callback this browser did not start: refused, no session.
    let forged = get(
        s.admin,
        "/console/oidc/callback?code=stolen-code&state=anything",
        "",
    );
    assert_eq!(forged.status, 400, "{}", forged.body);
    forged.assert_security_headers("a refused callback");
    assert!(forged.body.contains("not started in this browser"));
    assert_eq!(forged.cookie("flowgate_console"), None);

    // A started sign-in: a sealed cookie (the verifier unreadable), to the provider with PKCE.
    let started = get(s.admin, "/console/oidc/start", "");
    assert_eq!(started.status, 303, "{}", started.body);
    let location = started.header("location").unwrap().to_owned();
    assert!(location.starts_with(&provider.issuer), "{location}");
    for part in [
        "code_challenge_method=S256",
        "state=",
        "nonce=",
        "client_id=client-a",
    ] {
        assert!(location.contains(part), "{part} in {location}");
    }
    let sealed = started.cookie("flowgate_oidc").unwrap();
    assert!(sealed.starts_with("v1."), "{sealed}");
    let set = started.header("set-cookie").unwrap();
    for attribute in [
        "HttpOnly",
        "SameSite=Lax",
        "Path=/console/oidc",
        "Max-Age=600",
    ] {
        assert!(set.contains(attribute), "{attribute} in {set}");
    }
    // Its callback with another state: refused before the code is spent, recorded.
    let cookie = format!("flowgate_oidc={sealed}");
    let wrong = get(
        s.admin,
        "/console/oidc/callback?code=some-code&state=another-state",
        &cookie,
    );
    assert_eq!(wrong.status, 401, "{}", wrong.body);
    assert!(wrong.body.contains("state"), "{}", wrong.body);
    assert_eq!(wrong.cookie("flowgate_console"), None);
    // The pending sign-in is removed: one try.
    assert_eq!(wrong.cookie("flowgate_oidc").as_deref(), Some(""));
    // The provider's own refusal is shown as such.
    let denied = get(
        s.admin,
        "/console/oidc/callback?error=access_denied&error_description=%3Cb%3Eno%3C%2Fb%3E",
        &cookie,
    );
    assert_eq!(denied.status, 401, "{}", denied.body);
    assert!(
        denied.body.contains("access_denied: &lt;b&gt;no&lt;/b&gt;"),
        "{}",
        denied.body
    );
    let entries = audit_cli(&s, &["--action", "sign_in.failed"]);
    assert!(entries.len() >= 3, "{entries:?}");
    assert!(entries.iter().all(|e| e["actor"] == "oidc"), "{entries:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_oidc_settings_there_is_no_way_to_a_provider() {
    let s = Served::start_on(Backend::Sqlite, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .unwrap();
    let page = exchange(s.admin, "GET", "/console/sign-in", &[], "");
    assert!(!page.body.contains("oidc"), "{}", page.body);
    // As any page of the console that is not there: the sign-in page, nothing started.
    for path in [
        "/console/oidc/start",
        "/console/oidc/callback?code=a&state=b",
    ] {
        let answer = get(s.admin, path, "");
        assert_eq!(answer.status, 303, "{path}: {}", answer.body);
        assert_eq!(answer.header("location"), Some("/console/sign-in"));
        assert_eq!(answer.cookie("flowgate_oidc"), None);
    }
}
