//! `flowgate users` and `flowgate audit` (D28): the console's people and the audit log, from
//! the command line. What a command changes is recorded in the audit log with `cli` as who.

use flowgate_control::import::CLI_ACTOR;
use flowgate_control::people::{self, Linked, PeopleFailure};
use flowgate_domain::people::{AuditAction, AuditQuery, Person, PersonUpdate};
use flowgate_domain::ports::{AuditLog, PeopleStore, StoreError};
use flowgate_http::console::people::audit_json;
use flowgate_store::Store;
use serde_json::json;
use time::OffsetDateTime;

use crate::cli::{AuditCommand, ExitCode, UsersCommand};
use crate::commands::{print_json, store_failure};
use crate::config::Config;
use crate::terminal::{errln, outln};

fn time_text(t: OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

fn person_json(p: &Person) -> serde_json::Value {
    json!({
        "id": p.id.to_string(), "email": p.email, "role": p.role.as_str(),
        "disabled": p.disabled, "password_set": p.password_hash.is_some(),
        "created_at": time_text(p.created_at), "updated_at": time_text(p.updated_at),
    })
}

/// What a failed people command prints, and its exit code: 4 for what the caller got wrong,
/// 5 for a person who is not there, 1 for the store.
fn failed(e: PeopleFailure) -> ExitCode {
    match e {
        PeopleFailure::Invalid(message) => {
            errln!("flowgate: {message}");
            ExitCode::InvalidInput
        }
        PeopleFailure::NotFound(email) => {
            errln!("flowgate: no person {email:?}; `flowgate users list` shows who there is");
            ExitCode::NotFound
        }
        PeopleFailure::Exists(email) => {
            errln!(
                "flowgate: {email} is already a person here; `flowgate users link {email}` makes \
                 a new link"
            );
            ExitCode::InvalidInput
        }
        PeopleFailure::Removed(email) => {
            errln!("flowgate: {email} was removed meanwhile");
            ExitCode::NotFound
        }
        PeopleFailure::NoRandomness(why) => {
            errln!("flowgate: no randomness for a link: {why}");
            ExitCode::Failure
        }
        PeopleFailure::Store(e) => store_failure("the people could not be read or written", &e),
    }
}

/// Warns that the audit entry of a change that was made was not written.
fn audit_warning(failure: Option<StoreError>) {
    if let Some(e) = failure {
        errln!("flowgate: warning: the audit entry was not written: {e}");
    }
}

/// Prints the link of `linked` (its URL under `base_url`, or the admin listener's address).
fn print_link(config: &Config, linked: Linked, base_url: Option<String>, json: bool) -> ExitCode {
    audit_warning(linked.audit);
    let person = &linked.person;
    let base = base_url
        .unwrap_or_else(|| crate::serve::base_url(&config.admin.listen))
        .trim_end_matches('/')
        .to_owned();
    let url = format!("{base}{}", people::sign_in_link_path(&linked.secret));
    if json {
        let mut v = person_json(person);
        v["link"] = json!(url);
        v["link_expires_at"] = json!(time_text(linked.expires_at));
        print_json(&v);
    } else {
        outln!("{url}");
        errln!(
            "the sign-in link of {} ({}), shown this once: it works once, until {}",
            person.email,
            person.role,
            time_text(linked.expires_at)
        );
    }
    ExitCode::Success
}

/// Prints the people as a table or JSON.
fn print_people(people: &[Person], json: bool) {
    if json {
        print_json(&json!(people.iter().map(person_json).collect::<Vec<_>>()));
        return;
    }
    outln!("{:<40}  {:<6}  {:<15}  added", "email", "role", "status");
    for p in people {
        let status = if p.disabled {
            "disabled"
        } else if p.password_hash.is_none() {
            "no password yet"
        } else {
            "active"
        };
        outln!(
            "{:<40}  {:<6}  {:<15}  {}",
            p.email,
            p.role.as_str(),
            status,
            time_text(p.created_at)
        );
    }
}

/// `flowgate users ...`: `flowgate_control::people`'s use cases, as `cli`.
pub async fn users(store: &Store, config: &Config, command: UsersCommand) -> ExitCode {
    let now = OffsetDateTime::now_utc();
    let update = |email: String, change: PersonUpdate| async move {
        match people::update(store, &email, change, CLI_ACTOR, now).await {
            Ok((after, audit)) => {
                audit_warning(audit);
                let status = if after.disabled {
                    "disabled"
                } else {
                    "enabled"
                };
                outln!("{}: {}, {status}", after.email, after.role);
                ExitCode::Success
            }
            Err(e) => failed(e),
        }
    };
    match command {
        UsersCommand::Add {
            email,
            role,
            base_url,
            json,
        } => match people::add(store, (&email, role.into()), CLI_ACTOR, now).await {
            Ok(linked) => print_link(config, linked, base_url, json),
            Err(e) => failed(e),
        },
        UsersCommand::Link {
            email,
            base_url,
            json,
        } => match people::link(store, &email, CLI_ACTOR, now).await {
            Ok(linked) => print_link(config, linked, base_url, json),
            Err(e) => failed(e),
        },
        UsersCommand::List { json } => match store.list_people().await {
            Ok(people) => {
                print_people(&people, json);
                ExitCode::Success
            }
            Err(e) => store_failure("the people could not be read", &e),
        },
        UsersCommand::SetRole { email, role } => {
            let change = PersonUpdate {
                role: Some(role.into()),
                ..PersonUpdate::default()
            };
            update(email, change).await
        }
        UsersCommand::Disable { email } => {
            let change = PersonUpdate {
                disabled: Some(true),
                ..PersonUpdate::default()
            };
            update(email, change).await
        }
        UsersCommand::Enable { email } => {
            let change = PersonUpdate {
                disabled: Some(false),
                ..PersonUpdate::default()
            };
            update(email, change).await
        }
    }
}

/// `flowgate audit list ...`
pub async fn audit(store: &Store, command: AuditCommand) -> ExitCode {
    let AuditCommand::List {
        since,
        actor,
        action,
        limit,
        json,
    } = command;
    let since = match since
        .map(|s| {
            OffsetDateTime::parse(&s, &time::format_description::well_known::Rfc3339).map_err(
                |_| format!("--since must be an RFC 3339 time (2026-11-01T00:00:00Z), not {s:?}"),
            )
        })
        .transpose()
    {
        Ok(since) => since,
        Err(message) => {
            errln!("flowgate: {message}");
            return ExitCode::InvalidInput;
        }
    };
    let action = match action.map(|a| a.parse::<AuditAction>()).transpose() {
        Ok(action) => action,
        Err(e) => {
            errln!("flowgate: --action: {e}");
            return ExitCode::InvalidInput;
        }
    };
    let query = AuditQuery {
        since,
        until: None,
        actor,
        action,
        before_id: None,
        limit,
    };
    match store.list_audit(&query).await {
        Ok(entries) => {
            if json {
                print_json(&json!(entries.iter().map(audit_json).collect::<Vec<_>>()));
            } else {
                for e in &entries {
                    let revisions = match (e.revision_before, e.revision_after) {
                        (Some(b), Some(a)) => format!(" r{b}->r{a}"),
                        _ => String::new(),
                    };
                    let comment = e
                        .comment
                        .as_deref()
                        .map(|c| format!(" \"{c}\""))
                        .unwrap_or_default();
                    outln!(
                        "{:>6}  {}  {:<28}  {:<16}  {}{revisions}{comment}",
                        e.id,
                        time_text(e.at),
                        e.actor,
                        e.action.as_str(),
                        e.target.as_deref().unwrap_or("-"),
                    );
                }
            }
            ExitCode::Success
        }
        Err(e) => store_failure("the audit log could not be read", &e),
    }
}
