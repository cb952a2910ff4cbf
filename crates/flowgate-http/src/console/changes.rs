//! Catalog changes from the console (D28): start, pause and stop an experiment, change its
//! weights and coverage, ship a variant, publish or return to a flow version, turn a rule on
//! or off.
//!
//! Every change goes the same way. Its form (on the experiment's page, or the catalog's)
//! leads to `GET /console/changes/new?...`, which shows the D19 dry run (users moved per
//! experiment) on the current catalog and asks for a comment. `POST /console/changes` then
//! applies it through the catalog's one write path ([`Console::apply_change`]) made on
//! the revision the dry run was shown on: if the catalog changed since, nothing is written
//! and the page says so. With `catalog.require_review`, the post records a pending change
//! instead; another editor or admin approves it (`/console/changes/{id}`), seeing the dry run
//! recomputed on the catalog of that moment, or its author withdraws it. Nobody approves
//! their own. Each step is in the audit log.
//!
//! D29: without review, the form may name a time to apply it at (UTC). The post then stores
//! it pending with that time, and the scheduler of `flowgate serve` applies it then, as
//! `scheduler`, as it does the changes of `flowgate changes schedule`; its author may withdraw
//! it before. With review, the console does not schedule: an approval applies a change, and a
//! schedule would skip it.
//!
//! [`Console::apply_change`]: flowgate_control::console::Console::apply_change

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use flowgate_domain::catalog::{
    CatalogChange, CatalogData, ExperimentData, ExperimentStatus, VariantData,
};
use flowgate_domain::ids::{AppId, ChangeId, ExperimentId, FlowId, VariantId};
use flowgate_domain::people::{AuditAction, ChangeDecision, ChangeRecord, ChangeState, Role};
use flowgate_domain::results::Verdict;
use maud::{html, Markup};
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime};

use super::forms::{comment_text, MAX_COMMENT_CHARS};
use super::pages::{csrf, diff_tables, layout, when};
use super::session::Session;
use super::{
    audit_entry, error_page, html, posted, record, see_other, signed_in, store_failure,
    ChangeOutcome, ChangeRefusal, Console, Data, Fields, PostedForm,
};
use flowgate_control::review::decide::DecideFailure;

/// Changes the list shows.
const LISTED: usize = 50;
/// Why a console with review does not schedule.
const NO_SCHEDULE_WITH_REVIEW: &str = "with catalog.require_review, a change is applied after its approval; schedule it with flowgate changes schedule";

/// The change a form's fields describe: `kind` = `status` (`experiment`, `status`),
/// `allocation` (`experiment`, `weight.<variant id>`..., `coverage`), `ship` (`experiment`,
/// `variant`), `publish` (`flow`, `version`) or `rule` (`app`, `placement`, `rule`,
/// `enabled`).
fn change_of(fields: &Fields) -> Result<CatalogChange, String> {
    fn parsed<T: std::str::FromStr>(fields: &Fields, name: &str) -> Result<T, String> {
        let value = fields.get(name).unwrap_or_default();
        value
            .trim()
            .parse()
            .map_err(|_| format!("{name} is not valid: {value:?}"))
    }
    match fields.get("kind").unwrap_or_default() {
        "status" => {
            let status = match fields.get("status").unwrap_or_default() {
                "running" => ExperimentStatus::Running,
                "paused" => ExperimentStatus::Paused,
                "concluded" => ExperimentStatus::Concluded,
                other => {
                    return Err(format!(
                        "the status is running, paused or concluded, not {other:?}"
                    ))
                }
            };
            Ok(CatalogChange::SetExperimentStatus {
                experiment: parsed::<ExperimentId>(fields, "experiment")?,
                status,
            })
        }
        "allocation" => {
            let mut weights = Vec::new();
            for (name, value) in &fields.0 {
                if let Some(variant) = name.strip_prefix("weight.") {
                    let variant: VariantId = variant
                        .parse()
                        .map_err(|_| format!("not a variant id: {variant:?}"))?;
                    let weight: f64 = value
                        .trim()
                        .parse()
                        .map_err(|_| format!("a weight is a number, not {value:?}"))?;
                    weights.push((variant, weight));
                }
            }
            let coverage =
                match fields.get("coverage").map(str::trim) {
                    None | Some("") => None,
                    Some(text) => Some(text.parse::<f64>().map_err(|_| {
                        format!("the coverage is a number from 0 to 1, not {text:?}")
                    })?),
                };
            Ok(CatalogChange::SetAllocation {
                experiment: parsed::<ExperimentId>(fields, "experiment")?,
                weights,
                coverage,
            })
        }
        "ship" => Ok(CatalogChange::ShipVariant {
            experiment: parsed::<ExperimentId>(fields, "experiment")?,
            variant: parsed::<VariantId>(fields, "variant")?,
        }),
        "publish" => Ok(CatalogChange::PublishFlowVersion {
            flow: parsed::<FlowId>(fields, "flow")?,
            version: parsed::<u32>(fields, "version")?,
        }),
        "rule" => Ok(CatalogChange::SetRuleEnabled {
            app: parsed::<AppId>(fields, "app")?,
            placement: fields.get("placement").unwrap_or_default().to_owned(),
            rule: parsed::<usize>(fields, "rule")?,
            enabled: fields.get("enabled") == Some("true"),
        }),
        other => Err(format!(
            "the kind of change is status, allocation, ship, publish or rule, not {other:?}"
        )),
    }
}

/// A refused change as a page: 503 when the store failed, 409 for a stale base or a change
/// decided meanwhile, 400 otherwise.
fn refused(session: &Session, refusal: &ChangeRefusal) -> HttpResponse {
    let status = if refusal.unavailable {
        StatusCode::SERVICE_UNAVAILABLE
    } else if refusal.code == "stale_base" || refusal.code == "already_decided" {
        StatusCode::CONFLICT
    } else {
        StatusCode::BAD_REQUEST
    };
    html(
        status,
        layout(
            Some(session),
            "Change not made",
            "/console/changes",
            html! {
                p.error role="alert" data-code=(refusal.code) { (refusal.message) }
                p { a href="/console/changes" { "Back to the changes" } }
            },
        ),
    )
}

/// What a refused post had typed, shown again with why it was refused.
#[derive(Default)]
struct Typed<'a> {
    error: Option<String>,
    comment: &'a str,
    apply_at: &'a str,
    /// The verdict this change goes against, in words (D35), or empty.
    against: &'a str,
}

/// The field naming the verdict a change goes against, and the box that confirms it.
const AGAINST: &str = "against";
const CONFIRM_AGAINST: &str = "confirm_against";

/// A post that goes against the verdict (its form says which) must say so (D35): the box
/// ticked, or why not.
fn against_confirmed(fields: &Fields) -> Result<(), String> {
    let against = fields.get(AGAINST).unwrap_or_default();
    if against.is_empty() || fields.get(CONFIRM_AGAINST) == Some("yes") {
        Ok(())
    } else {
        Err(format!(
            "This change goes against the verdict ({against}): tick the box to confirm that you act against it."
        ))
    }
}

/// The dry run of a change and the form that applies (or proposes, or schedules) it with a
/// comment.
fn confirm_markup(
    session: &Session,
    change: &CatalogChange,
    preview: &ChangeOutcome,
    review: bool,
    typed: &Typed,
) -> Markup {
    let body = html! {
        @if let Some(error) = &typed.error {
            p.error role="alert" #change-error { (error) }
        }
        @if !typed.against.is_empty() {
            p.warning #against-verdict role="alert" {
                strong { "Against the verdict: " } "the results say " em { (typed.against) } "."
            }
        }
        p.description #change-description { (preview.description) }
        p.meta { "On catalog revision " (preview.revision) ". What it would change:" }
        (diff_tables(&preview.diff))
        form #apply-change method="post" action="/console/changes" {
            (csrf(session))
            input type="hidden" name="change" value=(change.to_json().to_string());
            input type="hidden" name="base" value=(preview.revision);
            label for="comment" { "Why (kept in the audit log)" }
            textarea #comment name="comment" rows="3" maxlength=(MAX_COMMENT_CHARS) required { (typed.comment) }
            @if !typed.against.is_empty() {
                input type="hidden" name=(AGAINST) value=(typed.against);
                label.confirm for="confirm-against" {
                    input #confirm-against type="checkbox" name=(CONFIRM_AGAINST) value="yes" required;
                    " I act against the verdict (" (typed.against) ")"
                }
            }
            @if review {
                p.hint { "Changes are reviewed here (catalog.require_review): another editor or admin applies it by approving." }
                button type="submit" { "Propose for review" }
            } @else {
                label for="apply_at" { "Apply at (optional)" }
                input #apply_at type="datetime-local" name="apply_at" value=(typed.apply_at);
                p.hint { "The time is UTC. Left empty, the change is applied now; given, the scheduler applies it then, and you may withdraw it before." }
                button type="submit" { "Apply" }
            }
        }
    };
    layout(
        Some(session),
        "Change the catalog",
        "/console/changes",
        body,
    )
}

/// `GET /console/changes/new?kind=...`: the dry run and the comment form (editor).
pub(super) async fn new_change(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Editor).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let fields = super::query_fields(&req);
    let change = match change_of(&fields) {
        Ok(change) => change,
        Err(message) => {
            return error_page(
                &session,
                StatusCode::BAD_REQUEST,
                "Invalid change",
                &message,
            )
        }
    };
    let typed = Typed {
        against: fields.get(AGAINST).unwrap_or_default(),
        ..Typed::default()
    };
    match console.backend.preview_change(change.clone()).await {
        Ok(preview) => html(
            StatusCode::OK,
            confirm_markup(&session, &change, &preview, console.require_review, &typed),
        ),
        Err(refusal) => refused(&session, &refusal),
    }
}

/// The comment of a post: trimmed, required, bounded.
fn comment_of(fields: &Fields) -> Result<String, String> {
    comment_text(fields.get("comment").unwrap_or_default())
}

/// A time to apply a change at: `YYYY-MM-DDTHH:MM` (seconds optional) in UTC, as a
/// `datetime-local` input sends it, or a full RFC 3339 time.
fn time_of(text: &str) -> Option<OffsetDateTime> {
    if let Ok(at) = OffsetDateTime::parse(text, &Rfc3339) {
        return Some(at);
    }
    let minutes = format_description!("[year]-[month]-[day]T[hour]:[minute]");
    let seconds = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");
    PrimitiveDateTime::parse(text, &minutes)
        .or_else(|_| PrimitiveDateTime::parse(text, &seconds))
        .ok()
        .map(PrimitiveDateTime::assume_utc)
}

/// The post's time to apply the change at, if any: a time to come.
fn apply_at_of(text: &str, now: OffsetDateTime) -> Result<Option<OffsetDateTime>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    let Some(at) = time_of(text) else {
        return Err(format!(
            "The time to apply it at is YYYY-MM-DDTHH:MM in UTC, or an RFC 3339 time, not {text:?}."
        ));
    };
    if at <= now {
        return Err(format!(
            "{text:?} is past: a change is scheduled for a time to come (UTC)."
        ));
    }
    Ok(Some(at))
}

/// Stores `change` pending (for review, or for the scheduler at `apply_at`), records
/// `change.propose`, and leads to its page.
async fn propose(
    console: &Console,
    session: &Session,
    change: CatalogChange,
    base: u64,
    comment: String,
    apply_at: Option<OffsetDateTime>,
) -> HttpResponse {
    let now = OffsetDateTime::now_utc();
    // The description on the catalog it was proposed on.
    let description = match console.backend.preview_change(change.clone()).await {
        Ok(preview) => preview.description,
        Err(refusal) => return refused(session, &refusal),
    };
    let record_ = ChangeRecord {
        id: ChangeId::new_v7(now),
        author: session.actor.clone(),
        created_at: now,
        base_revision: base,
        change: change.to_json(),
        summary: description.clone(),
        comment: comment.clone(),
        state: ChangeState::Pending,
        decided_by: None,
        decided_at: None,
        applied_revision: None,
        note: None,
        apply_at,
    };
    let failed = if apply_at.is_some() {
        "The change was not scheduled"
    } else {
        "The change was not proposed"
    };
    if let Err(e) = console.changes.insert_change(record_.clone()).await {
        return store_failure(session, failed, &e);
    }
    let mut entry = audit_entry(
        &session.actor,
        AuditAction::ChangePropose,
        Some(record_.id.to_string()),
    );
    entry.comment = Some(comment);
    entry.detail = serde_json::json!({"description": description, "change": record_.change});
    if let Some(at) = apply_at {
        entry.detail["apply_at"] = flowgate_domain::text::rfc3339(at).into();
    }
    record(console, entry).await;
    see_other(&format!("/console/changes/{}", record_.id))
}

/// `POST /console/changes`: applies the change (or, with review, proposes it; with a time,
/// schedules it).
pub(super) async fn post_change(req: HttpRequest, form: PostedForm, console: Data) -> HttpResponse {
    let (fields, session) = match posted(&console, &req, form, Role::Editor).await {
        Ok(posted) => posted,
        Err(answer) => return *answer,
    };
    let bad = |message: &str| {
        error_page(
            &session,
            StatusCode::BAD_REQUEST,
            "Change not made",
            message,
        )
    };
    let change = match serde_json::from_str(fields.get("change").unwrap_or_default())
        .map_err(|e| e.to_string())
        .and_then(|json| CatalogChange::from_json(&json).map_err(|e| e.to_string()))
    {
        Ok(change) => change,
        Err(message) => return bad(&message),
    };
    let Ok(base) = fields.get("base").unwrap_or_default().parse::<u64>() else {
        return bad("The form has no catalog revision; open the change again.");
    };
    let comment = match comment_of(&fields) {
        Ok(comment) => comment,
        Err(message) => return bad(&message),
    };
    if let Err(message) = against_confirmed(&fields) {
        return bad(&message);
    }
    let apply_at_text = fields.get("apply_at").unwrap_or_default().trim();
    if console.require_review {
        if !apply_at_text.is_empty() {
            return bad(NO_SCHEDULE_WITH_REVIEW);
        }
        return propose(&console, &session, change, base, comment, None).await;
    }
    match apply_at_of(apply_at_text, OffsetDateTime::now_utc()) {
        Ok(Some(at)) => return propose(&console, &session, change, base, comment, Some(at)).await,
        Ok(None) => {}
        Err(error) => {
            // The form again, on the dry run of now, keeping what was typed.
            return match console.backend.preview_change(change.clone()).await {
                Ok(preview) => html(
                    StatusCode::BAD_REQUEST,
                    confirm_markup(
                        &session,
                        &change,
                        &preview,
                        false,
                        &Typed {
                            error: Some(error),
                            comment: &comment,
                            apply_at: apply_at_text,
                            against: fields.get(AGAINST).unwrap_or_default(),
                        },
                    ),
                ),
                Err(refusal) => refused(&session, &refusal),
            };
        }
    }
    match console
        .backend
        .apply_change(change, base, session.actor.clone(), comment, None)
        .await
    {
        Ok(applied) => see_other(&format!("/console/changes?applied={}", applied.revision)),
        Err(refusal) => refused(&session, &refusal),
    }
}

/// `GET /console/changes`: pending changes, then the latest decided ones.
pub(super) async fn list(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let applied = super::query_fields(&req).get("applied").map(str::to_owned);
    let changes = match console.changes.list_changes(None, LISTED).await {
        Ok(changes) => changes,
        Err(e) => return store_failure(&session, "The changes could not be read", &e),
    };
    let body = html! {
        @if let Some(revision) = applied {
            p.ok role="status" #applied { "Applied: the catalog is at revision " (revision) ". Every replica serves it within seconds." }
        }
        p.hint { "Changes are made from an experiment's page or the catalog's, each with its dry run and a comment."
            @if console.require_review { " Here they are reviewed: another editor or admin approves each." } }
        @if changes.is_empty() {
            p { "No change was proposed here yet." }
        } @else {
            div.table {
                table #change-list {
                    thead { tr {
                        th scope="col" { "Proposed" } th scope="col" { "By" } th scope="col" { "Change" }
                        th scope="col" { "Comment" } th scope="col" { "State" } th scope="col" { "Decided by" }
                    } }
                    tbody {
                        @for c in &changes {
                            tr data-state=(c.state.as_str()) {
                                td { a href=(format!("/console/changes/{}", c.id)) { (when(c.created_at)) } }
                                td { (c.author) }
                                td { (c.summary) }
                                td { (c.comment) }
                                td.state {
                                    (c.state.as_str())
                                    @if let (ChangeState::Pending, Some(at)) = (&c.state, c.apply_at) {
                                        br; span.apply-at { "scheduled for " (when(at)) }
                                    }
                                }
                                td { (c.decided_by.as_deref().unwrap_or("")) }
                            }
                        }
                    }
                }
            }
        }
    };
    html(
        StatusCode::OK,
        layout(Some(&session), "Changes", "/console/changes", body),
    )
}

/// The change of a path, or the answer.
async fn change_at(
    console: &Console,
    session: &Session,
    id: &str,
) -> Result<(ChangeRecord, CatalogChange), Box<HttpResponse>> {
    let not_found = || {
        Box::new(error_page(
            session,
            StatusCode::NOT_FOUND,
            "Not found",
            &format!("There is no change {id:?}."),
        ))
    };
    let Ok(parsed) = id.parse::<ChangeId>() else {
        return Err(not_found());
    };
    let found = match console.changes.change(parsed).await {
        Ok(Some(found)) => found,
        Ok(None) => return Err(not_found()),
        Err(e) => {
            return Err(Box::new(store_failure(
                session,
                "The change could not be read",
                &e,
            )))
        }
    };
    match CatalogChange::from_json(&found.change) {
        Ok(change) => Ok((found, change)),
        Err(e) => Err(Box::new(error_page(
            session,
            StatusCode::UNPROCESSABLE_ENTITY,
            "Unreadable change",
            &e.to_string(),
        ))),
    }
}

/// `GET /console/changes/{id}`: the change, its dry run recomputed now, and (pending) the
/// approval or withdrawal.
pub(super) async fn show(req: HttpRequest, path: web::Path<String>, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let (found, change) = match change_at(&console, &session, &path).await {
        Ok(found) => found,
        Err(answer) => return *answer,
    };
    let preview = if found.state == ChangeState::Pending {
        Some(console.backend.preview_change(change).await)
    } else {
        None
    };
    let own = found.author == session.actor;
    // A scheduled change is applied by the scheduler at its time, not by an approval.
    let scheduled = found.state == ChangeState::Pending && found.apply_at.is_some();
    let may_approve = session.role.allows(Role::Editor) && !own && !scheduled;
    let body = html! {
        p.description #change-description { (found.summary) }
        dl.meta {
            dt { "Proposed by" } dd #author { (found.author) ", " (when(found.created_at)) " on revision " (found.base_revision) }
            dt { "Why" } dd.comment { (found.comment) }
            dt { "State" } dd #change-state { (found.state.as_str()) }
            @if let Some(at) = found.apply_at {
                dt { "When" }
                dd #apply-at {
                    @if scheduled { "scheduled for " } @else { "was scheduled for " }
                    (when(at))
                }
            }
            @if let Some(by) = &found.decided_by { dt { "Decided by" } dd { (by) @if let Some(at) = found.decided_at { ", " (when(at)) } } }
            @if let Some(revision) = found.applied_revision { dt { "Applied as revision" } dd { (revision) } }
            @if let Some(note) = &found.note { dt { "Note" } dd { (note) } }
        }
        @match &preview {
            Some(Ok(preview)) => {
                h2 { "What it would change now (revision " (preview.revision) ")" }
                (diff_tables(&preview.diff))
                @if may_approve {
                    form #approve method="post" action=(format!("/console/changes/{}/approve", found.id)) {
                        (csrf(&session))
                        input type="hidden" name="base" value=(preview.revision);
                        label for="comment" { "Approval comment" }
                        textarea #comment name="comment" rows="2" maxlength=(MAX_COMMENT_CHARS) required {}
                        button type="submit" { "Approve and apply" }
                    }
                } @else if scheduled {
                    p.hint #scheduled { "The scheduler applies it at its time" @if own { "; you may withdraw it before" } "." }
                } @else if own {
                    p.hint #own { "You proposed this change: another editor or admin approves it." }
                }
            }
            Some(Err(refusal)) => {
                p.error role="alert" data-code=(refusal.code) { "It cannot be applied to the catalog as it is now: " (refusal.message) }
            }
            None => {}
        }
        // D35: a reviewer may reject a pending change with why, whether or not it applies now.
        @if found.state == ChangeState::Pending && session.role.allows(Role::Editor) && !own {
            form #reject method="post" action=(format!("/console/changes/{}/reject", found.id)) {
                (csrf(&session))
                label for="reject-comment" { "Why it is rejected (its author reads this)" }
                textarea #reject-comment name="comment" rows="2" maxlength=(MAX_COMMENT_CHARS) required {}
                button.danger type="submit" { "Reject" }
            }
        }
        @if found.state == ChangeState::Pending && own {
            form #withdraw method="post" action=(format!("/console/changes/{}/withdraw", found.id)) {
                (csrf(&session))
                button type="submit" { "Withdraw" }
            }
        }
    };
    html(
        StatusCode::OK,
        layout(Some(&session), "Change", "/console/changes", body),
    )
}

/// `POST /console/changes/{id}/approve`: another editor or admin applies a pending change on
/// the revision its recomputed dry run was shown on.
pub(super) async fn approve(
    req: HttpRequest,
    path: web::Path<String>,
    form: PostedForm,
    console: Data,
) -> HttpResponse {
    let (fields, session) = match posted(&console, &req, form, Role::Editor).await {
        Ok(posted) => posted,
        Err(answer) => return *answer,
    };
    let (found, change) = match change_at(&console, &session, &path).await {
        Ok(found) => found,
        Err(answer) => return *answer,
    };
    if found.author == session.actor {
        return error_page(
            &session,
            StatusCode::FORBIDDEN,
            "Not allowed",
            "Nobody approves their own change: another editor or admin does.",
        );
    }
    if found.state != ChangeState::Pending {
        return error_page(
            &session,
            StatusCode::CONFLICT,
            "Already decided",
            &format!("This change is {} already.", found.state.as_str()),
        );
    }
    if found.apply_at.is_some() {
        return error_page(
            &session,
            StatusCode::CONFLICT,
            "Scheduled",
            "This change is scheduled: the scheduler applies it at its time, or its author withdraws it.",
        );
    }
    let Ok(base) = fields.get("base").unwrap_or_default().parse::<u64>() else {
        return error_page(
            &session,
            StatusCode::BAD_REQUEST,
            "Not approved",
            "The form has no catalog revision; open the change again.",
        );
    };
    let comment = match comment_of(&fields) {
        Ok(comment) => comment,
        Err(message) => {
            return error_page(&session, StatusCode::BAD_REQUEST, "Not approved", &message)
        }
    };
    let now = OffsetDateTime::now_utc();
    let decision = ChangeDecision {
        state: ChangeState::Applied,
        by: session.actor.clone(),
        at: now,
        applied_revision: None,
        note: None,
    };
    let mut entry = audit_entry(
        &session.actor,
        AuditAction::ChangeApprove,
        Some(found.id.to_string()),
    );
    entry.comment = Some(comment.clone());
    entry.detail = serde_json::json!({"author": found.author, "description": found.summary});
    let comment = format!(
        "{} (proposed by {}: {}; approved: {comment})",
        found.summary, found.author, found.comment
    );
    match console
        .backend
        .apply_change(
            change,
            base,
            session.actor.clone(),
            comment,
            Some((found.id, decision)),
        )
        .await
    {
        Ok(applied) => {
            record(&console, entry).await;
            see_other(&format!(
                "/console/changes/{}?applied={}",
                found.id, applied.revision
            ))
        }
        Err(refusal) => refused(&session, &refusal),
    }
}

/// `POST /console/changes/{id}/reject`: another editor or admin rejects a pending change with
/// why (D35): `rejected`, the comment in its note (its author reads it on the change's page),
/// audited `change.reject`; nothing is written to the catalog.
pub(super) async fn reject(
    req: HttpRequest,
    path: web::Path<String>,
    form: PostedForm,
    console: Data,
) -> HttpResponse {
    let (fields, session) = match posted(&console, &req, form, Role::Editor).await {
        Ok(posted) => posted,
        Err(answer) => return *answer,
    };
    let (found, _) = match change_at(&console, &session, &path).await {
        Ok(found) => found,
        Err(answer) => return *answer,
    };
    let comment = match comment_of(&fields) {
        Ok(comment) => comment,
        Err(message) => {
            return error_page(&session, StatusCode::BAD_REQUEST, "Not rejected", &message)
        }
    };
    let rejected = console
        .backend
        .reject_change(found.id, &session.actor, &comment)
        .await;
    decided(&session, found.id, rejected, "rejected")
}

/// The change's page once `outcome` decided it, or why not: 403 (not this person's to
/// decide), 409 (decided meanwhile), 400 (the comment), 503 (the store).
fn decided(
    session: &Session,
    id: ChangeId,
    outcome: Result<ChangeRecord, DecideFailure>,
    what: &str,
) -> HttpResponse {
    let failure = match outcome {
        Ok(_) => return see_other(&format!("/console/changes/{id}")),
        Err(failure) => failure,
    };
    let (status, title, message) = match &failure {
        DecideFailure::OwnChange => (
            StatusCode::FORBIDDEN,
            "Not allowed",
            "Nobody rejects their own change: withdraw it instead.".to_owned(),
        ),
        DecideFailure::NotAuthor => (
            StatusCode::FORBIDDEN,
            "Not allowed",
            "Only its author withdraws a change.".to_owned(),
        ),
        DecideFailure::NotPending { .. } => (
            StatusCode::CONFLICT,
            "Already decided",
            "This change was decided meanwhile.".to_owned(),
        ),
        DecideFailure::NotFound(_) => (StatusCode::NOT_FOUND, "Not found", failure.to_string()),
        DecideFailure::Comment(message) => {
            (StatusCode::BAD_REQUEST, "Not rejected", message.clone())
        }
        DecideFailure::Store(e) => {
            return store_failure(session, &format!("The change was not {what}"), e)
        }
    };
    error_page(session, status, title, &message)
}

/// `POST /console/changes/{id}/withdraw`: the author withdraws a pending change.
pub(super) async fn withdraw(
    req: HttpRequest,
    path: web::Path<String>,
    form: PostedForm,
    console: Data,
) -> HttpResponse {
    let (_, session) = match posted(&console, &req, form, Role::Editor).await {
        Ok(posted) => posted,
        Err(answer) => return *answer,
    };
    let (found, _) = match change_at(&console, &session, &path).await {
        Ok(found) => found,
        Err(answer) => return *answer,
    };
    let withdrawn = console
        .backend
        .withdraw_change(found.id, &session.actor)
        .await;
    decided(&session, found.id, withdrawn, "withdrawn")
}

/// What the verdict (D27) asks of an experiment's change forms (D35).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct VerdictAction {
    /// The verdict in words ("Ship trial", "Roll back to control", "Keep running").
    pub words: String,
    /// The action it recommends, offered first.
    pub recommended: Recommended,
}

/// The action a verdict recommends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Recommended {
    /// Ship this variant (the verdict's, or the control to roll back to).
    Ship(VariantId),
    /// Stop the experiment: a roll-back to a control that shows no flow.
    Stop,
    /// Nothing yet (keep running): every ship goes against it.
    Wait,
}

impl VerdictAction {
    /// The action of `verdict` (with its variant) for experiment `e`; `None` when the results
    /// cannot decide (no decision): then no action is for or against them.
    pub(super) fn of(
        verdict: Verdict,
        variant: Option<VariantId>,
        words: String,
        e: &ExperimentData,
    ) -> Option<Self> {
        let recommended = match verdict {
            Verdict::Ship => Recommended::Ship(variant?),
            Verdict::RollBack => match e.variants.first() {
                Some(control) if control.flow_id.is_some() => Recommended::Ship(control.id),
                _ => Recommended::Stop,
            },
            Verdict::KeepRunning => Recommended::Wait,
            _ => return None,
        };
        Some(Self { words, recommended })
    }

    /// The verdict's words when shipping `variant` goes against it.
    fn against_ship(&self, variant: VariantId) -> Option<&str> {
        (self.recommended != Recommended::Ship(variant)).then_some(self.words.as_str())
    }
}

/// The change forms of an experiment's page (editor): the verdict's action first (D35), then
/// start, pause or stop, ship a variant (a ship against the verdict asks for a confirmation),
/// new weights and coverage. Each leads to the dry run ([`new_change`]).
pub(super) fn experiment_forms(
    session: &Session,
    data: &CatalogData,
    experiment: ExperimentId,
    verdict: Option<&VerdictAction>,
) -> (Markup, Markup) {
    let found = data.experiments().find(|e| e.id == experiment);
    let Some(e) = found.filter(|_| session.role.allows(Role::Editor)) else {
        return (html! {}, html! {});
    };
    let status_form = |status: &str, label: &str| {
        html! {
            form.inline method="get" action="/console/changes/new" {
                input type="hidden" name="kind" value="status";
                input type="hidden" name="experiment" value=(e.id);
                input type="hidden" name="status" value=(status);
                button type="submit" { (label) }
            }
        }
    };
    let ship_form = |v: &VariantData, label: &str, against: Option<&str>| {
        html! {
            form.inline.ship method="get" action="/console/changes/new" {
                input type="hidden" name="kind" value="ship";
                input type="hidden" name="experiment" value=(e.id);
                input type="hidden" name="variant" value=(v.id);
                @if let Some(against) = against {
                    input type="hidden" name=(AGAINST) value=(against);
                }
                button type="submit" data-variant=(v.name) data-against=[against.map(|_| "true")] { (label) }
            }
        }
    };
    let recommended = verdict.map(|v| v.recommended);
    let open = matches!(
        e.status,
        ExperimentStatus::Running | ExperimentStatus::Paused
    );
    let action = html! {
        @if let (Some(verdict), true) = (verdict, open) {
            @match recommended {
                Some(Recommended::Ship(id)) => {
                    @if let Some(v) = e.variants.iter().find(|v| v.id == id) {
                        div #verdict-action { p { "What the verdict says:" } (ship_form(v, &verdict.words, None)) }
                    }
                }
                Some(Recommended::Stop) => {
                    div #verdict-action { p { "What the verdict says (" (verdict.words) "): the control shows no flow, so stop the experiment." } (status_form("concluded", "Stop: roll back")) }
                }
                _ => { p #verdict-action .hint { "The verdict: " (verdict.words) ". Shipping now goes against it." } }
            }
        }
    };
    let rest = html! {
        section #change-experiment {
            h2 { "Change this experiment" }
            p.hint { "Each change shows what it would do first, and asks why." }
            div.actions {
                @match e.status {
                    ExperimentStatus::Running => { (status_form("paused", "Pause")) (status_form("concluded", "Stop")) }
                    ExperimentStatus::Paused => { (status_form("running", "Resume")) (status_form("concluded", "Stop")) }
                    ExperimentStatus::Draft => { (status_form("running", "Start")) }
                    ExperimentStatus::Concluded => { (status_form("running", "Start again")) }
                }
                @for v in e.variants.iter().filter(|v| v.flow_id.is_some()) {
                    @let against = verdict.and_then(|verdict| verdict.against_ship(v.id));
                    @if against.is_some() || recommended.is_none() || !open {
                        (ship_form(v, &format!("Ship {}", v.name), against))
                    }
                }
            }
            form #allocation method="get" action="/console/changes/new" {
                input type="hidden" name="kind" value="allocation";
                input type="hidden" name="experiment" value=(e.id);
                @for v in &e.variants {
                    label for=(format!("weight-{}", v.id)) { "Weight of " (v.name) }
                    input id=(format!("weight-{}", v.id)) type="number" min="0" step="any" name=(format!("weight.{}", v.id)) value=(v.weight);
                }
                label for="coverage" { "Coverage (0 to 1)" }
                input #coverage type="number" min="0" max="1" step="any" name="coverage" value=(e.coverage.unwrap_or(1.0));
                button type="submit" { "Preview new weights" }
            }
        }
    };
    (action, rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CONTROL: &str = "60000000-0000-4000-8000-000000000001";
    const TRIAL: &str = "60000000-0000-4000-8000-000000000002";

    fn experiment(control_flow: bool) -> ExperimentData {
        let flow = control_flow.then_some("30000000-0000-4000-8000-000000000001");
        serde_json::from_value(json!({
            "id": "50000000-0000-4000-8000-000000000001", "name": "paywall-test",
            "status": "running",
            "variants": [
                {"id": CONTROL, "name": "control", "weight": 1, "flow_id": flow},
                {"id": TRIAL, "name": "trial", "weight": 1,
                 "flow_id": "30000000-0000-4000-8000-000000000003"},
            ],
        }))
        .unwrap()
    }

    fn id(text: &str) -> VariantId {
        text.parse().unwrap()
    }

    /// D35: the verdict's action is offered first; shipping anything else goes against it.
    #[test]
    fn the_verdict_recommends_one_action_and_the_others_go_against_it() {
        let e = experiment(true);
        let words = |w: &str| w.to_owned();
        let ship =
            VerdictAction::of(Verdict::Ship, Some(id(TRIAL)), words("Ship trial"), &e).unwrap();
        assert_eq!(ship.recommended, Recommended::Ship(id(TRIAL)));
        assert_eq!(ship.against_ship(id(TRIAL)), None);
        assert_eq!(ship.against_ship(id(CONTROL)), Some("Ship trial"));
        // Rolling back ships the control when it shows a flow, else stops the experiment.
        let back = |e: &ExperimentData| {
            VerdictAction::of(Verdict::RollBack, None, words("Roll back to control"), e).unwrap()
        };
        assert_eq!(back(&e).recommended, Recommended::Ship(id(CONTROL)));
        assert_eq!(
            back(&e).against_ship(id(TRIAL)),
            Some("Roll back to control")
        );
        assert_eq!(back(&experiment(false)).recommended, Recommended::Stop);
        let wait =
            VerdictAction::of(Verdict::KeepRunning, None, words("Keep running"), &e).unwrap();
        assert_eq!(wait.against_ship(id(CONTROL)), Some("Keep running"));
        assert_eq!(
            VerdictAction::of(Verdict::NoDecision, None, words("No decision"), &e),
            None
        );
        // A ship verdict without its variant recommends nothing.
        assert_eq!(
            VerdictAction::of(Verdict::Ship, None, words("Ship"), &e),
            None
        );
    }

    /// A post against the verdict needs its box ticked; any other post does not.
    #[test]
    fn acting_against_the_verdict_needs_a_confirmation() {
        let fields = |pairs: &[(&str, &str)]| {
            Fields(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            )
        };
        assert!(against_confirmed(&fields(&[("comment", "go")])).is_ok());
        let refused = against_confirmed(&fields(&[(AGAINST, "Roll back to control")]));
        assert!(
            refused
                .as_ref()
                .unwrap_err()
                .contains("Roll back to control"),
            "{refused:?}"
        );
        let confirmed = fields(&[(AGAINST, "Roll back to control"), (CONFIRM_AGAINST, "yes")]);
        assert!(against_confirmed(&confirmed).is_ok());
        let wrong = fields(&[(AGAINST, "Keep running"), (CONFIRM_AGAINST, "on")]);
        assert!(against_confirmed(&wrong).is_err());
    }
}
