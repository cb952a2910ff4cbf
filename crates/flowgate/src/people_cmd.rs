//! `flowgate users` and `flowgate audit` (D28): the console's people and the audit log, from
//! the command line. What a command changes is recorded in the audit log with `cli` as who.

use flowgate_domain::ids::PersonId;
use flowgate_domain::people::{AuditAction, AuditQuery, Person, PersonUpdate, Role};
use flowgate_domain::ports::{AuditLog, PeopleStore, StoreError};
use flowgate_http::console::people::{audit_json, new_sign_in_link, sign_in_link_path};
use flowgate_store::Store;
use serde_json::json;
use time::OffsetDateTime;

use crate::cli::{AuditCommand, ExitCode, UsersCommand};
use crate::commands::{print_json, record_cli, store_failure};
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

/// The person of `email`, or exit 5 (4 for an email that is not one).
async fn person_of(store: &Store, email: &str) -> Result<Person, ExitCode> {
    let normalized = match flowgate_domain::people::normalize_email(email) {
        Ok(email) => email,
        Err(e) => {
            errln!("flowgate: {e}");
            return Err(ExitCode::InvalidInput);
        }
    };
    match store.person_by_email(&normalized).await {
        Ok(Some(person)) => Ok(person),
        Ok(None) => {
            errln!("flowgate: no person {normalized:?}; `flowgate users list` shows who there is");
            Err(ExitCode::NotFound)
        }
        Err(e) => Err(store_failure("the people could not be read", &e)),
    }
}

/// Makes and prints a link for `person`.
async fn print_link(
    store: &Store,
    config: &Config,
    person: &Person,
    base_url: Option<String>,
    json: bool,
) -> ExitCode {
    let now = OffsetDateTime::now_utc();
    let Ok((secret, link)) = new_sign_in_link(person.id, now) else {
        errln!("flowgate: no randomness for a link");
        return ExitCode::Failure;
    };
    let expires_at = link.expires_at;
    if let Err(e) = store.create_sign_in_link(link).await {
        return store_failure("the link was not made", &e);
    }
    let base = base_url
        .unwrap_or_else(|| crate::serve::base_url(&config.admin.listen))
        .trim_end_matches('/')
        .to_owned();
    let url = format!("{base}{}", sign_in_link_path(&secret));
    if json {
        let mut v = person_json(person);
        v["link"] = json!(url);
        v["link_expires_at"] = json!(time_text(expires_at));
        print_json(&v);
    } else {
        outln!("{url}");
        errln!(
            "the sign-in link of {} ({}), shown this once: it works once, until {}",
            person.email,
            person.role,
            time_text(expires_at)
        );
    }
    ExitCode::Success
}

/// `flowgate users add EMAIL --role ROLE`: the person, audited, and their one-time link.
async fn add(
    store: &Store,
    config: &Config,
    (email, role): (&str, Role),
    base_url: Option<String>,
    json: bool,
    now: OffsetDateTime,
) -> ExitCode {
    let person = match Person::new(PersonId::from_uuid(uuid::Uuid::new_v4()), email, role, now) {
        Ok(person) => person,
        Err(e) => {
            errln!("flowgate: {e}");
            return ExitCode::InvalidInput;
        }
    };
    match store.add_person(person.clone()).await {
        Ok(()) => {}
        Err(StoreError::Conflict { .. }) => {
            errln!(
                "flowgate: {} is already a person here; `flowgate users link {}` makes a new link",
                person.email,
                person.email
            );
            return ExitCode::InvalidInput;
        }
        Err(e) => return store_failure("the person was not added", &e),
    }
    record_cli(
        store,
        AuditAction::PersonAdd,
        Some(person.email.clone()),
        json!({"role": role.as_str()}),
    )
    .await;
    print_link(store, config, &person, base_url, json).await
}

/// `flowgate users ...`
pub async fn users(store: &Store, config: &Config, command: UsersCommand) -> ExitCode {
    let now = OffsetDateTime::now_utc();
    match command {
        UsersCommand::Add {
            email,
            role,
            base_url,
            json,
        } => add(store, config, (&email, role.into()), base_url, json, now).await,
        UsersCommand::Link {
            email,
            base_url,
            json,
        } => {
            let person = match person_of(store, &email).await {
                Ok(person) => person,
                Err(code) => return code,
            };
            record_cli(
                store,
                AuditAction::PersonPassword,
                Some(person.email.clone()),
                json!({"link": "made"}),
            )
            .await;
            print_link(store, config, &person, base_url, json).await
        }
        UsersCommand::List { json } => match store.list_people().await {
            Ok(people) => {
                if json {
                    print_json(&json!(people.iter().map(person_json).collect::<Vec<_>>()));
                } else {
                    outln!("{:<40}  {:<6}  {:<15}  added", "email", "role", "status");
                    for p in &people {
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
                ExitCode::Success
            }
            Err(e) => store_failure("the people could not be read", &e),
        },
        UsersCommand::SetRole { email, role } => {
            let role: Role = role.into();
            update(
                store,
                &email,
                PersonUpdate {
                    role: Some(role),
                    ..PersonUpdate::default()
                },
                AuditAction::PersonRole,
                |before| json!({"from": before.role.as_str(), "to": role.as_str()}),
            )
            .await
        }
        UsersCommand::Disable { email } => {
            update(
                store,
                &email,
                PersonUpdate {
                    disabled: Some(true),
                    ..PersonUpdate::default()
                },
                AuditAction::PersonDisable,
                |_| json!({"disabled": true}),
            )
            .await
        }
        UsersCommand::Enable { email } => {
            update(
                store,
                &email,
                PersonUpdate {
                    disabled: Some(false),
                    ..PersonUpdate::default()
                },
                AuditAction::PersonDisable,
                |_| json!({"disabled": false}),
            )
            .await
        }
    }
}

async fn update(
    store: &Store,
    email: &str,
    change: PersonUpdate,
    action: AuditAction,
    detail: impl FnOnce(&Person) -> serde_json::Value,
) -> ExitCode {
    let person = match person_of(store, email).await {
        Ok(person) => person,
        Err(code) => return code,
    };
    let detail = detail(&person);
    match store
        .update_person(person.id, change, OffsetDateTime::now_utc())
        .await
    {
        Ok(Some(after)) => {
            record_cli(store, action, Some(after.email.clone()), detail).await;
            let status = if after.disabled {
                "disabled"
            } else {
                "enabled"
            };
            outln!("{}: {}, {status}", after.email, after.role);
            ExitCode::Success
        }
        Ok(None) => {
            errln!("flowgate: {} was removed meanwhile", person.email);
            ExitCode::NotFound
        }
        Err(e) => store_failure("the person was not changed", &e),
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
