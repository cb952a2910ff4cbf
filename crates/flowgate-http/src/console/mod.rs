//! The operator console (D24, D28): server-rendered pages on the admin listener at
//! `/console/`, present only with `admin.token`.
//!
//! Experiments with their results drawn as SVG charts, the catalog and changes to it
//! (`changes.rs`, reviewed when asked), explain, the change preview of a catalog file and the
//! import history, SDK keys, people and the audit log (`people.rs`), staged rollouts (D29,
//! `rollouts.rs`: started, paused, resumed and rolled back here). Every page calls the
//! functions the admin API and the command line call: results and explain are
//! [`crate::results`]' and [`crate::explain`]'s; the rest (the catalog as stored, the import
//! history, the dry run of a file, keys, changes and rollouts) is the control plane's
//! [`flowgate_control::console::Console`], which the command line's use cases share.
//!
//! Security: signing in (a password, `passwords.rs`; OpenID Connect, `openid.rs`; or the admin
//! token) opens a session in the store (`session.rs`); without one every page redirects to the
//! sign-in page; each page and post needs a role. Every form carries the session's CSRF token and every
//! post without it is refused (403) before anything is read or written. Every response carries
//! a Content-Security-Policy that allows no script, no frame and only this console's stylesheet,
//! `X-Frame-Options: DENY`, `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`
//! and `Cache-Control: no-store`. Everything from the catalog, the events or a request is
//! inserted by maud, which escapes it; only the charts' SVG is inserted as markup, and plotters
//! escapes the text in it. Sign-in attempts are rate limited per client address, with the API's
//! limiter (D10): 429 and `Retry-After` past the limit.

mod attempts;
mod changes;
mod charts;
mod hashing;
mod openid;
mod pages;
pub mod passwords;
pub mod people;
mod rollouts;
mod session;

use std::sync::Arc;
use std::time::Duration;

use actix_multipart::Multipart;
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::middleware::DefaultHeaders;
use actix_web::{web, HttpRequest, HttpResponse};
use flowgate_domain::ids::{KeyId, WorkspaceId};
use flowgate_domain::keys::{ApiKey, KeyEnvironment, KeyRecord, KeyType};
use flowgate_domain::ports::StoreError;
use futures_util::StreamExt as _;
use maud::Markup;
use time::OffsetDateTime;

use crate::access::{ExplainAccess, ResultsAccess};
use crate::token_guard::TokenGuard;
use flowgate_control::console::{
    ChangeOutcome, ChangeRefusal, Console as UseCases, Preview, PreviewError, RolloutMove,
    RolloutStart,
};
use flowgate_control::keys::CreatedKey;
use flowgate_control::results::{experiment_list, ReportError, ReportParams};
use flowgate_domain::people::{
    normalize_email, AuditAction, NewAuditEntry, Role, ADMIN_TOKEN_ACTOR,
};
use flowgate_domain::ports::{AuditLog, ChangeStore, ImportRecord, PeopleStore};
pub use openid::{OidcAccess, RoleMatch, RoleRule, PENDING_LIFETIME};
use session::{Session, Sessions, Who};

/// The console's Content-Security-Policy: nothing but this console's stylesheet, no script,
/// no frame, forms posted only here.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
/// Largest catalog file the change preview takes.
pub const UPLOAD_LIMIT: usize = 8 * 1024 * 1024;
/// Sign-in attempts a client address may make at once; they come back one a minute. Wrong
/// tokens on the admin API count in the same budget (`token_guard`).
pub const SIGN_IN_BURST: u32 = crate::token_guard::ATTEMPT_BURST;
/// Imports the history page lists.
const HISTORY_LIMIT: usize = 100;
/// The stylesheet (one, small; no inline style anywhere).
const STYLESHEET: &str = include_str!("console.css");

/// What the console needs beyond the admin API's access: the store's side and how long a
/// session lasts.
#[derive(Clone)]
pub struct ConsoleAccess {
    /// The console's use cases (`flowgate-control`).
    pub backend: UseCases,
    /// People and their sessions (D28).
    pub people: Arc<dyn PeopleStore>,
    /// The audit log (D28).
    pub audit: Arc<dyn AuditLog>,
    /// Proposed catalog changes (D28).
    pub changes: Arc<dyn ChangeStore>,
    /// Whether console changes wait for another person's approval (`catalog.require_review`).
    pub require_review: bool,
    /// Whether the admin token signs in (`console.admin_token_sign_in`), as `admin-token`.
    pub admin_token_sign_in: bool,
    /// Failed sign-ins an account may have from one client address within
    /// [`ACCOUNT_WINDOW`] (`console.failed_sign_ins_per_account`).
    pub failed_sign_ins_per_account: u32,
    /// How long a session lasts after signing in (`admin.console_session_seconds`).
    pub session_lifetime: Duration,
    /// Where previews run, one at a time, off the admin listener's worker.
    pub background: crate::background::Background,
    /// OpenID Connect sign-in (`[console.oidc]`), when configured.
    pub oidc: Option<OidcAccess>,
}

impl std::fmt::Debug for ConsoleAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleAccess")
            .field("session_lifetime", &self.session_lifetime)
            .finish_non_exhaustive()
    }
}

/// The window of `console.failed_sign_ins_per_account`.
pub const ACCOUNT_WINDOW: time::Duration = time::Duration::minutes(15);

/// The console's state, shared by its pages.
pub struct Console {
    backend: UseCases,
    sessions: Sessions,
    people: Arc<dyn PeopleStore>,
    audit: Arc<dyn AuditLog>,
    changes: Arc<dyn ChangeStore>,
    require_review: bool,
    admin_token_sign_in: bool,
    /// Sign-in attempts per client address, shared with the admin API's wrong tokens.
    guard: Arc<TokenGuard>,
    explain: Arc<ExplainAccess>,
    results: Arc<ResultsAccess>,
    background: crate::background::Background,
    oidc: Option<openid::OidcSignIn>,
    /// Every password hash and check, bounded (issue 65).
    work: hashing::PasswordWork,
    /// Failed sign-ins per account and address (issue 65).
    attempts: attempts::AccountAttempts,
    /// Set-password posts that would hash, per client address: a budget of their own with the
    /// sign-in budget's size and pace (issue 65).
    password_posts: crate::ratelimit::RateLimiter<std::net::IpAddr>,
}

impl Console {
    /// The console over the admin API's explain and results access.
    pub(crate) fn new(
        access: ConsoleAccess,
        explain: Arc<ExplainAccess>,
        results: Arc<ResultsAccess>,
        guard: Arc<TokenGuard>,
    ) -> Self {
        Self {
            backend: access.backend,
            sessions: Sessions::new(access.session_lifetime, Arc::clone(&access.people)),
            people: access.people,
            audit: access.audit,
            changes: access.changes,
            require_review: access.require_review,
            admin_token_sign_in: access.admin_token_sign_in,
            guard,
            explain,
            results,
            work: hashing::PasswordWork::new(access.background.clone()),
            password_posts: crate::ratelimit::RateLimiter::every(
                crate::token_guard::ATTEMPT_INTERVAL,
                crate::token_guard::ATTEMPT_BURST,
            ),
            attempts: attempts::AccountAttempts::new(
                access.failed_sign_ins_per_account,
                std::time::Duration::from_secs(
                    u64::try_from(ACCOUNT_WINDOW.whole_seconds()).unwrap_or(900),
                ),
            ),
            background: access.background,
            oidc: access.oidc.map(openid::OidcSignIn::new),
        }
    }
}

type Data = web::Data<Console>;

/// An HTML page.
fn html(status: StatusCode, markup: Markup) -> HttpResponse {
    HttpResponse::build(status)
        .insert_header((
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        ))
        .body(markup.into_string())
}

/// 303 to `location`.
fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location))
        .finish()
}

/// Where a request without a session goes.
fn to_sign_in() -> HttpResponse {
    see_other("/console/sign-in")
}

/// A signed-in page's error: the message in the layout.
fn error_page(session: &Session, status: StatusCode, title: &str, message: &str) -> HttpResponse {
    html(status, pages::error(session, title, message))
}

/// A form's fields, in order.
pub(crate) struct Fields(pub(crate) Vec<(String, String)>);

/// The fields of the request's query string (none when it does not parse: every page works
/// without its optional parameters).
fn query_fields(req: &HttpRequest) -> Fields {
    Fields(
        web::Query::<Vec<(String, String)>>::from_query(req.query_string())
            .map(web::Query::into_inner)
            .unwrap_or_default(),
    )
}

/// A post's form, or why it could not be read (the error's response is [`form_error`]'s).
type PostedForm = Result<web::Form<Vec<(String, String)>>, actix_web::Error>;

impl Fields {
    /// A post's fields. A body that is not a form (none at all, another content type, bad
    /// encoding) reads as no fields, so the post is refused as any post without its CSRF token
    /// is (403, or the sign-in page without a session) before anything is read; only a body
    /// over the limit is answered at once (413).
    fn posted(form: PostedForm) -> Result<Self, Box<HttpResponse>> {
        match form {
            Ok(form) => Ok(Self(form.into_inner())),
            Err(e) => {
                let response = e.error_response();
                if response.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    Err(Box::new(response))
                } else {
                    Ok(Self(Vec::new()))
                }
            }
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The session of the request, when it may act as `needed`; otherwise the answer: the sign-in
/// page without a session, 403 (nothing done) with a session of a lesser role, 503 when the
/// store of sessions cannot be read.
async fn signed_in(
    console: &Console,
    req: &HttpRequest,
    needed: Role,
) -> Result<Session, Box<HttpResponse>> {
    let session = match console.sessions.of(req).await {
        Ok(Some(session)) => session,
        Ok(None) => return Err(Box::new(to_sign_in())),
        Err(e) => {
            tracing::error!(error = %e, "console: the sessions could not be read");
            return Err(Box::new(
                HttpResponse::ServiceUnavailable()
                    .insert_header((header::RETRY_AFTER, HeaderValue::from_static("5")))
                    .body("The console's sessions cannot be read now; retry in a moment."),
            ));
        }
    };
    if !session.role.allows(needed) {
        return Err(Box::new(html(
            StatusCode::FORBIDDEN,
            pages::error(
                &session,
                "Not allowed",
                &format!(
                    "This needs the {needed} role; you are signed in as {} with the {} role, \
                     so nothing was done.",
                    session.actor, session.role
                ),
            ),
        )));
    }
    Ok(session)
}

/// The session of a post whose form carries its CSRF token, when it may act as `needed`;
/// otherwise the answer: the sign-in page without a session, 403 with one but another token
/// or a lesser role. The token is checked first: a cross-site post learns nothing.
async fn checked_post(
    console: &Console,
    req: &HttpRequest,
    csrf: Option<&str>,
    needed: Role,
) -> Result<Session, Box<HttpResponse>> {
    let session = signed_in(console, req, Role::Viewer).await?;
    match csrf {
        Some(token) if crate::access::same_secret(token.as_bytes(), session.csrf.as_bytes()) => {}
        _ => {
            return Err(Box::new(html(
                StatusCode::FORBIDDEN,
                pages::error(
                    &session,
                    "Form refused",
                    "The form did not carry this session's CSRF token, so nothing was done. \
                     Reload the page and submit the form again.",
                ),
            )))
        }
    }
    if session.role.allows(needed) {
        Ok(session)
    } else {
        signed_in(console, req, needed).await
    }
}

/// A post's fields and session, when its form carries the session's CSRF token and the
/// session may act as `needed`; otherwise the answer ([`Fields::posted`], [`checked_post`]).
async fn posted(
    console: &Console,
    req: &HttpRequest,
    form: PostedForm,
    needed: Role,
) -> Result<(Fields, Session), Box<HttpResponse>> {
    let fields = Fields::posted(form)?;
    let session = checked_post(console, req, fields.get("csrf"), needed).await?;
    Ok((fields, session))
}

/// Appends `entry` to the audit log; a failure is logged (what it records already happened).
async fn record(console: &Console, entry: NewAuditEntry) {
    if let Err(e) = console.audit.append_audit(entry.clone()).await {
        tracing::error!(error = %e, action = %entry.action, actor = %entry.actor,
            "console: the audit entry could not be written");
    }
}

/// An audit entry of `actor` doing `action` to `target` now.
fn audit_entry(actor: &str, action: AuditAction, target: Option<String>) -> NewAuditEntry {
    NewAuditEntry {
        at: OffsetDateTime::now_utc(),
        actor: actor.to_owned(),
        action,
        target,
        comment: None,
        revision_before: None,
        revision_after: None,
        detail: serde_json::Value::Null,
    }
}

/// `GET /console/`: the experiments, or the sign-in page.
async fn index(req: HttpRequest, console: Data) -> HttpResponse {
    match signed_in(&console, &req, Role::Viewer).await {
        Ok(_) => see_other("/console/experiments"),
        Err(answer) => *answer,
    }
}

/// The sign-in page with `message`, a new form bound to a new pre-session cookie (issued and
/// signed under the deployment's key, `session.rs`).
async fn sign_in_form(
    console: &Console,
    req: &HttpRequest,
    status: StatusCode,
    message: Option<&str>,
) -> HttpResponse {
    let form = match console.sessions.sign_in_tokens().await {
        Ok(tokens) => match tokens.issue() {
            Ok(form) => form,
            Err(_) => {
                return HttpResponse::ServiceUnavailable().body("no randomness for a sign-in form")
            }
        },
        Err(e) => {
            tracing::error!(error = %e, "console: the sign-in key could not be read");
            return HttpResponse::ServiceUnavailable()
                .insert_header((header::RETRY_AFTER, HeaderValue::from_static("5")))
                .body("The console cannot be signed in to now; retry in a moment.");
        }
    };
    let methods = pages::SignInMethods {
        admin_token: console.admin_token_sign_in,
        oidc: console.oidc.as_ref().map(openid::OidcSignIn::label),
    };
    let mut response = html(status, pages::sign_in(&form.token, &methods, message));
    // A cookie built here is always a valid header.
    let _ = response.add_cookie(&session::sign_in_cookie(req, form.cookie));
    response
}

/// `GET /console/sign-in`
async fn sign_in_page(req: HttpRequest, console: Data) -> HttpResponse {
    if let Ok(Some(_)) = console.sessions.of(&req).await {
        return see_other("/console/experiments");
    }
    sign_in_form(&console, &req, StatusCode::OK, None).await
}

/// `POST /console/sign-in`: an email and password, or the admin token (when
/// `console.admin_token_sign_in`), opens a session.
async fn sign_in(req: HttpRequest, form: PostedForm, console: Data) -> HttpResponse {
    let fields = match Fields::posted(form) {
        Ok(fields) => fields,
        Err(refused) => return *refused,
    };
    // The CSRF check first: a cross-site post cannot spend this address's attempts.
    if let Err(message) = sign_in_form_checked(&console, &req, fields.get("csrf")).await {
        return sign_in_form(&console, &req, StatusCode::FORBIDDEN, Some(message)).await;
    }
    let client = crate::token_guard::client_of(&req);
    let email = fields.get("email").map(str::trim).unwrap_or_default();
    if let Some(retry_after_secs) = address_refusal(&console, client) {
        let target = (!email.is_empty()).then(|| audit_text(email));
        refused_entry(&console, client, target, "address").await;
        return too_many(
            &console,
            &req,
            u64::from(retry_after_secs),
            "from this address",
        )
        .await;
    }
    let address = Some(client.to_string());
    let who = if email.is_empty() {
        // The admin token, when it may sign in.
        let given = fields.get("token").unwrap_or_default();
        if !console.admin_token_sign_in
            || console.explain.token.is_empty()
            || !crate::access::same_secret(given.as_bytes(), console.explain.token.as_bytes())
        {
            console.guard.wrong_sign_in(client);
            let mut entry = audit_entry(ADMIN_TOKEN_ACTOR, AuditAction::SignInFailed, None);
            entry.detail = serde_json::json!({"address": client.to_string()});
            record(&console, entry).await;
            let message = if console.admin_token_sign_in {
                "That is not the admin token."
            } else {
                "Signing in with the admin token is off (console.admin_token_sign_in)."
            };
            return sign_in_form(&console, &req, StatusCode::UNAUTHORIZED, Some(message)).await;
        }
        Who {
            person_id: None,
            actor: ADMIN_TOKEN_ACTOR.to_owned(),
            role: Role::Admin,
        }
    } else {
        let password = fields.get("password").unwrap_or_default();
        match password_sign_in(&console, client, email, password).await {
            Ok(who) => who,
            Err(SignInRefusal::TooMany(email, retry_after_secs)) => {
                refused_entry(&console, client, Some(email), "account").await;
                return too_many(&console, &req, retry_after_secs, "for this account").await;
            }
            Err(SignInRefusal::Wrong(target)) => {
                console.guard.wrong_sign_in(client);
                let mut entry =
                    audit_entry(&target, AuditAction::SignInFailed, Some(target.clone()));
                entry.detail = serde_json::json!({"address": client.to_string()});
                record(&console, entry).await;
                return sign_in_form(
                    &console,
                    &req,
                    StatusCode::UNAUTHORIZED,
                    Some("That email and password do not sign in."),
                )
                .await;
            }
            Err(SignInRefusal::Busy) => return hashing::busy(&req),
            Err(SignInRefusal::Store(e)) => {
                tracing::error!(error = %e, "console: sign-in could not read the people");
                return HttpResponse::ServiceUnavailable()
                    .insert_header((header::RETRY_AFTER, HeaderValue::from_static("5")))
                    .body("The console cannot be signed in to now; retry in a moment.");
            }
        }
    };
    open_session(&console, &req, who, address).await
}

/// Whether the sign-in form's token of a post is good ([`session::sign_in_token_matches`]);
/// otherwise the message to show with a new form.
pub(crate) async fn sign_in_form_checked(
    console: &Console,
    req: &HttpRequest,
    token: Option<&str>,
) -> Result<(), &'static str> {
    let issued = match (token, console.sessions.sign_in_tokens().await) {
        (Some(token), Ok(tokens)) => session::sign_in_token_matches(req, tokens, token),
        _ => false,
    };
    if issued {
        Ok(())
    } else {
        Err("The sign-in form expired or came from elsewhere; sign in again.")
    }
}

/// Counts a sign-in attempt of `client` in the address's budget, shared with the admin API's
/// wrong tokens: the seconds to wait when the address is over it.
pub(crate) fn address_refusal(console: &Console, client: std::net::IpAddr) -> Option<u32> {
    console.guard.blocked(client).or_else(|| {
        let decision = console.guard.attempt(client);
        (!decision.allowed).then_some(decision.retry_after_secs)
    })
}

/// Counts a set-password post of `client` that would hash in the address's budget of such
/// posts (ten at once, one more a minute): the seconds to wait when the address is over it, or
/// while the address is blocked for wrong admin tokens (issue 65).
pub(crate) fn password_post_refusal(console: &Console, client: std::net::IpAddr) -> Option<u32> {
    console.guard.blocked(client).or_else(|| {
        let decision = console.password_posts.check(&client);
        (!decision.allowed).then_some(decision.retry_after_secs)
    })
}

/// Records a sign-in refused before any password was checked (429, `limit`: `address` or
/// `account`) as `sign_in.refused`: the first of each address a minute, so a flood of refused
/// posts is not a flood of writes (issue 65).
pub(crate) async fn refused_entry(
    console: &Console,
    client: std::net::IpAddr,
    target: Option<String>,
    limit: &str,
) {
    if !console.attempts.record_refusal(client) {
        return;
    }
    let actor = target
        .clone()
        .unwrap_or_else(|| ADMIN_TOKEN_ACTOR.to_owned());
    let mut entry = audit_entry(&actor, AuditAction::SignInRefused, target);
    entry.detail = serde_json::json!({
        "address": client.to_string(), "reason": "too_many_attempts", "limit": limit,
        "note": "further refusals of this address within a minute are not recorded",
    });
    record(console, entry).await;
}

/// `text` as the audit log keeps what a client typed: at most 254 characters, each control
/// character written as `\u{..}` (PostgreSQL's text cannot hold NUL, and a line break or an
/// escape sequence must not reach a terminal as typed).
pub(crate) fn audit_text(text: &str) -> String {
    text.chars()
        .take(254)
        .map(|c| {
            if c.is_control() {
                format!("\\u{{{:x}}}", u32::from(c))
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Opens a session for `who` and sends the browser to the experiments with its cookie. A
/// person disabled meanwhile (the store refuses the session) gets the sign-in page (403).
async fn open_session(
    console: &Console,
    req: &HttpRequest,
    who: Who,
    address: Option<String>,
) -> HttpResponse {
    let actor = who.actor.clone();
    let target = who.person_id.is_some().then(|| actor.clone());
    let (id, _) = match console.sessions.open(who, address.clone()).await {
        Ok(opened) => opened,
        Err(session::SessionError::Store(StoreError::Conflict { .. })) => {
            let mut entry = audit_entry(&actor, AuditAction::SignInFailed, target);
            entry.detail = serde_json::json!({"address": address, "reason": "disabled"});
            record(console, entry).await;
            let message = "That email and password do not sign in.";
            return sign_in_form(console, req, StatusCode::FORBIDDEN, Some(message)).await;
        }
        Err(e) => {
            tracing::error!(error = %e, "console: a session could not be opened");
            return HttpResponse::ServiceUnavailable()
                .insert_header((header::RETRY_AFTER, HeaderValue::from_static("5")))
                .body("The console cannot be signed in to now; retry in a moment.");
        }
    };
    let mut entry = audit_entry(&actor, AuditAction::SignIn, target);
    entry.detail = serde_json::json!({"address": address});
    record(console, entry).await;
    let mut response = see_other("/console/experiments");
    let cookie = session::session_cookie(req, id, console.sessions.lifetime());
    let _ = response.add_cookie(&cookie);
    let _ = response.add_cookie(&session::sign_in_removal(req));
    response
}

/// The sign-in page answering 429 with `Retry-After`.
async fn too_many(
    console: &Console,
    req: &HttpRequest,
    retry_after_secs: u64,
    whose: &str,
) -> HttpResponse {
    let mut response = sign_in_form(
        console,
        req,
        StatusCode::TOO_MANY_REQUESTS,
        Some(&format!(
            "Too many sign-in attempts {whose}; try again in {retry_after_secs} s."
        )),
    )
    .await;
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
    response
}

/// Why a password sign-in was refused.
enum SignInRefusal {
    /// Unknown email, no password set, disabled, or a wrong password: one answer for all (the
    /// normalised email, or the text given as [`audit_text`] keeps it, for the audit log).
    Wrong(String),
    /// The account's failed sign-ins from this address (with the checks running) reached
    /// `console.failed_sign_ins_per_account`: the account, and the seconds to wait.
    TooMany(String, u64),
    /// No turn to check the password now ([`hashing`]): nothing was checked.
    Busy,
    /// The store failed.
    Store(StoreError),
}

/// The failed sign-ins of `email` from `client` within [`ACCOUNT_WINDOW`] that the audit log
/// holds (every replica's): the newest [`STORED_FAILURES_READ`] of the account, by address.
async fn stored_failures(
    console: &Console,
    email: &str,
    client: std::net::IpAddr,
) -> Result<u64, StoreError> {
    let query = flowgate_domain::people::AuditQuery {
        since: Some(OffsetDateTime::now_utc() - ACCOUNT_WINDOW),
        actor: Some(email.to_owned()),
        action: Some(AuditAction::SignInFailed),
        limit: STORED_FAILURES_READ,
        ..Default::default()
    };
    let address = client.to_string();
    let entries = console.audit.list_audit(&query).await?;
    Ok(entries
        .iter()
        .filter(|e| e.target.as_deref() == Some(email) && e.detail["address"] == address.as_str())
        .count() as u64)
}

/// The most failed sign-ins of one account read to count those of one address.
const STORED_FAILURES_READ: usize = 500;

/// Checks an email and password: the person, enabled, with this password, and fewer failed
/// sign-ins from `client` than allowed within [`ACCOUNT_WINDOW`] (the attempt is reserved
/// before the check, so concurrent posts cannot pass the limit). The password is hashed
/// whatever the outcome, so the answer's time says nothing of which it was. After the check the
/// person is read again: one disabled or given another role meanwhile signs in as they are now.
async fn password_sign_in(
    console: &Console,
    client: std::net::IpAddr,
    email: &str,
    password: &str,
) -> Result<Who, SignInRefusal> {
    let password = password.to_owned();
    let Ok(email) = normalize_email(email) else {
        let checked = console
            .work
            .run(move || passwords::verify(&password, None))
            .await;
        return match checked {
            Err(hashing::WorkRefused::Busy) => Err(SignInRefusal::Busy),
            _ => Err(SignInRefusal::Wrong(audit_text(email))),
        };
    };
    let stored = stored_failures(console, &email, client)
        .await
        .map_err(SignInRefusal::Store)?;
    let reservation = console
        .attempts
        .reserve(&email, client, stored)
        .map_err(|wait| SignInRefusal::TooMany(email.clone(), wait))?;
    let person = console
        .people
        .person_by_email(&email)
        .await
        .map_err(SignInRefusal::Store)?;
    let hash = person.as_ref().and_then(|p| p.password_hash.clone());
    // argon2id takes tens of milliseconds of CPU and 19 MiB: bounded, off the worker.
    let matches = match console
        .work
        .run(move || passwords::verify(&password, hash.as_deref()))
        .await
    {
        Ok(matches) => matches,
        Err(hashing::WorkRefused::Busy) => return Err(SignInRefusal::Busy),
        Err(hashing::WorkRefused::Failed) => false,
    };
    let now = match person {
        Some(person) if matches => console
            .people
            .person(person.id)
            .await
            .map_err(SignInRefusal::Store)?,
        _ => None,
    };
    match now {
        Some(person) if !person.disabled => Ok(Who {
            person_id: Some(person.id),
            actor: person.email,
            role: person.role,
        }),
        _ => {
            reservation.failed();
            Err(SignInRefusal::Wrong(email))
        }
    }
}

/// `POST /console/sign-out`
async fn sign_out(req: HttpRequest, form: PostedForm, console: Data) -> HttpResponse {
    let (_, session) = match posted(&console, &req, form, Role::Viewer).await {
        Ok(posted) => posted,
        Err(answer) => return *answer,
    };
    if let Err(e) = console.sessions.close(&session).await {
        tracing::error!(error = %e, "console: a session could not be closed");
        return error_page(
            &session,
            StatusCode::SERVICE_UNAVAILABLE,
            "Not signed out",
            "The session could not be ended now; retry in a moment.",
        );
    }
    record(
        &console,
        audit_entry(&session.actor, AuditAction::SignOut, None),
    )
    .await;
    let mut response = to_sign_in();
    let _ = response.add_cookie(&session::removal(&req, session::SESSION_COOKIE));
    response
}

/// `GET /console/experiments`
async fn experiments(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let access = &console.results;
    let catalog = access.catalog.load();
    let started = std::time::Instant::now();
    let listed = experiment_list(&catalog, access.source.as_ref(), None).await;
    access.metrics.observe(started.elapsed(), &listed);
    match listed {
        Ok((listed, exposed)) => html(
            StatusCode::OK,
            pages::experiments(&session, &listed, &exposed),
        ),
        Err(e) => report_failure(&session, &e),
    }
}

/// A results read that failed, as a page.
fn report_failure(session: &Session, error: &ReportError) -> HttpResponse {
    match error {
        ReportError::UnknownExperiment(_) | ReportError::UnknownApp(_) => error_page(
            session,
            StatusCode::NOT_FOUND,
            "Not found",
            &error.to_string(),
        ),
        ReportError::InvalidParam { .. } => error_page(
            session,
            StatusCode::BAD_REQUEST,
            "Invalid request",
            &error.to_string(),
        ),
        ReportError::Store(cause) => {
            tracing::error!(error = %cause, "console: results read failed");
            let message = if error.timed_out() {
                "The results were not read within experiments.query_timeout_ms; ask for a \
                 shorter window, or raise the limit."
            } else {
                "The results store could not be read; retry later (the cause is in the log)."
            };
            error_page(
                session,
                StatusCode::SERVICE_UNAVAILABLE,
                "Results unavailable",
                message,
            )
        }
    }
}

/// `GET /console/experiments/{id}[?from=&to=&method=]`: one experiment's results with charts.
async fn experiment(req: HttpRequest, path: web::Path<String>, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let fields = query_fields(&req);
    let non_empty = |name| fields.get(name).filter(|v| !v.is_empty());
    let (from, to) = (non_empty("from"), non_empty("to"));
    let report = match ReportParams::parse(from, to, &[], non_empty("method")) {
        Ok(params) => console.results.report(&path, &params).await,
        Err(e) => Err(e),
    };
    // The change forms need the catalog as stored; without it the page shows no forms.
    let forms = match (&report, session.role.allows(Role::Editor)) {
        (Ok(report), true) => match console.backend.catalog().await {
            Ok(data) => changes::experiment_forms(&session, &data, report.experiment_id),
            Err(e) => {
                tracing::warn!(error = %e, "console: the catalog could not be read for the change forms");
                maud::html! {}
            }
        },
        _ => maud::html! {},
    };
    match report {
        Ok(report) => html(
            StatusCode::OK,
            pages::experiment(
                &session,
                &report,
                from.unwrap_or_default(),
                to.unwrap_or_default(),
                forms,
            ),
        ),
        Err(e) => report_failure(&session, &e),
    }
}

/// `GET /console/catalog`
async fn catalog(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    match console.backend.catalog().await {
        Ok(data) => html(StatusCode::OK, pages::catalog(&session, &data)),
        Err(e) => store_failure(&session, "The catalog could not be read", &e),
    }
}

/// A store failure, as a page.
fn store_failure(session: &Session, what: &str, error: &StoreError) -> HttpResponse {
    tracing::error!(%error, "console: {what}");
    let status = match error {
        StoreError::NotFound { .. } => StatusCode::NOT_FOUND,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    error_page(session, status, what, &error.to_string())
}

/// `GET /console/explain`: the form.
async fn explain_form(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let catalog = console.explain.catalog.load();
    html(
        StatusCode::OK,
        pages::explain(&session, &catalog, &pages::ExplainInput::default(), None),
    )
}

/// `POST /console/explain`: the D18 trace of a request.
async fn explain_run(req: HttpRequest, form: PostedForm, console: Data) -> HttpResponse {
    let (fields, session) = match posted(&console, &req, form, Role::Viewer).await {
        Ok(posted) => posted,
        Err(answer) => return *answer,
    };
    let input = pages::ExplainInput {
        app: fields.get("app").unwrap_or_default().to_owned(),
        placement: fields.get("placement").unwrap_or_default().to_owned(),
        body: fields.get("body").unwrap_or_default().to_owned(),
    };
    let access = &console.explain;
    let catalog = access.catalog.load_full();
    if input.body.len() > access.body_limit {
        let message = format!(
            "The body is {} bytes; resolve takes at most {}.",
            input.body.len(),
            access.body_limit
        );
        let outcome = Err((StatusCode::PAYLOAD_TOO_LARGE, message));
        return html(
            StatusCode::PAYLOAD_TOO_LARGE,
            pages::explain(&session, &catalog, &input, Some(&outcome)),
        );
    }
    let explained = crate::explain::explain(
        &catalog,
        &input.app,
        &input.placement,
        input.body.as_bytes(),
        access.default_ttl,
        access.sticky.as_deref(),
    )
    .await;
    let (status, outcome) = match explained {
        Ok(explained) => (StatusCode::OK, Ok(explained)),
        Err(e) => {
            let mut message = e.detail.clone();
            for error in &e.errors {
                message.push_str(&format!("; {}: {}", error.field, error.message));
            }
            (e.status, Err((e.status, message)))
        }
    };
    html(
        status,
        pages::explain(&session, &catalog, &input, Some(&outcome)),
    )
}

/// `GET /console/preview`: the upload form.
async fn preview_form(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    html(StatusCode::OK, pages::preview(&session, None))
}

/// An upload's fields: the CSRF token and the file (name, text).
struct Upload {
    csrf: Option<String>,
    file: Option<(String, Vec<u8>)>,
}

/// Why an upload was not read.
enum UploadError {
    TooLarge,
    Malformed(String),
}

/// Reads a `multipart/form-data` body of at most [`UPLOAD_LIMIT`] bytes of fields.
async fn read_upload(mut multipart: Multipart) -> Result<Upload, UploadError> {
    let mut upload = Upload {
        csrf: None,
        file: None,
    };
    let mut total = 0usize;
    while let Some(field) = multipart.next().await {
        let mut field = field.map_err(|e| UploadError::Malformed(e.to_string()))?;
        let name = field.name().unwrap_or_default().to_owned();
        let file_name = field
            .content_disposition()
            .and_then(|d| d.get_filename())
            .map(str::to_owned);
        let mut bytes = Vec::new();
        while let Some(chunk) = field.next().await {
            let chunk = chunk.map_err(|e| UploadError::Malformed(e.to_string()))?;
            total += chunk.len();
            if total > UPLOAD_LIMIT {
                return Err(UploadError::TooLarge);
            }
            bytes.extend_from_slice(&chunk);
        }
        match name.as_str() {
            "csrf" => upload.csrf = Some(String::from_utf8_lossy(&bytes).into_owned()),
            "file" => upload.file = Some((file_name.unwrap_or_default(), bytes)),
            _ => {}
        }
    }
    Ok(upload)
}

/// `POST /console/preview`: the D19 dry run of an uploaded file; nothing is written.
async fn preview_run(req: HttpRequest, multipart: Multipart, console: Data) -> HttpResponse {
    let signed_in = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let upload = match read_upload(multipart).await {
        Ok(upload) => upload,
        Err(UploadError::TooLarge) => {
            let message = format!("The file is larger than {UPLOAD_LIMIT} bytes.");
            return error_page(
                &signed_in,
                StatusCode::PAYLOAD_TOO_LARGE,
                "File too large",
                &message,
            );
        }
        Err(UploadError::Malformed(e)) => {
            let message = format!("The upload could not be read: {e}");
            return error_page(
                &signed_in,
                StatusCode::BAD_REQUEST,
                "Upload refused",
                &message,
            );
        }
    };
    let session = match checked_post(&console, &req, upload.csrf.as_deref(), Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let Some((name, bytes)) = upload.file.filter(|(_, bytes)| !bytes.is_empty()) else {
        let outcome = Err(PreviewError::Invalid(vec![
            "choose a catalog file to preview".to_owned(),
        ]));
        return html(
            StatusCode::BAD_REQUEST,
            pages::preview(&session, Some((&String::new(), &outcome))),
        );
    };
    let name = if name.is_empty() {
        "upload.json".to_owned()
    } else {
        name
    };
    let outcome = match String::from_utf8(bytes) {
        Ok(text) => {
            // Parsed, validated and diffed off the admin listener's worker, one preview at a
            // time: the turn goes with the work, so a client that leaves does not end it early
            // (the work runs on), and the memory of previews is that of one.
            let turn = console.background.preview_permit().await;
            let (backend, file) = (console.backend.clone(), name.clone());
            console
                .background
                .run(async move {
                    let _turn = turn;
                    backend.preview(&file, &text).await
                })
                .await
                .unwrap_or_else(|| {
                    Err(PreviewError::Store(StoreError::Other {
                        detail: "the preview did not finish (see the log)".to_owned(),
                    }))
                })
        }
        Err(_) => Err(PreviewError::Invalid(vec![format!(
            "{name:?} is not UTF-8 text"
        )])),
    };
    let status = match &outcome {
        Ok(_) => StatusCode::OK,
        Err(PreviewError::Invalid(_)) => StatusCode::UNPROCESSABLE_ENTITY,
        Err(PreviewError::Store(e)) => {
            tracing::error!(error = %e, "console: preview failed");
            StatusCode::SERVICE_UNAVAILABLE
        }
    };
    html(status, pages::preview(&session, Some((&name, &outcome))))
}

/// `GET /console/history`: the applied imports.
async fn history(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    match console.backend.import_history(HISTORY_LIMIT).await {
        Ok(entries) => html(StatusCode::OK, pages::history(&session, &entries)),
        Err(e) => store_failure(&session, "The import history could not be read", &e),
    }
}

/// The workspace a keys request names, or the catalog's first.
fn workspace_param(console: &Console, given: Option<&str>) -> Result<Option<WorkspaceId>, String> {
    match given.filter(|w| !w.is_empty()) {
        Some(given) => given
            .parse::<uuid::Uuid>()
            .map(|id| Some(WorkspaceId::from_uuid(id)))
            .map_err(|_| format!("{given:?} is not a workspace id")),
        None => Ok(console
            .explain
            .catalog
            .load()
            .workspaces()
            .next()
            .map(|w| w.id())),
    }
}

/// `GET /console/keys[?workspace=]`: a workspace's keys and the form to create one.
async fn keys(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let query = query_fields(&req);
    let workspace = match workspace_param(&console, query.get("workspace")) {
        Ok(workspace) => workspace,
        Err(message) => {
            return error_page(
                &session,
                StatusCode::BAD_REQUEST,
                "Invalid request",
                &message,
            )
        }
    };
    let catalog = console.explain.catalog.load();
    let records = match workspace {
        Some(id) => match console.backend.list_keys(id).await {
            Ok(records) => records,
            Err(e) => return store_failure(&session, "The keys could not be listed", &e),
        },
        None => Vec::new(),
    };
    html(
        StatusCode::OK,
        pages::keys(&session, &catalog, workspace, &records),
    )
}

/// `POST /console/keys`: creates a key, and redirects (303) to the page that shows it once.
async fn create_key(req: HttpRequest, form: PostedForm, console: Data) -> HttpResponse {
    let (fields, session) = match posted(&console, &req, form, Role::Editor).await {
        Ok(posted) => posted,
        Err(answer) => return *answer,
    };
    let invalid = |message: String| {
        error_page(
            &session,
            StatusCode::BAD_REQUEST,
            "Key not created",
            &message,
        )
    };
    let workspace = match workspace_param(&console, fields.get("workspace")) {
        Ok(Some(workspace)) => workspace,
        Ok(None) => return invalid("choose a workspace".to_owned()),
        Err(message) => return invalid(message),
    };
    let environment = match fields.get("environment") {
        Some("live") => KeyEnvironment::Live,
        Some("test") => KeyEnvironment::Test,
        other => {
            return invalid(format!(
                "the environment is live or test, not {:?}",
                other.unwrap_or_default()
            ))
        }
    };
    let key_type = match fields.get("type") {
        Some("sdk") => KeyType::Sdk,
        Some("webhook") => KeyType::Webhook,
        Some("secret") => KeyType::Secret,
        other => {
            return invalid(format!(
                "the type is sdk, webhook or secret, not {:?}",
                other.unwrap_or_default()
            ))
        }
    };
    let name = fields.get("name").map(str::trim).unwrap_or_default();
    let default_name = format!("{key_type} key");
    let name = if name.is_empty() { &default_name } else { name };
    if name.chars().count() > 200 {
        return invalid(format!(
            "the name has {} characters; at most 200",
            name.chars().count()
        ));
    }
    // A NUL fails every write on PostgreSQL, as if the store were down: refused here, quoted.
    if !flowgate_domain::events::is_storable_text(name) {
        return invalid(format!(
            "A key's name cannot hold a NUL character (U+0000), which the store cannot keep: {}",
            crate::problem::quoted(name)
        ));
    }
    match console
        .backend
        .create_key(workspace, environment, key_type, name.to_owned())
        .await
    {
        Ok(created) => {
            tracing::info!(key = %created.record.id, workspace = %workspace, "console: key created");
            let mut entry = audit_entry(
                &session.actor,
                AuditAction::KeyCreate,
                Some(created.record.id.to_string()),
            );
            entry.detail = serde_json::json!({
                "workspace_id": workspace.to_string(), "type": key_type.to_string(),
                "environment": environment.to_string(), "name": created.record.name,
            });
            record(&console, entry).await;
            // Post/Redirect/Get: reloading the page that shows the key creates no other. The
            // key travels to that page sealed in a cookie bound to this session, so whichever
            // replica serves the page shows it, once.
            let sealed = match console.sessions.sign_in_tokens().await {
                Ok(tokens) => {
                    let plain = serde_json::json!({
                        "key": created.key.expose(), "record": created.record,
                    });
                    session::seal(
                        tokens,
                        NEW_KEY_PURPOSE,
                        session.id_hash.as_bytes(),
                        plain.to_string().as_bytes(),
                    )
                    .ok()
                }
                Err(_) => None,
            };
            match sealed {
                Some(sealed) => {
                    let mut response = see_other(session::NEW_KEY_PATH);
                    let cookie = session::new_key_cookie(&req, sealed, NEW_KEY_LIFETIME);
                    let _ = response.add_cookie(&cookie);
                    response
                }
                // Shown here, then: a reload of this answer asks before posting again.
                None => html(StatusCode::OK, pages::key_created(&session, &created)),
            }
        }
        Err(e) => store_failure(&session, "The key was not created", &e),
    }
}

/// What a created key's cookie is sealed for.
const NEW_KEY_PURPOSE: &[u8] = b"flowgate console new key v1";
/// How long a created key's cookie lasts (the redirect follows at once).
const NEW_KEY_LIFETIME: Duration = Duration::from_secs(120);

/// `GET /console/keys/created`: the key the session just created, shown this once; after
/// that (a reload), the keys.
async fn key_created(req: HttpRequest, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Editor).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    let created = match (
        req.cookie(session::NEW_KEY_COOKIE),
        console.sessions.sign_in_tokens().await,
    ) {
        (Some(cookie), Ok(tokens)) => session::open(
            tokens,
            NEW_KEY_PURPOSE,
            session.id_hash.as_bytes(),
            cookie.value(),
        )
        .and_then(|plain| serde_json::from_slice::<serde_json::Value>(&plain).ok())
        .and_then(|plain| {
            Some(CreatedKey {
                key: ApiKey::parse(plain["key"].as_str()?).ok()?,
                record: serde_json::from_value(plain["record"].clone()).ok()?,
            })
        }),
        _ => None,
    };
    let mut response = match created {
        Some(created) => html(StatusCode::OK, pages::key_created(&session, &created)),
        None => see_other("/console/keys"),
    };
    let removal = session::new_key_cookie(&req, String::new(), Duration::ZERO);
    let _ = response.add_cookie(&removal);
    response
}

/// The key of a revoke request's path and query, with its record.
async fn revoked_key(
    console: &Console,
    req: &HttpRequest,
    id: &str,
) -> Result<KeyRecord, (StatusCode, String)> {
    let id = id
        .parse::<uuid::Uuid>()
        .map(KeyId::from_uuid)
        .map_err(|_| (StatusCode::NOT_FOUND, format!("{id:?} is not a key id")))?;
    let query = query_fields(req);
    let workspace = workspace_param(console, query.get("workspace"))
        .map_err(|m| (StatusCode::BAD_REQUEST, m))?
        .ok_or_else(|| {
            (
                StatusCode::NOT_FOUND,
                "the catalog has no workspace".to_owned(),
            )
        })?;
    let records = console
        .backend
        .list_keys(workspace)
        .await
        .map_err(|e| (StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    records.into_iter().find(|r| r.id == id).ok_or_else(|| {
        (
            StatusCode::NOT_FOUND,
            format!("workspace {workspace} has no key {id}"),
        )
    })
}

/// `GET /console/keys/{id}/revoke?workspace=`: the confirmation.
async fn revoke_confirm(req: HttpRequest, path: web::Path<String>, console: Data) -> HttpResponse {
    let session = match signed_in(&console, &req, Role::Editor).await {
        Ok(session) => session,
        Err(answer) => return *answer,
    };
    match revoked_key(&console, &req, &path).await {
        Ok(record) => html(StatusCode::OK, pages::revoke_confirm(&session, &record)),
        Err((status, message)) => error_page(&session, status, "Key not found", &message),
    }
}

/// `POST /console/keys/{id}/revoke?workspace=`: revokes the key.
async fn revoke(
    req: HttpRequest,
    path: web::Path<String>,
    form: PostedForm,
    console: Data,
) -> HttpResponse {
    let (_, session) = match posted(&console, &req, form, Role::Editor).await {
        Ok(posted) => posted,
        Err(answer) => return *answer,
    };
    let record = match revoked_key(&console, &req, &path).await {
        Ok(record) => record,
        Err((status, message)) => return error_page(&session, status, "Key not found", &message),
    };
    match console.backend.revoke_key(record.id).await {
        Ok(record) => {
            tracing::info!(key = %record.id, "console: key revoked");
            let mut entry = audit_entry(
                &session.actor,
                AuditAction::KeyRevoke,
                Some(record.id.to_string()),
            );
            entry.detail = serde_json::json!({"workspace_id": record.workspace_id.to_string()});
            self::record(&console, entry).await;
            see_other(&format!("/console/keys?workspace={}", record.workspace_id))
        }
        Err(e) => store_failure(&session, "The key was not revoked", &e),
    }
}

/// `GET /console/style.css`
async fn stylesheet() -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/css; charset=utf-8"),
        ))
        .insert_header((
            header::CACHE_CONTROL,
            HeaderValue::from_static("max-age=3600"),
        ))
        .body(STYLESHEET)
}

/// Anything else under `/console`: the sign-in page without a session, 404 with one.
async fn not_found(req: HttpRequest, console: Data) -> HttpResponse {
    match signed_in(&console, &req, Role::Viewer).await {
        Ok(session) => error_page(
            &session,
            StatusCode::NOT_FOUND,
            "Not found",
            "There is no such page.",
        ),
        Err(answer) => *answer,
    }
}

/// A form body that is not a form, as a page: 413 when too large, else 400 (the posts read
/// such a body as no fields: [`Fields::posted`]).
fn form_error(error: actix_web::error::UrlencodedError, _req: &HttpRequest) -> actix_web::Error {
    let status = match &error {
        actix_web::error::UrlencodedError::Overflow { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        _ => StatusCode::BAD_REQUEST,
    };
    let response = html(
        status,
        pages::plain_error(
            "Form refused",
            &format!("The form could not be read: {error}"),
        ),
    );
    actix_web::error::InternalError::from_response(error, response).into()
}

/// The console's routes, under `/console`, with its headers on every response.
pub(crate) fn scope(
    console: Data,
) -> actix_web::Scope<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    // Explain's body, percent-encoded (at most three bytes each), and the other fields.
    let form_limit = console
        .explain
        .body_limit
        .saturating_mul(3)
        .saturating_add(16 * 1024);
    let headers = DefaultHeaders::new()
        .add((header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY))
        .add((header::X_FRAME_OPTIONS, "DENY"))
        .add((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .add((header::REFERRER_POLICY, "no-referrer"))
        .add((header::CACHE_CONTROL, "no-store"));
    // Each resource reports its whole path as its route label (`middleware::Route`).
    macro_rules! route {
        ($path:literal) => {
            web::resource($path).app_data(crate::middleware::Route(concat!("/console", $path)))
        };
    }
    web::scope("/console")
        .app_data(console)
        .app_data(
            web::FormConfig::default()
                .limit(form_limit)
                .error_handler(form_error),
        )
        .service(route!("").route(web::get().to(index)))
        .service(route!("/").route(web::get().to(index)))
        .service(route!("/style.css").route(web::get().to(stylesheet)))
        .service(
            route!("/sign-in")
                .route(web::get().to(sign_in_page))
                .route(web::post().to(sign_in)),
        )
        .service(route!("/sign-out").route(web::post().to(sign_out)))
        .service(route!("/oidc/start").route(web::get().to(openid::start)))
        .service(route!("/oidc/callback").route(web::get().to(openid::callback)))
        .service(
            route!("/set-password")
                .route(web::get().to(people::set_password_page))
                .route(web::post().to(people::set_password)),
        )
        .service(
            route!("/people")
                .route(web::get().to(people::people))
                .route(web::post().to(people::add_person)),
        )
        .service(route!("/people/{personId}").route(web::post().to(people::change_person)))
        .service(route!("/sessions").route(web::get().to(people::sessions)))
        .service(route!("/sessions/revoke").route(web::post().to(people::revoke_session)))
        .service(route!("/audit").route(web::get().to(people::audit)))
        .service(
            route!("/changes")
                .route(web::get().to(changes::list))
                .route(web::post().to(changes::post_change)),
        )
        .service(route!("/changes/new").route(web::get().to(changes::new_change)))
        .service(route!("/changes/{changeId}").route(web::get().to(changes::show)))
        .service(route!("/changes/{changeId}/approve").route(web::post().to(changes::approve)))
        .service(route!("/changes/{changeId}/withdraw").route(web::post().to(changes::withdraw)))
        .service(route!("/changes/{changeId}/reject").route(web::post().to(changes::reject)))
        .service(
            route!("/rollouts")
                .route(web::get().to(rollouts::list))
                .route(web::post().to(rollouts::start)),
        )
        .service(route!("/rollouts/new").route(web::get().to(rollouts::new_rollout)))
        .service(route!("/rollouts/{rolloutId}").route(web::get().to(rollouts::show)))
        .service(
            route!("/rollouts/{rolloutId}/{move}").route(web::post().to(rollouts::move_rollout)),
        )
        .service(route!("/experiments").route(web::get().to(experiments)))
        .service(route!("/experiments/{experimentId}").route(web::get().to(experiment)))
        .service(route!("/catalog").route(web::get().to(catalog)))
        .service(
            route!("/explain")
                .route(web::get().to(explain_form))
                .route(web::post().to(explain_run)),
        )
        .service(
            route!("/preview")
                .route(web::get().to(preview_form))
                .route(web::post().to(preview_run)),
        )
        .service(route!("/history").route(web::get().to(history)))
        .service(
            route!("/keys")
                .route(web::get().to(keys))
                .route(web::post().to(create_key)),
        )
        .service(route!("/keys/created").route(web::get().to(key_created)))
        .service(
            route!("/keys/{keyId}/revoke")
                .route(web::get().to(revoke_confirm))
                .route(web::post().to(revoke)),
        )
        .default_service(web::to(not_found))
        .wrap(headers)
}
