//! The operator console (D24, D28): server-rendered pages on the admin listener at
//! `/console/`, present only with `admin.token`.
//!
//! This module holds the console's state, what every page shares (sessions, forms, the CSRF
//! check, the audit helpers) and the route table; each page is its own module: experiments and
//! their results drawn as SVG charts (`experiments.rs`, `charts.rs`), the catalog, explain, the
//! change preview of a catalog file and the import history (`catalog.rs`), changes to the
//! catalog (`changes.rs`, reviewed when asked), staged rollouts (D29, `rollouts.rs`), SDK keys
//! (`keys.rs`), people, sessions and the audit log (`people.rs`), signing in and out
//! (`signin.rs`, `openid.rs`). Every page calls the functions the admin API and the command
//! line call: results and explain are [`crate::results`]' and [`crate::explain`]'s; the rest
//! (the catalog as stored, the import history, the dry run of a file, keys, changes and
//! rollouts) is the control plane's [`flowgate_control::console::Console`], which the command
//! line's use cases share.
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
mod catalog;
mod changes;
mod charts;
mod experiments;
mod forms;
mod hashing;
mod keys;
mod openid;
mod pages;
pub mod passwords;
pub mod people;
mod rollouts;
mod session;
mod signin;

use std::sync::Arc;
use std::time::Duration;

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::middleware::DefaultHeaders;
use actix_web::{web, HttpRequest, HttpResponse};
use flowgate_domain::ports::StoreError;
use maud::Markup;
use time::OffsetDateTime;

use crate::access::{ExplainAccess, ResultsAccess};
use crate::token_guard::TokenGuard;
use flowgate_control::console::{
    ChangeOutcome, ChangeRefusal, Console as UseCases, Preview, PreviewError, RolloutMove,
    RolloutStart,
};
use flowgate_control::keys::CreatedKey;
use flowgate_domain::people::{AuditAction, NewAuditEntry, Role};
use flowgate_domain::ports::{AuditLog, ChangeStore, ImportRecord, PeopleStore};
pub use openid::{OidcAccess, RoleMatch, RoleRule, PENDING_LIFETIME};
use session::{Session, Sessions};
use signin::{
    open_session, password_post_refusal, refused_entry, sign_in_form, sign_in_form_checked,
    too_many,
};

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

impl Console {
    /// The control plane's use cases the console calls (the admin API calls them too).
    pub(crate) fn use_cases(&self) -> &UseCases {
        &self.backend
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

/// A store failure, as a page.
fn store_failure(session: &Session, what: &str, error: &StoreError) -> HttpResponse {
    tracing::error!(%error, "console: {what}");
    let status = match error {
        StoreError::NotFound { .. } => StatusCode::NOT_FOUND,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    error_page(session, status, what, &error.to_string())
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
                .route(web::get().to(signin::sign_in_page))
                .route(web::post().to(signin::sign_in)),
        )
        .service(route!("/sign-out").route(web::post().to(signin::sign_out)))
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
        .service(route!("/experiments").route(web::get().to(experiments::experiments)))
        .service(
            route!("/experiments/{experimentId}").route(web::get().to(experiments::experiment)),
        )
        .service(route!("/catalog").route(web::get().to(catalog::catalog)))
        .service(
            route!("/explain")
                .route(web::get().to(catalog::explain_form))
                .route(web::post().to(catalog::explain_run)),
        )
        .service(
            route!("/preview")
                .route(web::get().to(catalog::preview_form))
                .route(web::post().to(catalog::preview_run)),
        )
        .service(route!("/history").route(web::get().to(catalog::history)))
        .service(
            route!("/keys")
                .route(web::get().to(keys::keys))
                .route(web::post().to(keys::create_key)),
        )
        .service(route!("/keys/created").route(web::get().to(keys::key_created)))
        .service(
            route!("/keys/{keyId}/revoke")
                .route(web::get().to(keys::revoke_confirm))
                .route(web::post().to(keys::revoke)),
        )
        .default_service(web::to(not_found))
        .wrap(headers)
}
