//! Sign-in and password security of the console (issue 65) through the binary: password work
//! is checked, budgeted and bounded before it runs; the per-account limit counts concurrent
//! attempts and spares the owner's other addresses; a disabled person's link writes nothing;
//! the sign-in form is bound to its pre-session cookie; and the audit log misses nothing
//! (demo keys, refused sign-ins, a NUL in an email on PostgreSQL).
//!
//! Clients on other loopback addresses (127.0.0.x is this machine too) stand for other
//! machines: the admin listener limits per connecting address.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use flowgate_store::Backend;
use serde_json::Value;

use crate::console::{exchange, Answer, TOKEN};
use crate::people::{add, audit_cli, has};
use crate::support::{run, Served};

/// `method path` from the loopback address `from`, with `headers` and `body`.
fn exchange_from(
    from: &str,
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let from: IpAddr = from.parse().unwrap();
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::new(from, 0).into()).unwrap();
    socket.connect(&addr.into()).unwrap();
    let mut stream: TcpStream = socket.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
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

fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A page's form (`path`, fetched from `from`): its pre-session cookie header and token.
fn form_from(from: &str, addr: SocketAddr, path: &str) -> (String, String) {
    let page = exchange_from(from, addr, "GET", path, &[], "");
    assert_eq!(page.status, 200, "{}", page.body);
    let cookie = format!(
        "flowgate_console_sign_in={}",
        page.cookie("flowgate_console_sign_in").unwrap()
    );
    (cookie, page.csrf())
}

/// Posts `fields` to `path` from `from` with `cookie`.
fn post_from(
    from: &str,
    addr: SocketAddr,
    path: &str,
    cookie: &str,
    fields: &[(&str, &str)],
) -> Answer {
    let body: Vec<String> = fields
        .iter()
        .map(|(n, v)| format!("{n}={}", encode(v)))
        .collect();
    exchange_from(
        from,
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

/// Signs in with an email and password from `from`.
fn sign_in_from(from: &str, addr: SocketAddr, email: &str, password: &str) -> Answer {
    let (cookie, csrf) = form_from(from, addr, "/console/sign-in");
    post_from(
        from,
        addr,
        "/console/sign-in",
        &cookie,
        &[("csrf", &csrf), ("email", email), ("password", password)],
    )
}

/// Sets a password through the link's `path` from `from`.
fn set_password_from(from: &str, addr: SocketAddr, path: &str, password: &str) -> Answer {
    let (cookie, csrf) = form_from(from, addr, path);
    let token = path.rsplit_once("token=").unwrap().1;
    post_from(
        from,
        addr,
        "/console/set-password",
        &cookie,
        &[
            ("csrf", &csrf),
            ("token", token),
            ("password", password),
            ("confirm", password),
        ],
    )
}

/// A sign-in post: the address it is sent from, its form's cookie header and its fields.
type Post = (String, String, Vec<(String, String)>);

/// Each post of `posts` sent at once; the answers in order.
fn all_at_once(addr: SocketAddr, posts: Vec<Post>) -> Vec<Answer> {
    let barrier = Arc::new(Barrier::new(posts.len()));
    let threads: Vec<_> = posts
        .into_iter()
        .map(|(from, cookie, fields)| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let fields: Vec<(&str, &str)> = fields
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_str()))
                    .collect();
                barrier.wait();
                post_from(&from, addr, "/console/sign-in", &cookie, &fields)
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

/// A wrong-password post of `email` from `from`, its form fetched first.
fn wrong_password(from: &str, addr: SocketAddr, email: &str) -> Post {
    let (cookie, csrf) = form_from(from, addr, "/console/sign-in");
    let fields = vec![
        ("csrf".to_owned(), csrf),
        ("email".to_owned(), email.to_owned()),
        ("password".to_owned(), "not the password at all".to_owned()),
    ];
    (from.to_owned(), cookie, fields)
}

/// Item 1: an unknown link is refused before any hashing (fast, and outside the budget); a
/// flood of password posts runs a bounded number and refuses the rest with 503 problem+json
/// and `Retry-After`; set-password posts have a budget per address (429 past it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_work_is_checked_bounded_and_budgeted() {
    let s = Served::start_on(Backend::Sqlite, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .unwrap();
    let addr = s.admin;

    // Twenty posts with made-up links: each refused (410) without an argon2id hash (one takes
    // a few hundred milliseconds in this debug build), and none spends the address's budget.
    let started = Instant::now();
    for n in 0..20 {
        let path = format!("/console/set-password?token={n:064x}");
        let answer = set_password_from("127.0.0.11", addr, &path, "a good long password");
        assert_eq!(answer.status, 410, "{}", answer.body);
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "20 unknown links took {took:?}"
    );
    let link = add(&s, "ann@example.com", "editor");
    let set = set_password_from("127.0.0.11", addr, &link, "ann's long password");
    assert_eq!(set.status, 303, "the budget is untouched: {}", set.body);

    // Forty wrong passwords at once from five addresses (eight each, within each address's
    // budget): a bounded number is checked, the others are refused at once.
    let mut posts = Vec::new();
    for a in 0..5 {
        for n in 0..8 {
            posts.push(wrong_password(
                &format!("127.0.0.{}", 20 + a),
                addr,
                &format!("nobody{n}@example.com"),
            ));
        }
    }
    let answers = all_at_once(addr, posts);
    let busy: Vec<&Answer> = answers.iter().filter(|a| a.status == 503).collect();
    let checked = answers.iter().filter(|a| a.status == 401).count();
    assert_eq!(
        busy.len() + checked,
        40,
        "{:?}",
        answers.iter().map(|a| a.status).collect::<Vec<_>>()
    );
    assert!(
        !busy.is_empty(),
        "some are refused while the others are checked"
    );
    for answer in busy {
        assert_eq!(answer.header("retry-after"), Some("2"));
        assert_eq!(
            answer.header("content-type"),
            Some("application/problem+json")
        );
        let problem: Value = serde_json::from_str(&answer.body).unwrap();
        assert_eq!(problem["code"], "overloaded");
    }

    // A real sign-in is served at once after the flood.
    let started = Instant::now();
    let ann = sign_in_from("127.0.0.12", addr, "ann@example.com", "ann's long password");
    assert_eq!(ann.status, 303, "{}", ann.body);
    assert!(started.elapsed() < Duration::from_secs(10));

    // Set-password posts that would hash have a budget per address: ten at once, then 429
    // with Retry-After (the link still works from elsewhere).
    let mut last = String::new();
    for n in 0..11 {
        last = add(&s, &format!("p{n}@example.com"), "viewer");
        let answer = set_password_from("127.0.0.13", addr, &last, "a long password here");
        if n < 10 {
            assert_eq!(answer.status, 303, "{n}: {}", answer.body);
        } else {
            assert_eq!(answer.status, 429, "{}", answer.body);
            assert!(answer.header("retry-after").is_some());
        }
    }
    let set = set_password_from("127.0.0.14", addr, &last, "a long password here");
    assert_eq!(set.status, 303, "{}", set.body);

    // An address blocked for wrong admin tokens (its eleventh refused) sets no password.
    let bob = add(&s, "bob@example.com", "viewer");
    for n in 0..11 {
        let (cookie, csrf) = form_from("127.0.0.15", addr, "/console/sign-in");
        let wrong = post_from(
            "127.0.0.15",
            addr,
            "/console/sign-in",
            &cookie,
            &[("csrf", &csrf), ("token", "not the admin token")],
        );
        assert_eq!(wrong.status, if n < 10 { 401 } else { 429 });
    }
    let blocked = set_password_from("127.0.0.15", addr, &bob, "bob's long password");
    assert_eq!(blocked.status, 429, "{}", blocked.body);
}

/// Sends `post` from its address and closes the connection at once, without an answer.
fn abandon(addr: SocketAddr, (from, cookie, fields): Post) {
    let body: Vec<String> = fields
        .iter()
        .map(|(n, v)| format!("{n}={}", encode(v)))
        .collect();
    let body = body.join("&");
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let from: IpAddr = from.parse().unwrap();
    socket.bind(&SocketAddr::new(from, 0).into()).unwrap();
    socket.connect(&addr.into()).unwrap();
    let mut stream: TcpStream = socket.into();
    let head = format!(
        "POST /console/sign-in HTTP/1.1\r\nHost: {addr}\r\nContent-Type: \
         application/x-www-form-urlencoded\r\nCookie: {cookie}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    drop(stream);
}

/// Item 1: posts whose clients left while waiting for a turn start no hash and give their
/// places back: ten abandoned posts (two running, eight waiting) leave room for eight more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_password_posts_give_their_places_back() {
    let s = Served::start_on(Backend::Sqlite, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .unwrap();
    let addr = s.admin;
    // How long one check takes on this machine now (under a loaded CI machine, several times
    // the idle figure): the abandoned posts' running hashes hold their places that long.
    let probe = vec![wrong_password("127.0.0.62", addr, "probe@example.com")];
    let started = std::time::Instant::now();
    assert_eq!(all_at_once(addr, probe)[0].status, 401);
    let one_check = started.elapsed();
    let left: Vec<Post> = (0..10)
        .map(|n| wrong_password("127.0.0.60", addr, &format!("gone{n}@example.com")))
        .collect();
    let kept: Vec<Post> = (0..8)
        .map(|n| wrong_password("127.0.0.61", addr, &format!("kept{n}@example.com")))
        .collect();
    for post in left {
        abandon(addr, post);
    }
    // The two running hashes end after about one check; kept ones would wait behind eight
    // abandoned posts for four more rounds if those kept their places.
    tokio::time::sleep(Duration::from_millis(150).max(one_check * 2)).await;
    let answers = all_at_once(addr, kept);
    let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [401; 8], "the abandoned posts' places were free");
}

/// Item 6 (and the 429s of item 11): concurrent wrong passwords of one account from one
/// address are checked no more than the limit; the owner from another address still signs
/// in; the refusals are recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_account_limit_counts_concurrent_attempts_and_spares_other_addresses() {
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
    let link = add(&s, "vera@example.com", "admin");
    let set = set_password_from("127.0.0.30", addr, &link, "vera's long password");
    assert_eq!(set.status, 303, "{}", set.body);

    let posts = (0..8)
        .map(|_| wrong_password("127.0.0.31", addr, "vera@example.com"))
        .collect();
    let answers = all_at_once(addr, posts);
    let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 401).count(),
        3,
        "only the limit is checked: {statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        5,
        "{statuses:?}"
    );
    let right = sign_in_from(
        "127.0.0.31",
        addr,
        "vera@example.com",
        "vera's long password",
    );
    assert_eq!(
        right.status, 429,
        "this address waits, even with the right password"
    );
    assert!(right.header("retry-after").is_some());

    // The owner, from another address, signs in.
    let owner = sign_in_from(
        "127.0.0.32",
        addr,
        "vera@example.com",
        "vera's long password",
    );
    assert_eq!(owner.status, 303, "{}", owner.body);

    let failed = audit_cli(
        &s,
        &["--action", "sign_in.failed", "--actor", "vera@example.com"],
    );
    assert_eq!(failed.len(), 3, "{failed:?}");
    let refused = audit_cli(&s, &["--action", "sign_in.refused"]);
    assert!(
        refused.iter().any(|e| e["target"] == "vera@example.com"
            && e["detail"]["address"] == "127.0.0.31"
            && e["detail"]["limit"] == "account"),
        "{refused:?}"
    );
}

/// Item 9: a disabled person's outstanding link sets nothing, and the refusal is audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_persons_link_writes_nothing_and_is_audited() {
    let s = Served::start_on(Backend::Sqlite, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .unwrap();
    let link = add(&s, "dora@example.com", "editor");
    let env = [("FLOWGATE__DATABASE__URL", s.db.url.as_str())];
    let (code, _, err) = run(&["users", "disable", "dora@example.com"], &env);
    assert_eq!(code, Some(0), "{err}");

    let refused = set_password_from("127.0.0.40", s.admin, &link, "dora's long password");
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused
        .header("set-cookie")
        .is_none_or(|c| !c.starts_with("flowgate_console=")));
    let (code, out, _) = run(&["users", "list", "--json"], &env);
    assert_eq!(code, Some(0));
    let listed: Value = serde_json::from_str(&out).unwrap();
    let dora = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["email"] == "dora@example.com")
        .unwrap();
    assert_eq!(dora["password_set"], false, "nothing was written");
    let entries = audit_cli(&s, &[]);
    assert!(!has(&entries, "dora@example.com", "person.password", None));
    assert!(
        entries.iter().any(|e| e["action"] == "sign_in.refused"
            && e["target"] == "dora@example.com"
            && e["detail"]["reason"] == "disabled"),
        "{entries:?}"
    );
}

/// Item 15: the sign-in form's token is bound to its pre-session cookie and is not the cookie;
/// a post the browser marks as sent from another origin is refused whatever it carries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sign_in_form_is_bound_to_its_pre_session_cookie() {
    let s = Served::start_on(Backend::Sqlite, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .unwrap();
    let addr = s.admin;
    let page = exchange(addr, "GET", "/console/sign-in", &[], "");
    let pre_session = page.cookie("flowgate_console_sign_in").unwrap();
    let token = page.csrf();
    assert_ne!(pre_session, token, "the form's token is not its cookie");
    let cookie = format!("flowgate_console_sign_in={pre_session}");
    let post = |csrf: &str, extra: &[(&str, &str)]| {
        let body = format!("csrf={csrf}&token={TOKEN}");
        let mut headers = vec![
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Cookie", cookie.as_str()),
        ];
        headers.extend_from_slice(extra);
        exchange(addr, "POST", "/console/sign-in", &headers, &body)
    };
    // The cookie's own value as the token (the old double submit) is refused.
    assert_eq!(post(&pre_session, &[]).status, 403);
    // A pair fetched from the server and planted, posted by a sibling domain or another site.
    for site in ["same-site", "cross-site"] {
        let planted = post(&token, &[("Sec-Fetch-Site", site)]);
        assert_eq!(planted.status, 403, "{site}: {}", planted.body);
        assert!(planted
            .header("set-cookie")
            .is_none_or(|c| !c.starts_with("flowgate_console=")));
    }
    // The console's own page posting its form signs in.
    let signed = post(&token, &[("Sec-Fetch-Site", "same-origin")]);
    assert_eq!(signed.status, 303, "{}", signed.body);
}

/// Item 11 (PostgreSQL): a failed sign-in whose email holds a NUL byte is the normal failure
/// and is recorded, the NUL escaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_in_an_email_is_a_recorded_failure_on_postgres() {
    let s = Served::start_on(Backend::Postgres, &[("FLOWGATE__ADMIN__TOKEN", TOKEN)])
        .await
        .unwrap();
    let answer = sign_in_from(
        "127.0.0.50",
        s.admin,
        "ann\0@example.com",
        "some password here",
    );
    assert_eq!(answer.status, 401, "{}", answer.body);
    let entries = audit_cli(&s, &["--action", "sign_in.failed"]);
    assert!(
        entries.iter().any(
            |e| e["target"] == "ann\\u{0}@example.com" && e["actor"] == "ann\\u{0}@example.com"
        ),
        "{entries:?}"
    );
}

/// Item 11: the key `flowgate demo` creates and the one seeded at first start are recorded
/// (`key.create` by `cli`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_keys_are_recorded_in_the_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    let db_url = format!("sqlite://{}/flowgate.db", dir.path().display());
    let env = [("FLOWGATE__DATABASE__URL", db_url.as_str())];
    let (code, _, err) = run(&["migrate"], &env);
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = run(&["demo", "--json"], &env);
    assert_eq!(code, Some(0), "{err}");
    let demo: Value = serde_json::from_str(&out).unwrap();
    assert!(demo["key"].is_string());
    let key_creations = || {
        let (code, out, err) = run(&["audit", "list", "--json", "--action", "key.create"], &env);
        assert_eq!(code, Some(0), "{err}");
        serde_json::from_str::<Value>(&out)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    };
    let created = key_creations();
    assert_eq!(created.len(), 1, "{created:?}");
    assert_eq!(created[0]["actor"], "cli");
    assert_eq!(created[0]["detail"]["name"], "demo");

    // First start on an empty store seeds the demo with a key: recorded too.
    let empty = tempfile::tempdir().unwrap();
    let empty_url = format!("sqlite://{}/flowgate.db", empty.path().display());
    let (api, admin) = (crate::support::free_port(), crate::support::free_port());
    let mut child = crate::support::flowgate()
        .arg("serve")
        .env("FLOWGATE__SERVER__LISTEN", format!("127.0.0.1:{api}"))
        .env("FLOWGATE__ADMIN__LISTEN", format!("127.0.0.1:{admin}"))
        .env("FLOWGATE__DATABASE__URL", &empty_url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let env = [("FLOWGATE__DATABASE__URL", empty_url.as_str())];
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seeded = Vec::new();
    while seeded.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (code, out, _) = run(&["audit", "list", "--json", "--action", "key.create"], &env);
        if code == Some(0) {
            seeded = serde_json::from_str::<Value>(&out)
                .ok()
                .and_then(|v| v.as_array().cloned())
                .unwrap_or_default();
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(seeded.len(), 1, "the seeded key is recorded: {seeded:?}");
    assert_eq!(seeded[0]["detail"]["type"], "sdk");
}
