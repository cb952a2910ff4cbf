//! Signing in and out: the sign-in page and its form, passwords (checked off the worker,
//! `hashing.rs`, within the per-address and per-account budgets), the admin token, and the
//! session each opens (`session.rs`).

use super::session::Who;
use super::{
    audit_entry, error_page, hashing, html, openid, pages, passwords, posted, record, see_other,
    session, to_sign_in, Console, Data, Fields, PostedForm, ACCOUNT_WINDOW,
};
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use flowgate_domain::people::{normalize_email, AuditAction, Role, ADMIN_TOKEN_ACTOR};
use flowgate_domain::ports::StoreError;
use time::OffsetDateTime;

/// The sign-in page with `message`, a new form bound to a new pre-session cookie (issued and
/// signed under the deployment's key, `session.rs`).
pub(super) async fn sign_in_form(
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
pub(super) async fn sign_in_page(req: HttpRequest, console: Data) -> HttpResponse {
    if let Ok(Some(_)) = console.sessions.of(&req).await {
        return see_other("/console/experiments");
    }
    sign_in_form(&console, &req, StatusCode::OK, None).await
}

/// `POST /console/sign-in`: an email and password, or the admin token (when
/// `console.admin_token_sign_in`), opens a session.
pub(super) async fn sign_in(req: HttpRequest, form: PostedForm, console: Data) -> HttpResponse {
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
pub(super) async fn open_session(
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
pub(super) async fn too_many(
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
pub(super) async fn sign_out(req: HttpRequest, form: PostedForm, console: Data) -> HttpResponse {
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
