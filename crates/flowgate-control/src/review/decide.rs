//! A pending change closed without being applied (D35): rejected with why by someone other
//! than its author, or withdrawn (by its author, or cancelled by an operator from the command
//! line). The console, `flowgate changes reject|cancel` and the admin API call these; each
//! writes the decision only while the change is still pending, then its audit entry.

use flowgate_domain::ids::ChangeId;
use flowgate_domain::people::{
    AuditAction, ChangeDecision, ChangeRecord, ChangeState, NewAuditEntry,
};
use flowgate_domain::ports::StoreError;
use serde_json::{json, Value};
use time::OffsetDateTime;

use crate::ControlStore;

/// Characters a rejection's comment may have at most (the console's forms take as many).
pub const MAX_COMMENT_CHARS: usize = 2000;

/// Why a change was not decided. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum DecideFailure {
    /// No change has this id.
    #[error("no change {0}")]
    NotFound(ChangeId),
    /// The change is no longer pending (decided meanwhile, or long ago).
    #[error("change {id} is {state}: only a pending change is {verb}")]
    NotPending {
        /// The change.
        id: ChangeId,
        /// Its state now.
        state: &'static str,
        /// What was asked (`rejected`, `withdrawn`).
        verb: &'static str,
    },
    /// Its author cannot reject it (they withdraw it).
    #[error("nobody rejects their own change: withdraw it instead")]
    OwnChange,
    /// Only its author withdraws it.
    #[error("only its author withdraws a change")]
    NotAuthor,
    /// The comment is missing, too long or cannot be stored (quoted).
    #[error("{0}")]
    Comment(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl DecideFailure {
    /// A stable code for the failure (the admin API's problem code).
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "not_found",
            Self::NotPending { .. } => "not_pending",
            Self::OwnChange => "own_change",
            Self::NotAuthor => "not_author",
            Self::Comment(_) => "invalid_comment",
            Self::Store(_) => "store_unavailable",
        }
    }
}

/// Who withdraws a change.
#[derive(Clone, Copy, Debug)]
pub enum Withdrawal<'a> {
    /// Its author, who changed their mind.
    ByAuthor,
    /// An operator on the command line, cancelling a scheduled or proposed change, with the
    /// note kept on it.
    Cancelled {
        /// The change's note.
        note: &'a str,
    },
}

/// Rejects pending change `id` as `actor` (not its author) with `comment`, kept as its note
/// (its author reads it on the change's page) and in the audit entry (`change.reject`).
pub async fn reject(
    store: &dyn ControlStore,
    id: ChangeId,
    actor: &str,
    comment: &str,
    now: OffsetDateTime,
) -> Result<ChangeRecord, DecideFailure> {
    let comment = rejection_comment(comment)?;
    let found = pending(store, id, "rejected").await?;
    if found.author == actor {
        return Err(DecideFailure::OwnChange);
    }
    let decision = decision(ChangeState::Rejected, actor, Some(comment.clone()), now);
    let detail = json!({"author": found.author, "description": found.summary});
    let entry = entry(
        actor,
        AuditAction::ChangeReject,
        id,
        Some(comment),
        detail,
        now,
    );
    decide(store, id, decision, entry, "rejected").await
}

/// Withdraws pending change `id` as `actor` (`change.withdraw`).
pub async fn withdraw(
    store: &dyn ControlStore,
    id: ChangeId,
    actor: &str,
    how: Withdrawal<'_>,
    now: OffsetDateTime,
) -> Result<ChangeRecord, DecideFailure> {
    let found = pending(store, id, "withdrawn").await?;
    let note = match how {
        Withdrawal::ByAuthor if found.author != actor => return Err(DecideFailure::NotAuthor),
        Withdrawal::ByAuthor => None,
        Withdrawal::Cancelled { note } => Some(note.to_owned()),
    };
    let decision = decision(ChangeState::Withdrawn, actor, note, now);
    let entry = entry(
        actor,
        AuditAction::ChangeWithdraw,
        id,
        None,
        Value::Null,
        now,
    );
    decide(store, id, decision, entry, "withdrawn").await
}

/// A rejection's comment: trimmed, required, at most [`MAX_COMMENT_CHARS`], storable.
fn rejection_comment(given: &str) -> Result<String, DecideFailure> {
    let comment = given.trim();
    if comment.is_empty() {
        return Err(DecideFailure::Comment(
            "a rejection says why in its comment: its author reads it".to_owned(),
        ));
    }
    let chars = comment.chars().count();
    if chars > MAX_COMMENT_CHARS {
        return Err(DecideFailure::Comment(format!(
            "the comment has {chars} characters; at most {MAX_COMMENT_CHARS}"
        )));
    }
    if !flowgate_domain::events::is_storable_text(comment) {
        return Err(DecideFailure::Comment(format!(
            "the comment cannot hold a NUL character (U+0000), which the store cannot keep: \
             {:?}",
            flowgate_domain::text::shorten(comment, 80)
        )));
    }
    Ok(comment.to_owned())
}

/// The change `id`, when it is pending.
async fn pending(
    store: &dyn ControlStore,
    id: ChangeId,
    verb: &'static str,
) -> Result<ChangeRecord, DecideFailure> {
    match store.change(id).await? {
        None => Err(DecideFailure::NotFound(id)),
        Some(found) if found.state != ChangeState::Pending => Err(DecideFailure::NotPending {
            id,
            state: found.state.as_str(),
            verb,
        }),
        Some(found) => Ok(found),
    }
}

fn decision(
    state: ChangeState,
    actor: &str,
    note: Option<String>,
    now: OffsetDateTime,
) -> ChangeDecision {
    ChangeDecision {
        state,
        by: actor.to_owned(),
        at: now,
        applied_revision: None,
        note,
    }
}

fn entry(
    actor: &str,
    action: AuditAction,
    id: ChangeId,
    comment: Option<String>,
    detail: Value,
    now: OffsetDateTime,
) -> NewAuditEntry {
    NewAuditEntry {
        at: now,
        actor: actor.to_owned(),
        action,
        target: Some(id.to_string()),
        comment,
        revision_before: None,
        revision_after: None,
        detail,
    }
}

/// Writes `decision` while change `id` is still pending, then `entry` (its failure logged:
/// the decision stands); the change after.
async fn decide(
    store: &dyn ControlStore,
    id: ChangeId,
    decision: ChangeDecision,
    entry: NewAuditEntry,
    verb: &'static str,
) -> Result<ChangeRecord, DecideFailure> {
    if !store.decide_change(id, decision).await? {
        // Decided meanwhile: say what it is now.
        return Err(pending(store, id, verb)
            .await
            .err()
            .unwrap_or(DecideFailure::NotPending {
                id,
                state: "decided",
                verb,
            }));
    }
    if let Err(e) = store.append_audit(entry).await {
        tracing::error!(error = %e, change = %id, "the decision's audit entry could not be written");
    }
    store.change(id).await?.ok_or(DecideFailure::NotFound(id))
}
