//! Changes proposed for review (D35) from the command line: who may propose, and the pending
//! change with its audit entry. The console proposes its own (`flowgate_http::console`); a
//! proposal is applied when another editor or admin approves it there, or closed unapplied
//! (`decide`: rejected, withdrawn).

pub mod decide;
pub mod import;
pub mod rollout;

use crate::ControlStore;
use flowgate_domain::catalog::CatalogChange;
use flowgate_domain::ids::ChangeId;
use flowgate_domain::people::{AuditAction, ChangeRecord, ChangeState, NewAuditEntry, Role};
use flowgate_domain::ports::StoreError;
use serde_json::json;
use time::OffsetDateTime;

/// The email of the person `--author` names when they may propose changes (an editor or
/// admin who is not disabled); `None` otherwise.
pub async fn author(store: &dyn ControlStore, email: &str) -> Result<Option<String>, StoreError> {
    let person = store.person_by_email(email).await?;
    Ok(person
        .filter(|p| !p.disabled && p.role.allows(Role::Editor))
        .map(|p| p.email))
}

/// A proposal of `change` on revision `base` by `author`, described as `summary`, with
/// `comment`: stored pending and audited `change.propose`.
pub struct Proposal<'a> {
    /// The change.
    pub change: &'a CatalogChange,
    /// The catalog revision it was made on.
    pub base: u64,
    /// What it does, in words.
    pub summary: String,
    /// Its author's email.
    pub author: &'a str,
    /// Why, in the author's words.
    pub comment: &'a str,
}

/// Stores `proposal` as a pending change and audits it; the record.
pub async fn record(
    store: &dyn ControlStore,
    proposal: Proposal<'_>,
    now: OffsetDateTime,
) -> Result<ChangeRecord, StoreError> {
    let record = ChangeRecord {
        id: ChangeId::new_v7(now),
        author: proposal.author.to_owned(),
        created_at: now,
        base_revision: proposal.base,
        change: proposal.change.to_json(),
        summary: proposal.summary.clone(),
        comment: proposal.comment.to_owned(),
        state: ChangeState::Pending,
        decided_by: None,
        decided_at: None,
        applied_revision: None,
        note: None,
        apply_at: None,
    };
    store.insert_change(record.clone()).await?;
    let entry = NewAuditEntry {
        at: now,
        actor: proposal.author.to_owned(),
        action: AuditAction::ChangePropose,
        target: Some(record.id.to_string()),
        comment: Some(proposal.comment.to_owned()).filter(|c| !c.is_empty()),
        revision_before: None,
        revision_after: None,
        // An imported file is the change's whole catalog: the entry names it, not repeats it.
        detail: match proposal.change {
            CatalogChange::ImportFile { name, sha256, .. } => json!({
                "description": proposal.summary, "kind": "import_file", "file": name,
                "sha256": sha256,
            }),
            _ => json!({"description": proposal.summary, "change": record.change}),
        },
    };
    if let Err(e) = store.append_audit(entry).await {
        tracing::error!(error = %e, change = %record.id, "the proposal's audit entry could not be written");
    }
    Ok(record)
}
