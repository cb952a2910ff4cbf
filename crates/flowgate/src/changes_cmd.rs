//! `flowgate changes schedule|list|cancel` (D28, D29), as `cli` in the audit log.

use std::io::Read as _;
use std::path::Path;

use flowgate_control::import::CLI_ACTOR;
use flowgate_domain::catalog::CatalogChange;
use flowgate_domain::ids::ChangeId;
use flowgate_domain::people::{ChangeRecord, ChangeState};
use flowgate_domain::ports::ChangeStore as _;
use flowgate_domain::text::rfc3339;
use flowgate_store::Store;
use serde_json::{json, Value};
use time::OffsetDateTime;

use crate::cli::{ChangesCommand, ExitCode};
use crate::commands::{print_json, store_failure};
use crate::terminal::{errln, outln};
use flowgate_control::review::decide::{self, DecideFailure, Withdrawal};
use flowgate_control::schedules::{schedule, ScheduleFailure};
use flowgate_http::changes::change_json;

/// `flowgate changes ...`
pub async fn changes(store: &Store, command: ChangesCommand) -> ExitCode {
    let now = OffsetDateTime::now_utc();
    match command {
        ChangesCommand::Schedule {
            file,
            at,
            comment,
            json,
        } => {
            let at = match OffsetDateTime::parse(
                &at,
                &time::format_description::well_known::Rfc3339,
            ) {
                Ok(at) => at,
                Err(_) => {
                    errln!("flowgate: --at must be an RFC 3339 time (2026-12-01T09:00:00Z), not {at:?}");
                    return ExitCode::InvalidInput;
                }
            };
            let change = match read_change(&file) {
                Ok(change) => change,
                Err(message) => {
                    errln!("flowgate: {}: {message}", file.display());
                    return ExitCode::InvalidInput;
                }
            };
            match schedule(store, &change, at, CLI_ACTOR, &comment, now).await {
                Ok(record) if json => {
                    print_json(&change_json(&record));
                    ExitCode::Success
                }
                Ok(record) => {
                    outln!("{}", record.id);
                    errln!("scheduled for {}: {}", rfc3339(at), record.summary);
                    ExitCode::Success
                }
                Err(ScheduleFailure::Invalid(message)) => {
                    errln!("flowgate: the change does not apply: {message}");
                    ExitCode::InvalidInput
                }
                Err(ScheduleFailure::Store(e)) => store_failure("the change was not scheduled", &e),
            }
        }
        ChangesCommand::List { state, limit, json } => list(store, state, limit, json).await,
        ChangesCommand::Reject { id, comment, json } => {
            reject(store, &id, &comment, json, now).await
        }
        ChangesCommand::Cancel { id, json } => {
            let Ok(id) = id.parse::<ChangeId>() else {
                errln!("flowgate: {id:?} is not a change id (a hyphenated UUID)");
                return ExitCode::InvalidInput;
            };
            let how = Withdrawal::Cancelled {
                note: "cancelled with flowgate changes cancel",
            };
            let cancelled = decide::withdraw(store, id, CLI_ACTOR, how, now).await;
            decided(cancelled, json, "cancelled")
        }
    }
}

/// `flowgate changes list [--state STATE] [--limit N] [--json]`.
async fn list(store: &Store, state: Option<String>, limit: usize, json: bool) -> ExitCode {
    let state = match state.map(|s| s.parse::<ChangeState>()).transpose() {
        Ok(state) => state,
        Err(e) => {
            errln!("flowgate: --state: {e}");
            return ExitCode::InvalidInput;
        }
    };
    match store.list_changes(state, limit).await {
        Ok(listed) if json => {
            print_json(&json!(listed.iter().map(change_json).collect::<Vec<_>>()));
            ExitCode::Success
        }
        Ok(listed) => {
            if listed.is_empty() {
                outln!("no changes");
            }
            for c in &listed {
                let when = c
                    .apply_at
                    .map(|at| format!(" at {}", rfc3339(at)))
                    .unwrap_or_default();
                outln!(
                    "{}  {:<9}{when}  {}  ({})",
                    c.id,
                    c.state.as_str(),
                    c.summary,
                    c.author
                );
            }
            ExitCode::Success
        }
        Err(e) => store_failure("the changes could not be read", &e),
    }
}

/// `flowgate changes reject ID --comment WHY`: a pending change `rejected` as `cli` (D35),
/// the comment kept as its note and in the audit log.
async fn reject(
    store: &Store,
    id: &str,
    comment: &str,
    json: bool,
    now: OffsetDateTime,
) -> ExitCode {
    let Ok(id) = id.parse::<ChangeId>() else {
        errln!("flowgate: {id:?} is not a change id (a hyphenated UUID)");
        return ExitCode::InvalidInput;
    };
    let rejected = decide::reject(store, id, CLI_ACTOR, comment, now).await;
    decided(rejected, json, "rejected")
}

/// Prints the change `outcome` decided (`--json`) or that it was `what`, or why not.
fn decided(outcome: Result<ChangeRecord, DecideFailure>, json: bool, what: &str) -> ExitCode {
    match outcome {
        Ok(record) if json => {
            print_json(&change_json(&record));
            ExitCode::Success
        }
        Ok(record) => {
            errln!("change {} {what}", record.id);
            ExitCode::Success
        }
        Err(DecideFailure::Store(e)) => store_failure(&format!("the change was not {what}"), &e),
        Err(e @ DecideFailure::NotFound(_)) => {
            errln!("flowgate: {e}");
            ExitCode::NotFound
        }
        Err(DecideFailure::Comment(why)) => {
            errln!("flowgate: --comment: {why}");
            ExitCode::InvalidInput
        }
        Err(e) => {
            errln!("flowgate: {e}");
            ExitCode::InvalidInput
        }
    }
}

/// The change in `file` (`-`: standard input): its stored JSON, any format this release reads.
fn read_change(file: &Path) -> Result<CatalogChange, String> {
    let text = if file == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| e.to_string())?;
        text
    } else {
        std::fs::read_to_string(file).map_err(|e| e.to_string())?
    };
    let value: Value = serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))?;
    CatalogChange::from_json(&value).map_err(|e| e.to_string())
}
