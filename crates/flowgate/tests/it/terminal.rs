//! The command line's terminal output and its numeric flags (issue 65): flags out of range
//! refused before anything runs, text from the store escaped, and a closed standard output
//! ending a command quietly.

use std::process::Stdio;

use flowgate_domain::people::{AuditAction, NewAuditEntry};
use flowgate_domain::ports::AuditLog as _;
use flowgate_testkit::TestDb;
use serde_json::Value;

use crate::fixtures;
use crate::support::{flowgate, run};

/// Every numeric flag is checked by the command line itself, naming the flag, the value and
/// the range (exit 2, usage): `--minimum-users 18446744073709551615` was written into the
/// catalog (whose export then did not import), `--limit 0` listed nothing or was changed
/// silently.
#[tokio::test]
async fn numeric_flags_are_refused_outside_their_range() {
    let db = TestDb::sqlite().await;
    let env = [("FLOWGATE__DATABASE__URL", db.url.as_str())];
    let start = [
        "rollouts",
        "start",
        "--app",
        "10000000-0000-4000-8000-000000000001",
        "--placement",
        "onboarding",
        "--flow",
        "10000000-0000-4000-8000-000000000002",
        "--minimum-users",
    ];
    for (value, range) in [
        ("18446744073709551615", "1..=4294967295"),
        ("4294967296", "1..=4294967295"),
        ("0", "1..=4294967295"),
    ] {
        let args: Vec<&str> = start.iter().copied().chain([value]).collect();
        let (code, _, err) = run(&args, &env);
        assert_eq!(code, Some(2), "--minimum-users {value}: {err}");
        assert!(
            err.contains("--minimum-users") && err.contains(value) && err.contains(range),
            "{err}"
        );
    }
    for command in [
        &["audit", "list"][..],
        &["changes", "list"],
        &["catalog", "history"],
        &["events", "dead-letters", "list"],
    ] {
        for value in ["0", "10001", "18446744073709551616", "-1"] {
            let flag = format!("--limit={value}");
            let args: Vec<&str> = command.iter().copied().chain([flag.as_str()]).collect();
            let (code, _, err) = run(&args, &env);
            assert_eq!(code, Some(2), "{args:?}: {err}");
            assert!(
                err.contains("--limit") && err.contains(value),
                "{args:?}: {err}"
            );
        }
        let args: Vec<&str> = command
            .iter()
            .copied()
            .chain(["--limit", "10000"])
            .collect();
        let (code, _, err) = run(&args, &env);
        assert_eq!(code, Some(0), "{args:?}: {err}");
    }
}

/// What an attacker can put in the store (a sign-in's email lands in the audit log, a file
/// name in the import history) reaches the operator's terminal escaped: no ESC sequence, no
/// line of its own, in every text output; JSON keeps the value, escaped by JSON's rules.
#[tokio::test]
async fn text_from_the_store_is_escaped_on_the_terminal() {
    let db = TestDb::sqlite().await;
    let env = [("FLOWGATE__DATABASE__URL", db.url.as_str())];
    let forged = "\u{1b}[2J\u{1b}]0;owned\u{7}eve@example.com\n  2 2026-01-01 cli person.add \
                  \u{9b}31mroot\u{202e}";
    db.store
        .append_audit(NewAuditEntry {
            at: time::OffsetDateTime::now_utc(),
            actor: forged.to_owned(),
            action: AuditAction::SignInFailed,
            target: Some(forged.to_owned()),
            comment: Some(forged.to_owned()),
            revision_before: None,
            revision_after: None,
            detail: Value::Null,
        })
        .await
        .unwrap();
    // A catalog imported from a file whose name holds the same.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("\u{1b}[31mcatalog\u{1b}[0m\n.json");
    std::fs::write(&file, fixtures::catalog_json().to_string()).unwrap();
    let path = file.to_str().unwrap();
    let (code, imported, err) = run(&["import", path], &env);
    assert_eq!(code, Some(0), "{err}");
    for (args, out) in [
        (vec!["import", path], imported),
        (vec!["audit", "list"], run(&["audit", "list"], &env).1),
        (
            vec!["catalog", "history"],
            run(&["catalog", "history"], &env).1,
        ),
    ] {
        assert!(!out.is_empty(), "{args:?}");
        let unsafe_chars: Vec<char> = out
            .chars()
            .filter(|c| (c.is_control() && *c != '\n') || *c == '\u{202e}')
            .collect();
        assert!(
            unsafe_chars.is_empty(),
            "{args:?}: {unsafe_chars:?} in {out}"
        );
        assert!(out.contains("\\x1b[31m"), "{args:?}: {out}");
        if args[0] == "audit" {
            let (_, listed, _) = run(&["audit", "list", "--json"], &env);
            let entries: Value = serde_json::from_str(&listed).unwrap();
            let entries = entries.as_array().unwrap().len();
            assert_eq!(out.lines().count(), entries, "an entry, a line: {out}");
            assert!(
                out.contains("\\x1b[2J\\x1b]0;owned\\x07eve@example.com\\n")
                    && out.contains("\\u{9b}31mroot\\u{202e}"),
                "{out}"
            );
        }
    }
    // JSON: the same value, read back, and nothing a terminal acts on.
    let (code, out, err) = run(&["audit", "list", "--json"], &env);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        !out.chars()
            .any(|c| c == '\u{1b}' || c == '\u{9b}' || c == '\u{202e}'),
        "{out}"
    );
    let entries: Value = serde_json::from_str(&out).unwrap();
    let actors: Vec<&Value> = entries
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["actor"])
        .collect();
    assert!(actors.contains(&&Value::from(forged)), "{actors:?}");
}

/// `flowgate ... | head -1`: a command whose standard output is closed before it writes ends
/// quietly, with 141 (as a process SIGPIPE ended), never with a panic and its backtrace.
#[tokio::test]
async fn a_closed_output_ends_every_command_quietly() {
    let db = TestDb::sqlite().await;
    crate::support::import(&db.url, &fixtures::catalog_json());
    for args in [
        &["rollouts", "list"][..],
        &["rollouts", "list", "--json"],
        &["audit", "list"],
        &["changes", "list"],
        &["catalog", "history"],
        &["catalog", "export"],
        &["users", "list"],
        &["experiments", "list"],
        &["events", "dead-letters", "list"],
        &[
            "keys",
            "list",
            "--workspace",
            "10000000-0000-4000-8000-000000000001",
        ],
        &["migrate"],
    ] {
        // The reading end is closed before the command starts: its first write fails.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = flowgate()
            .args(args)
            .env("FLOWGATE__DATABASE__URL", &db.url)
            .stdin(Stdio::null())
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(141), "{args:?}: {err}");
        assert!(err.trim().is_empty(), "{args:?}: quietly: {err}");
    }
}
