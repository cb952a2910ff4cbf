//! The console's people, sessions and audit log (D28).
//!
//! - `GET|POST /console/set-password?token=`: the one-time link `flowgate users add` prints
//!   (valid 24 h): the person chooses a password (argon2id, at least 12 characters), the link
//!   is spent, and a session opens. The form, which has no session yet, carries the sign-in
//!   form's pre-session cookie and token (`session.rs`).
//! - `GET /console/people` and its posts (admin): add a person (the link is shown once), set a
//!   role, disable or enable, make a new link (a password reset). Disabling ends the person's
//!   sessions. Each is recorded in the audit log.
//! - `GET /console/sessions` and `POST /console/sessions/revoke`: one's own sessions (an admin
//!   sees and ends everyone's).
//! - `GET /console/audit`: the audit log, newest first, filtered by actor, action and time, a
//!   page of [`AUDIT_PAGE`] at a time.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use flowgate_domain::ids::PersonId;
use flowgate_domain::people::{
    sha256_hex, AuditAction, AuditEntry, AuditQuery, Person, PersonUpdate, Role, SessionRecord,
};
use flowgate_domain::ports::StoreError;
use maud::{html, Markup};
use time::OffsetDateTime;

use flowgate_control::people::{sign_in_link_path, Linked, PeopleFailure};

use super::pages::{csrf, layout, when};
use super::session::{self, Session, Who};
use super::{
    audit_entry, error_page, html, open_session, passwords, posted, record, see_other, signed_in,
    store_failure, Console, Data, Fields, PostedForm,
};

/// Audit entries a page shows.
pub const AUDIT_PAGE: usize = 100;

/// Whether `token` has the shape of a link's secret (64 hex digits).
fn well_formed(token: &str) -> bool {
    token.len() == 64 && token.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `GET /console/set-password?token=`: the form.
pub(super) async fn set_password_page(req: HttpRequest, console: Data) -> HttpResponse {
    let fields = super::query_fields(&req);
    let token = fields.get("token").unwrap_or_default().to_owned();
    set_password_form(&console, &req, &token, StatusCode::OK, None).await
}

async fn set_password_form(
    console: &Console,
    req: &HttpRequest,
    token: &str,
    status: StatusCode,
    message: Option<&str>,
) -> HttpResponse {
    if !well_formed(token) {
        return html(
            StatusCode::NOT_FOUND,
            layout(
                None,
                "Link not valid",
                "",
                html! { p { "This sign-in link is not valid. Ask an admin for a new one ("
                code { "flowgate users link EMAIL" } ")." } },
            ),
        );
    }
    let form = match console.sessions.sign_in_tokens().await {
        Ok(tokens) => match tokens.issue() {
            Ok(form) => form,
            Err(_) => return HttpResponse::ServiceUnavailable().body("no randomness"),
        },
        Err(e) => {
            tracing::error!(error = %e, "console: the sign-in key could not be read");
            return HttpResponse::ServiceUnavailable()
                .body("The console cannot be signed in to now; retry in a moment.");
        }
    };
    let body = html! {
        @if let Some(message) = message { p.error role="alert" { (message) } }
        form #set-password method="post" action="/console/set-password" {
            input type="hidden" name="csrf" value=(form.token);
            input type="hidden" name="token" value=(token);
            label for="password" { "New password (at least " (passwords::MIN_PASSWORD_CHARS) " characters)" }
            input #password type="password" name="password" autocomplete="new-password" required autofocus;
            label for="confirm" { "The same again" }
            input #confirm type="password" name="confirm" autocomplete="new-password" required;
            button type="submit" { "Set the password and sign in" }
        }
        p.hint { "The link works once, for 24 hours after it was made." }
    };
    let mut response = html(status, layout(None, "Choose a password", "", body));
    let _ = response.add_cookie(&session::sign_in_cookie(req, form.cookie));
    response
}

/// `POST /console/set-password`: sets the password, spends the link, opens a session. The link
/// is checked before anything else is done (issue 65): an unknown, spent or expired link is
/// refused without hashing anything, and a disabled person's link writes nothing (the refusal
/// is audited). A post that would hash counts in the address's budget of such posts (429 past
/// it, and while the address is blocked for wrong admin tokens) and waits for a turn of the
/// bounded password work (503 when there is none).
pub(super) async fn set_password(
    req: HttpRequest,
    form: PostedForm,
    console: Data,
) -> HttpResponse {
    let fields = match Fields::posted(form) {
        Ok(fields) => fields,
        Err(refused) => return *refused,
    };
    let token = fields.get("token").unwrap_or_default().to_owned();
    if super::sign_in_form_checked(&console, &req, fields.get("csrf"))
        .await
        .is_err()
    {
        let message = "The form expired or came from elsewhere; try again.";
        return set_password_form(&console, &req, &token, StatusCode::FORBIDDEN, Some(message))
            .await;
    }
    if !well_formed(&token) {
        return set_password_form(&console, &req, &token, StatusCode::NOT_FOUND, None).await;
    }
    let unavailable = |e: StoreError| {
        tracing::error!(error = %e, "console: a password could not be set");
        HttpResponse::ServiceUnavailable().body("The password could not be set now; retry.")
    };
    let token_hash = sha256_hex(token.as_bytes());
    let person = match linked_person(&console, &token_hash).await {
        Ok(Some(person)) if person.disabled => {
            return refuse_disabled(&console, &req, &person).await
        }
        Ok(Some(person)) => person,
        Ok(None) => return link_gone(),
        Err(e) => return unavailable(e),
    };
    let password = fields.get("password").unwrap_or_default();
    let refused = if password != fields.get("confirm").unwrap_or_default() {
        Some("The two passwords differ.".to_owned())
    } else {
        passwords::check_new(password).err()
    };
    if let Some(message) = refused {
        return set_password_form(
            &console,
            &req,
            &token,
            StatusCode::BAD_REQUEST,
            Some(&message),
        )
        .await;
    }
    let client = crate::token_guard::client_of(&req);
    if let Some(wait) = super::password_post_refusal(&console, client) {
        super::refused_entry(&console, client, Some(person.email.clone()), "address").await;
        return too_many_for_link(&console, &req, &token, wait).await;
    }
    let hashed = {
        let password = password.to_owned();
        console.work.run(move || passwords::hash(&password)).await
    };
    let hashed = match hashed {
        Ok(Ok(hashed)) => hashed,
        Err(super::hashing::WorkRefused::Busy) => return super::hashing::busy(&req),
        _ => return HttpResponse::ServiceUnavailable().body("The password could not be hashed."),
    };
    // Spent only now that the password is acceptable: a refused one leaves the link working.
    let now = OffsetDateTime::now_utc();
    match console.people.take_sign_in_link(&token_hash, now).await {
        Ok(Some(id)) if id == person.id => {}
        Ok(_) => return link_gone(),
        Err(e) => return unavailable(e),
    }
    // Read again just before the write: one disabled while the password was hashed writes
    // nothing either.
    match console.people.person(person.id).await {
        Ok(Some(now)) if now.disabled => return refuse_disabled(&console, &req, &now).await,
        Ok(Some(_)) => {}
        Ok(None) => return link_gone(),
        Err(e) => return unavailable(e),
    }
    let update = PersonUpdate {
        password_hash: Some(hashed),
        ..PersonUpdate::default()
    };
    let person = match console.people.update_person(person.id, update, now).await {
        Ok(Some(person)) => person,
        Ok(None) => return link_gone(),
        Err(e) => return unavailable(e),
    };
    record(
        &console,
        audit_entry(
            &person.email,
            AuditAction::PersonPassword,
            Some(person.email.clone()),
        ),
    )
    .await;
    let who = Who {
        person_id: Some(person.id),
        actor: person.email,
        role: person.role,
    };
    open_session(&console, &req, who, Some(client.to_string())).await
}

/// The password form of link `token` answering 429 with `Retry-After` (`wait` seconds).
async fn too_many_for_link(
    console: &Console,
    req: &HttpRequest,
    token: &str,
    wait: u32,
) -> HttpResponse {
    let message = format!("Too many attempts from this address; try again in {wait} s.");
    let status = StatusCode::TOO_MANY_REQUESTS;
    let mut response = set_password_form(console, req, token, status, Some(&message)).await;
    response.headers_mut().insert(
        actix_web::http::header::RETRY_AFTER,
        actix_web::http::header::HeaderValue::from(wait),
    );
    response
}

/// The person of a link (its secret's SHA-256), when it is valid now and the person exists.
async fn linked_person(console: &Console, token_hash: &str) -> Result<Option<Person>, StoreError> {
    let now = OffsetDateTime::now_utc();
    match console.people.sign_in_link(token_hash, now).await? {
        Some(id) => console.people.person(id).await,
        None => Ok(None),
    }
}

/// The page of a link used already, expired or unknown (410).
fn link_gone() -> HttpResponse {
    html(
        StatusCode::GONE,
        layout(
            None,
            "Link not valid",
            "",
            html! { p { "This sign-in link was used already or has expired. Ask an \
            admin for a new one (" code { "flowgate users link EMAIL" } ")." } },
        ),
    )
}

/// A disabled person's link: nothing is written, the link is left as it is, and the refusal
/// is recorded (`sign_in.refused`, reason `disabled`).
async fn refuse_disabled(console: &Console, req: &HttpRequest, person: &Person) -> HttpResponse {
    let mut entry = audit_entry(
        &person.email,
        AuditAction::SignInRefused,
        Some(person.email.clone()),
    );
    entry.detail = serde_json::json!({
        "address": crate::token_guard::client_of(req).to_string(),
        "reason": "disabled", "via": "set_password",
    });
    record(console, entry).await;
    html(
        StatusCode::FORBIDDEN,
        layout(
            None,
            "Not allowed",
            "",
            html! { p { "This account is disabled: no password was set." } },
        ),
    )
}

/// `GET /console/people` (admin).
pub(super) async fn people(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Admin).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    people_page(&console, &session, StatusCode::OK, None, None).await
}

/// A link just made, shown once on the page that made it.
struct ShownLink {
    email: String,
    path: String,
}

async fn people_page(
    console: &Console,
    session: &Session,
    status: StatusCode,
    message: Option<&str>,
    link: Option<ShownLink>,
) -> HttpResponse {
    let listed = match console.people.list_people().await {
        Ok(listed) => listed,
        Err(e) => return store_failure(session, "The people could not be read", &e),
    };
    html(
        status,
        people_markup(session, &listed, message, link.as_ref()),
    )
}

fn people_markup(
    session: &Session,
    listed: &[Person],
    message: Option<&str>,
    link: Option<&ShownLink>,
) -> Markup {
    let body = html! {
        @if let Some(message) = message { p.error role="alert" { (message) } }
        @if let Some(link) = link {
            div.created #sign-in-link role="status" {
                p { "The sign-in link of " strong { (link.email) } ", shown this once (it works once, within 24 hours): give it to them." }
                p { code { (link.path) } }
                p.hint { "Put the console's address before it, e.g. https://flowgate-admin.example.com" (link.path) }
            }
        }
        h2 { "Add a person" }
        form #add-person method="post" action="/console/people" {
            (csrf(session))
            label for="email" { "Email" }
            input #email type="email" name="email" required;
            label for="role" { "Role" }
            select #role name="role" {
                option value="viewer" { "viewer: every page, explain, preview" }
                option value="editor" { "editor: also changes the catalog and keys" }
                option value="admin" { "admin: also manages people" }
            }
            button type="submit" { "Add and make a sign-in link" }
        }
        h2 { "People" }
        @if listed.is_empty() {
            p { "Nobody yet." }
        } @else {
            div.table {
                table #people {
                    thead { tr {
                        th scope="col" { "Email" } th scope="col" { "Role" } th scope="col" { "Status" }
                        th scope="col" { "Added" } th scope="col" { "Change" }
                    } }
                    tbody {
                        @for p in listed {
                            tr data-email=(p.email) {
                                td { (p.email) }
                                td { (p.role) }
                                td {
                                    @if p.disabled { "disabled" }
                                    @else if p.password_hash.is_none() { "no password yet" }
                                    @else { "active" }
                                }
                                td { (when(p.created_at)) }
                                td {
                                    form.inline method="post" action=(format!("/console/people/{}", p.id)) {
                                        (csrf(session))
                                        input type="hidden" name="action" value="role";
                                        label.visually-hidden for=(format!("role-{}", p.id)) { "Role of " (p.email) }
                                        select id=(format!("role-{}", p.id)) name="role" {
                                            @for role in [Role::Viewer, Role::Editor, Role::Admin] {
                                                option value=(role) selected[role == p.role] { (role) }
                                            }
                                        }
                                        button type="submit" { "Set role" }
                                    }
                                    form.inline method="post" action=(format!("/console/people/{}", p.id)) {
                                        (csrf(session))
                                        @if p.disabled {
                                            input type="hidden" name="action" value="enable";
                                            button type="submit" { "Enable" }
                                        } @else {
                                            input type="hidden" name="action" value="disable";
                                            button type="submit" { "Disable" }
                                        }
                                    }
                                    form.inline method="post" action=(format!("/console/people/{}", p.id)) {
                                        (csrf(session))
                                        input type="hidden" name="action" value="link";
                                        button type="submit" { "New sign-in link" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    layout(Some(session), "People", "/console/people", body)
}

/// `POST /console/people` (admin): adds a person and shows their sign-in link once.
pub(super) async fn add_person(req: HttpRequest, form: PostedForm, console: Data) -> HttpResponse {
    let (fields, session) = match posted(&console, &req, form, Role::Admin).await {
        Ok(posted) => posted,
        Err(answer) => return *answer,
    };
    let (console, session) = (&console, &session);
    let bad = |message: String| async move {
        people_page(
            console,
            session,
            StatusCode::BAD_REQUEST,
            Some(&message),
            None,
        )
        .await
    };
    let role: Role = match fields.get("role").unwrap_or_default().parse() {
        Ok(role) => role,
        Err(e) => return bad(format!("{e}")).await,
    };
    match console
        .backend
        .add_person(
            fields.get("email").unwrap_or_default(),
            role,
            &session.actor,
        )
        .await
    {
        Ok(linked) => shown_link(console, session, linked).await,
        Err(failure) => people_failure(console, session, failure, "The person was not added").await,
    }
}

/// The people page with the new link of `linked` shown once.
async fn shown_link(console: &Console, session: &Session, linked: Linked) -> HttpResponse {
    if let Some(e) = linked.audit {
        tracing::error!(error = %e, actor = %session.actor,
            "console: the audit entry could not be written");
    }
    let shown = ShownLink {
        email: linked.person.email.clone(),
        path: sign_in_link_path(&linked.secret),
    };
    people_page(console, session, StatusCode::OK, None, Some(shown)).await
}

/// A person not added, linked or changed, as the people page says it (the caller's mistakes,
/// 400), or as a failure of the store (`what`).
async fn people_failure(
    console: &Console,
    session: &Session,
    failure: PeopleFailure,
    what: &str,
) -> HttpResponse {
    let message = match failure {
        PeopleFailure::Invalid(message) => message,
        PeopleFailure::Exists(email) => format!("{email} is already a person here."),
        PeopleFailure::NotFound(email) | PeopleFailure::Removed(email) => {
            return error_page(
                session,
                StatusCode::NOT_FOUND,
                "Not found",
                &format!("There is no person {email:?}."),
            )
        }
        PeopleFailure::NoRandomness(why) => {
            tracing::error!(%why, "console: no randomness for a sign-in link");
            return HttpResponse::ServiceUnavailable().body("no randomness for a link");
        }
        PeopleFailure::Store(e) => return store_failure(session, what, &e),
    };
    people_page(
        console,
        session,
        StatusCode::BAD_REQUEST,
        Some(&message),
        None,
    )
    .await
}

/// `POST /console/people/{id}` (admin): `action` = `role` (with `role`), `disable`, `enable`
/// or `link`.
pub(super) async fn change_person(
    req: HttpRequest,
    path: web::Path<String>,
    form: PostedForm,
    console: Data,
) -> HttpResponse {
    let (fields, session) = match posted(&console, &req, form, Role::Admin).await {
        Ok(posted) => posted,
        Err(answer) => return *answer,
    };
    let person = match path.parse::<PersonId>() {
        Ok(id) => console.people.person(id).await,
        Err(_) => Ok(None),
    };
    let person = match person {
        Ok(Some(person)) => person,
        Ok(None) => {
            return error_page(
                &session,
                StatusCode::NOT_FOUND,
                "Not found",
                &format!("There is no person {:?}.", path.as_str()),
            )
        }
        Err(e) => return store_failure(&session, "The person could not be read", &e),
    };
    let update = match fields.get("action") {
        Some("role") => match fields.get("role").unwrap_or_default().parse::<Role>() {
            Ok(role) => PersonUpdate {
                role: Some(role),
                ..PersonUpdate::default()
            },
            Err(e) => {
                let message = e.to_string();
                return people_page(
                    &console,
                    &session,
                    StatusCode::BAD_REQUEST,
                    Some(&message),
                    None,
                )
                .await;
            }
        },
        Some(action @ ("disable" | "enable")) => PersonUpdate {
            disabled: Some(action == "disable"),
            ..PersonUpdate::default()
        },
        Some("link") => {
            return match console
                .backend
                .person_link(&person.email, &session.actor)
                .await
            {
                Ok(linked) => shown_link(&console, &session, linked).await,
                Err(failure) => {
                    people_failure(&console, &session, failure, "The sign-in link was not made")
                        .await
                }
            };
        }
        other => {
            let message = format!(
                "The action is role, disable, enable or link, not {:?}.",
                other.unwrap_or_default()
            );
            return people_page(
                &console,
                &session,
                StatusCode::BAD_REQUEST,
                Some(&message),
                None,
            )
            .await;
        }
    };
    if session.person_id == Some(person.id) && update.disabled == Some(true) {
        let message = "You cannot disable yourself; ask another admin.";
        return people_page(
            &console,
            &session,
            StatusCode::BAD_REQUEST,
            Some(message),
            None,
        )
        .await;
    }
    match console
        .backend
        .change_person(&person.email, update, &session.actor)
        .await
    {
        Ok((_, audit)) => {
            if let Some(e) = audit {
                tracing::error!(error = %e, actor = %session.actor,
                    "console: the audit entry could not be written");
            }
            see_other("/console/people")
        }
        Err(failure) => {
            people_failure(&console, &session, failure, "The person was not changed").await
        }
    }
}

/// `GET /console/sessions`: the session's person's sessions; an admin's page lists everyone's.
pub(super) async fn sessions(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let now = OffsetDateTime::now_utc();
    let listed = if session.role == Role::Admin {
        console.people.all_sessions(now).await
    } else if let Some(person) = session.person_id {
        console.people.sessions_of(person, now).await
    } else {
        Ok(Vec::new())
    };
    match listed {
        Ok(listed) => html(StatusCode::OK, sessions_markup(&session, &listed)),
        Err(e) => store_failure(&session, "The sessions could not be read", &e),
    }
}

fn sessions_markup(session: &Session, listed: &[SessionRecord]) -> Markup {
    let body = html! {
        @if listed.is_empty() {
            p { "No session to list." }
        } @else {
            div.table {
                table #sessions {
                    thead { tr {
                        th scope="col" { "Who" } th scope="col" { "Role" } th scope="col" { "Began" }
                        th scope="col" { "Ends" } th scope="col" { "From" } th scope="col" { "End it" }
                    } }
                    tbody {
                        @for s in listed {
                            tr {
                                td { (s.actor) @if s.id_hash == session.id_hash { " (this session)" } }
                                td { (s.role) }
                                td { (when(s.created_at)) }
                                td { (when(s.expires_at)) }
                                td { (s.address.as_deref().unwrap_or("")) }
                                td {
                                    form.inline method="post" action="/console/sessions/revoke" {
                                        (csrf(session))
                                        input type="hidden" name="session" value=(s.id_hash);
                                        button type="submit" { "End" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    layout(Some(session), "Sessions", "/console/sessions", body)
}

/// `POST /console/sessions/revoke`: ends a session of one's own (an admin: anyone's).
pub(super) async fn revoke_session(
    req: HttpRequest,
    form: PostedForm,
    console: Data,
) -> HttpResponse {
    let (fields, session) = match posted(&console, &req, form, Role::Viewer).await {
        Ok(posted) => posted,
        Err(answer) => return *answer,
    };
    let target = fields.get("session").unwrap_or_default().to_owned();
    let now = OffsetDateTime::now_utc();
    let theirs = match console.people.all_sessions(now).await {
        Ok(all) => all.into_iter().find(|s| s.id_hash == target),
        Err(e) => return store_failure(&session, "The sessions could not be read", &e),
    };
    let allowed = theirs.as_ref().is_some_and(|s| {
        session.role == Role::Admin
            || s.id_hash == session.id_hash
            || (s.person_id.is_some() && s.person_id == session.person_id)
    });
    let Some(theirs) = theirs.filter(|_| allowed) else {
        return error_page(
            &session,
            StatusCode::NOT_FOUND,
            "Not found",
            "There is no such session of yours.",
        );
    };
    if let Err(e) = console.people.delete_session(&theirs.id_hash).await {
        return store_failure(&session, "The session was not ended", &e);
    }
    let mut entry = audit_entry(
        &session.actor,
        AuditAction::SessionRevoke,
        Some(theirs.actor),
    );
    entry.detail = serde_json::json!({"session": theirs.id_hash.get(..12)});
    record(&console, entry).await;
    see_other("/console/sessions")
}

/// `GET /console/audit?actor=&action=&since=&before=`: the audit log, newest first.
pub(super) async fn audit(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let fields = super::query_fields(&req);
    let query = match audit_query(&fields, AUDIT_PAGE) {
        Ok(query) => query,
        Err(message) => {
            return error_page(
                &session,
                StatusCode::BAD_REQUEST,
                "Invalid filter",
                &message,
            )
        }
    };
    match console.audit.list_audit(&query).await {
        Ok(entries) => html(StatusCode::OK, audit_markup(&session, &fields, &entries)),
        Err(e) => store_failure(&session, "The audit log could not be read", &e),
    }
}

/// The audit query of a page's (or the admin API's) parameters: `actor`, `action`, `since`
/// (RFC 3339), `before` (an entry id: the page after it).
pub(crate) fn audit_query(fields: &Fields, limit: usize) -> Result<AuditQuery, String> {
    let non_empty = |name| fields.get(name).map(str::trim).filter(|v| !v.is_empty());
    let action = non_empty("action")
        .map(|a| a.parse::<AuditAction>().map_err(|e| e.to_string()))
        .transpose()?;
    let since = non_empty("since")
        .map(|s| {
            OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
                .map_err(|_| format!("since must be an RFC 3339 time, not {s:?}"))
        })
        .transpose()?;
    // Entry ids start at 1: 0 or a negative id would page to nothing, silently.
    let before_id = non_empty("before")
        .map(|b| {
            b.parse::<i64>()
                .ok()
                .filter(|id| *id >= 1)
                .ok_or_else(|| format!("before must be an entry id, 1 or more, not {b:?}"))
        })
        .transpose()?;
    Ok(AuditQuery {
        since,
        until: None,
        actor: non_empty("actor").map(str::to_owned),
        action,
        before_id,
        limit,
    })
}

fn audit_markup(session: &Session, fields: &Fields, entries: &[AuditEntry]) -> Markup {
    let value = |name| fields.get(name).unwrap_or_default().to_owned();
    let body = html! {
        form #audit-filter method="get" action="/console/audit" {
            label for="actor" { "Who" }
            input #actor type="text" name="actor" value=(value("actor"));
            label for="action" { "What" }
            input #action type="text" name="action" value=(value("action")) placeholder="catalog.change";
            label for="since" { "Since (RFC 3339)" }
            input #since type="text" name="since" value=(value("since")) placeholder="2026-11-01T00:00:00Z";
            button type="submit" { "Filter" }
        }
        @if entries.is_empty() {
            p { "No entry matches." }
        } @else {
            div.table {
                table #audit {
                    thead { tr {
                        th.num scope="col" { "#" } th scope="col" { "When" } th scope="col" { "Who" }
                        th scope="col" { "What" } th scope="col" { "To what" } th scope="col" { "Comment" }
                        th scope="col" { "Revisions" } th scope="col" { "Detail" }
                    } }
                    tbody {
                        @for e in entries {
                            tr {
                                td.num { (e.id) }
                                td { (when(e.at)) }
                                td.actor { (e.actor) }
                                td.action { (e.action) }
                                td { (e.target.as_deref().unwrap_or("")) }
                                td.comment { (e.comment.as_deref().unwrap_or("")) }
                                td {
                                    @if let (Some(b), Some(a)) = (e.revision_before, e.revision_after) { (b) " → " (a) }
                                }
                                td { @if !e.detail.is_null() { code { (e.detail.to_string()) } } }
                            }
                        }
                    }
                }
            }
            @if let Some(last) = entries.last().filter(|_| entries.len() >= AUDIT_PAGE) {
                form #audit-older method="get" action="/console/audit" {
                    input type="hidden" name="actor" value=(value("actor"));
                    input type="hidden" name="action" value=(value("action"));
                    input type="hidden" name="since" value=(value("since"));
                    input type="hidden" name="before" value=(last.id);
                    button type="submit" { "Older entries" }
                }
            }
        }
    };
    layout(Some(session), "Audit log", "/console/audit", body)
}

/// An audit entry as JSON (the admin API's and `flowgate audit list --json`'s shape).
pub fn audit_json(entry: &AuditEntry) -> serde_json::Value {
    let at = entry
        .at
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    serde_json::json!({
        "id": entry.id,
        "format": entry.format,
        "at": at,
        "actor": entry.actor,
        "action": entry.action.as_str(),
        "target": entry.target,
        "comment": entry.comment,
        "revision_before": entry.revision_before,
        "revision_after": entry.revision_after,
        "detail": entry.detail,
    })
}

#[cfg(test)]
mod tests {
    use super::{audit_query, Fields};

    /// Issue 65: the audit query's `before` is an entry id, 1 or more, and the refusal quotes
    /// the value; `limit` is the caller's, checked where it is read (1 to the page's most).
    #[test]
    fn before_is_an_entry_id() {
        let query = |before: &str| {
            audit_query(&Fields(vec![("before".to_owned(), before.to_owned())]), 10)
                .map(|q| q.before_id)
        };
        assert_eq!(query("42"), Ok(Some(42)));
        for refused in ["0", "-5", "x", "9223372036854775808"] {
            assert_eq!(
                query(refused),
                Err(format!(
                    "before must be an entry id, 1 or more, not {refused:?}"
                ))
            );
        }
    }
}
