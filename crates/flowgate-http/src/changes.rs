//! Reviewed catalog changes (D28, D35) as the admin API and `--json` show them.

use flowgate_domain::people::ChangeRecord;
use flowgate_domain::text::rfc3339;
use serde_json::{json, Value};

/// A change as JSON: who proposed it and why, its state and who decided it, the note (a
/// rejection's why), and the change itself as stored.
pub fn change_json(c: &ChangeRecord) -> Value {
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
