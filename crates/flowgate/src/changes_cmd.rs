//! `flowgate changes schedule|list|cancel` (D28, D29), as `cli` in the audit log.

use std::io::Read as _;
use std::path::Path;

use flowgate_control::import::CLI_ACTOR;
use flowgate_domain::catalog::CatalogChange;
use flowgate_domain::ids::ChangeId;
use flowgate_domain::people::{
    AuditAction, ChangeDecision, ChangeRecord, ChangeState, NewAuditEntry,
};
use flowgate_domain::ports::{AuditLog as _, ChangeStore as _};
use flowgate_domain::text::rfc3339;
use flowgate_store::Store;
use serde_json::{json, Value};
use time::OffsetDateTime;

use crate::cli::{ChangesCommand, ExitCode};
use crate::commands::{print_json, store_failure};
use crate::terminal::{errln, outln};
use flowgate_control::schedules::{schedule, ScheduleFailure};

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
            let decision = ChangeDecision {
                state: ChangeState::Withdrawn,
                by: CLI_ACTOR.to_owned(),
                at: now,
                applied_revision: None,
                note: Some("cancelled with flowgate changes cancel".to_owned()),
            };
            let cancelled = (AuditAction::ChangeWithdraw, None, "cancelled");
            decide(store, id, decision, cancelled, json, now).await
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
    let comment = comment.trim();
    if comment.is_empty() || !flowgate_domain::events::is_storable_text(comment) {
        errln!("flowgate: --comment says why the change is rejected (text, not empty)");
        return ExitCode::InvalidInput;
    }
    let decision = ChangeDecision {
        state: ChangeState::Rejected,
        by: CLI_ACTOR.to_owned(),
        at: now,
        applied_revision: None,
        note: Some(comment.to_owned()),
    };
    let rejected = (AuditAction::ChangeReject, Some(comment), "rejected");
    decide(store, id, decision, rejected, json, now).await
}

/// Writes `decision` on pending change `id` as `cli` and audits it as `action` with `comment`;
/// prints the change (`--json`) or that it was `what`, or why not.
async fn decide(
    store: &Store,
    id: ChangeId,
    decision: ChangeDecision,
    (action, comment, what): (AuditAction, Option<&str>, &str),
    json: bool,
    now: OffsetDateTime,
) -> ExitCode {
    match store.decide_change(id, decision).await {
        Ok(true) => {
            let entry = NewAuditEntry {
                at: now,
                actor: CLI_ACTOR.to_owned(),
                action,
                target: Some(id.to_string()),
                comment: comment.map(str::to_owned),
                revision_before: None,
                revision_after: None,
                detail: Value::Null,
            };
            if let Err(e) = store.append_audit(entry).await {
                tracing::error!(error = %e, "the audit entry could not be written");
            }
            match store.change(id).await {
                Ok(Some(record)) if json => print_json(&change_json(&record)),
                _ => errln!("change {id} {what}"),
            }
            ExitCode::Success
        }
        Ok(false) => not_pending(store, id, what).await,
        Err(e) => store_failure(&format!("the change was not {what}"), &e),
    }
}

/// Why change `id` was not decided: it is no longer pending, or there is none.
async fn not_pending(store: &Store, id: ChangeId, what: &str) -> ExitCode {
    match store.change(id).await {
        Ok(Some(record)) => {
            errln!(
                "flowgate: change {id} is {}: only a pending change is {what}",
                record.state.as_str()
            );
            ExitCode::InvalidInput
        }
        Ok(None) => {
            errln!("flowgate: no change {id}");
            ExitCode::NotFound
        }
        Err(e) => store_failure("the change could not be read", &e),
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

/// A change as `--json` prints it.
fn change_json(c: &ChangeRecord) -> Value {
    json!({
        "id": c.id.to_string(),
        "author": c.author,
        "created_at": rfc3339(c.created_at),
        "apply_at": c.apply_at.map(rfc3339),
        "base_revision": c.base_revision,
        "summary": c.summary,
        "comment": c.comment,
        "state": c.state.as_str(),
        "decided_by": c.decided_by,
        "decided_at": c.decided_at.map(rfc3339),
        "applied_revision": c.applied_revision,
        "note": c.note,
        "change": c.change,
    })
}
