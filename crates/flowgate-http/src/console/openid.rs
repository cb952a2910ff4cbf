//! Signing in to the console with OpenID Connect (D28): `[console.oidc]`, over
//! [`crate::oidc`]'s relying party.
//!
//! - `GET /console/oidc/start` discovers the provider (once, again after a failure), begins a
//!   sign-in and sends the browser to the provider. The sign-in's state, nonce and PKCE
//!   verifier travel in a cookie sealed ([`super::session::seal`]) with AES-256-GCM under a key
//!   derived from the deployment's console key (every replica reads it from the store), so whichever replica
//!   the callback reaches can open it and the browser cannot read it. The cookie is
//!   `HttpOnly`, `Path=/console/oidc`, `SameSite=Lax` (the callback is a navigation from the
//!   provider's site, which a `Strict` cookie would not reach) and lasts [`PENDING_LIFETIME`].
//!   Starting is a link, not a form: it changes nothing stored, and the callback is bound to
//!   the browser that started it by that cookie and the `state` in it.
//! - `GET /console/oidc/callback` opens the cookie (and removes it: one try), has the relying
//!   party check `state`, redeem the code and verify the ID token, and maps the identity to a
//!   role with [`role_for`]: the highest role among the rules that match (a verified email's
//!   domain, or a group); none matching is refused. The person is the verified email's: added
//!   on a first sign-in (no password), their role set to the mapped one when it differs (the
//!   provider decides roles; recorded as `person.role`), refused when disabled here. The
//!   session cookie is `SameSite=Strict`, which a browser does not send on the rest of a
//!   redirect chain that began on the provider's site, so the callback answers with a page
//!   that moves on to the console (a same-site navigation) rather than a redirect.
//!
//! Every refusal shows the sign-in page with what failed (the relying party's message quotes
//! the offending value, shortened, never a secret), is recorded as `sign_in.failed` and spends
//! one of the address's sign-in attempts.

use std::time::Duration;

use actix_web::cookie::{Cookie, SameSite};
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use flowgate_domain::ids::PersonId;
use flowgate_domain::people::{AuditAction, Person, PersonUpdate, Role};
use time::OffsetDateTime;

use super::session::{SignInTokens, Who};
use super::{audit_entry, open_session, query_fields, record, sign_in_form, Console, Data};
use crate::oidc::{Identity, OidcClient, OidcSettings, PendingSignIn};

/// The cookie that carries a sign-in between the start and the callback.
pub(crate) const PENDING_COOKIE: &str = "flowgate_oidc";
/// Where that cookie is sent.
const PENDING_PATH: &str = "/console/oidc";
/// How long a person may take at the provider.
pub const PENDING_LIFETIME: Duration = Duration::from_secs(600);
/// The actor of refusals before anyone is known.
const OIDC_ACTOR: &str = "oidc";

/// What a rule of `console.oidc.roles` matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoleMatch {
    /// A verified email of this domain (case does not matter).
    EmailDomain(String),
    /// Membership of this group (exactly).
    Group(String),
}

/// One rule of `console.oidc.roles`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleRule {
    /// What it matches.
    pub matches: RoleMatch,
    /// The role it gives.
    pub role: Role,
}

/// `[console.oidc]`: the provider and who gets which role.
#[derive(Clone, Debug)]
pub struct OidcAccess {
    /// The relying party's settings.
    pub settings: OidcSettings,
    /// Who gets which role; none matching is refused.
    pub roles: Vec<RoleRule>,
}

/// The console's side of OpenID Connect: the settings, the rules and the relying party once
/// discovered.
pub(crate) struct OidcSignIn {
    access: OidcAccess,
    client: tokio::sync::OnceCell<OidcClient>,
}

impl OidcSignIn {
    pub(crate) fn new(access: OidcAccess) -> Self {
        Self {
            access,
            client: tokio::sync::OnceCell::new(),
        }
    }

    /// What the sign-in page's link says: the provider's host.
    pub(crate) fn label(&self) -> String {
        url::Url::parse(&self.access.settings.issuer)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_else(|| self.access.settings.issuer.clone())
    }

    /// The relying party, discovered on first use (and again after a failed discovery).
    async fn client(&self) -> Result<&OidcClient, crate::oidc::OidcError> {
        self.client
            .get_or_try_init(|| OidcClient::discover(self.access.settings.clone()))
            .await
    }
}

/// The highest role of the rules `identity` matches: an email domain rule needs a verified
/// email of that domain; a group rule, the group among the identity's groups.
pub fn role_for(identity: &Identity, rules: &[RoleRule]) -> Option<Role> {
    let domain = identity
        .email
        .as_deref()
        .filter(|_| identity.email_verified)
        .and_then(|email| email.rsplit_once('@'))
        .map(|(_, domain)| domain);
    rules
        .iter()
        .filter(|rule| match &rule.matches {
            RoleMatch::EmailDomain(want) => domain.is_some_and(|d| d.eq_ignore_ascii_case(want)),
            RoleMatch::Group(group) => identity.groups.iter().any(|g| g == group),
        })
        .map(|rule| rule.role)
        .max()
}

/// What pending sign-ins are sealed for.
const PURPOSE: &[u8] = b"flowgate console oidc pending sign-in v1";

/// `pending`, sealed for the cookie ([`super::session::seal`]).
fn seal(tokens: &SignInTokens, pending: &PendingSignIn) -> Result<String, getrandom::Error> {
    let json = serde_json::to_vec(pending)
        .unwrap_or_else(|_| unreachable!("a pending sign-in is plain strings and a time"));
    super::session::seal(tokens, PURPOSE, PENDING_COOKIE.as_bytes(), &json)
}

/// The pending sign-in `text` seals, when this deployment sealed it, it is not older than
/// [`PENDING_LIFETIME`] at `now` and not from the future.
fn open(tokens: &SignInTokens, text: &str, now: OffsetDateTime) -> Option<PendingSignIn> {
    let plain = super::session::open(tokens, PURPOSE, PENDING_COOKIE.as_bytes(), text)?;
    let pending: PendingSignIn = serde_json::from_slice(&plain).ok()?;
    let age = now - pending.created_at;
    let lifetime = time::Duration::seconds(i64::try_from(PENDING_LIFETIME.as_secs()).ok()?);
    (age <= lifetime && age >= -time::Duration::minutes(1)).then_some(pending)
}

/// The pending sign-in's cookie (`value` empty and `max_age` zero: its removal).
fn pending_cookie(req: &HttpRequest, value: String, max_age: Duration) -> Cookie<'static> {
    Cookie::build(PENDING_COOKIE, value)
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(req.connection_info().scheme() == "https")
        .path(PENDING_PATH)
        .max_age(time::Duration::seconds(
            i64::try_from(max_age.as_secs()).unwrap_or(i64::MAX),
        ))
        .finish()
}

/// The answer when the console's key or randomness is missing: 503, retry.
fn unavailable(what: &str) -> HttpResponse {
    HttpResponse::ServiceUnavailable()
        .insert_header((header::RETRY_AFTER, HeaderValue::from_static("5")))
        .body(format!(
            "The console cannot be signed in to now ({what}); retry in a moment."
        ))
}

/// `GET /console/oidc/start`: a new sign-in at the provider.
pub(crate) async fn start(req: HttpRequest, console: Data) -> HttpResponse {
    let Some(oidc) = console.oidc.as_ref() else {
        return super::not_found(req, console).await;
    };
    let client = match oidc.client().await {
        Ok(client) => client,
        Err(e) => {
            tracing::error!(error = %e, code = e.code(),
                "console: the OpenID provider could not be discovered");
            return sign_in_form(
                &console,
                &req,
                StatusCode::SERVICE_UNAVAILABLE,
                Some(&format!(
                    "{} cannot be reached now; retry in a moment, or sign in another way.",
                    oidc.label()
                )),
            )
            .await;
        }
    };
    let tokens = match console.sessions.sign_in_tokens().await {
        Ok(tokens) => tokens,
        Err(e) => {
            tracing::error!(error = %e, "console: the sign-in key could not be read");
            return unavailable("the sign-in key cannot be read");
        }
    };
    let Ok((url, pending)) = client.begin() else {
        return unavailable("no randomness");
    };
    let Ok(sealed) = seal(tokens, &pending) else {
        return unavailable("no randomness");
    };
    let mut response = super::see_other(&url);
    let _ = response.add_cookie(&pending_cookie(&req, sealed, PENDING_LIFETIME));
    response
}

/// A refused callback: recorded, counted against the address, the sign-in page with `message`.
async fn refused(
    console: &Console,
    req: &HttpRequest,
    status: StatusCode,
    target: Option<String>,
    reason: serde_json::Value,
    message: &str,
) -> HttpResponse {
    let client = crate::token_guard::client_of(req);
    console.guard.wrong_sign_in(client);
    let mut entry = audit_entry(OIDC_ACTOR, AuditAction::SignInFailed, target);
    entry.detail = serde_json::json!({"address": client.to_string(), "oidc": reason});
    record(console, entry).await;
    let mut response = sign_in_form(console, req, status, Some(message)).await;
    let _ = response.add_cookie(&pending_cookie(req, String::new(), Duration::ZERO));
    response
}

/// `GET /console/oidc/callback`: the provider's answer; a session when it vouches for someone
/// with a role here.
pub(crate) async fn callback(req: HttpRequest, console: Data) -> HttpResponse {
    let Some(oidc) = console.oidc.as_ref() else {
        return super::not_found(req, console).await;
    };
    let client_address = crate::token_guard::client_of(&req);
    if let Some(retry_after_secs) = console.guard.blocked(client_address) {
        return super::too_many(
            &console,
            &req,
            u64::from(retry_after_secs),
            "from this address",
        )
        .await;
    }
    let query = query_fields(&req);
    if let Some(answer) = provider_refusal(&console, &req, oidc, &query).await {
        return answer;
    }
    let now = OffsetDateTime::now_utc();
    let pending = match console.sessions.sign_in_tokens().await {
        Ok(tokens) => req
            .cookie(PENDING_COOKIE)
            .and_then(|c| open(tokens, c.value(), now)),
        Err(e) => {
            tracing::error!(error = %e, "console: the sign-in key could not be read");
            return unavailable("the sign-in key cannot be read");
        }
    };
    let Some(pending) = pending else {
        return refused(
            &console,
            &req,
            StatusCode::BAD_REQUEST,
            None,
            serde_json::json!({"code": "no_pending_sign_in"}),
            "This sign-in was not started in this browser, or took longer than 10 minutes; \
             sign in again.",
        )
        .await;
    };
    let client = match oidc.client().await {
        Ok(client) => client,
        Err(e) => {
            tracing::error!(error = %e, "console: the OpenID provider could not be discovered");
            return unavailable("the identity provider cannot be reached");
        }
    };
    let state = query.get("state").unwrap_or_default();
    let code = query.get("code").unwrap_or_default();
    let identity = match client.complete(&pending, state, code, now).await {
        Ok(identity) => identity,
        Err(e) => {
            tracing::warn!(error = %e, code = e.code(), "console: an OpenID sign-in was refused");
            return refused(
                &console,
                &req,
                StatusCode::UNAUTHORIZED,
                None,
                serde_json::json!({"code": e.code()}),
                &format!("The sign-in at {} was refused: {e}", oidc.label()),
            )
            .await;
        }
    };
    let person = match person_of(&console, &req, oidc, &identity).await {
        Ok(person) => person,
        Err(answer) => return answer,
    };
    let who = Who {
        person_id: Some(person.id),
        actor: person.email,
        role: person.role,
    };
    let mut response = open_session(&console, &req, who, Some(client_address.to_string())).await;
    if response.status() == StatusCode::SEE_OTHER {
        // The session cookie is SameSite=Strict: move on with a same-site navigation.
        let cookies: Vec<HeaderValue> = response
            .headers()
            .get_all(header::SET_COOKIE)
            .cloned()
            .collect();
        response = super::html(StatusCode::OK, super::pages::signed_in_elsewhere());
        for cookie in cookies {
            response.headers_mut().append(header::SET_COOKIE, cookie);
        }
    }
    let _ = response.add_cookie(&pending_cookie(&req, String::new(), Duration::ZERO));
    response
}

/// The provider's own refusal (`error` in the callback's query), as the page says it; `None`
/// when the provider sent a code.
async fn provider_refusal(
    console: &Console,
    req: &HttpRequest,
    oidc: &OidcSignIn,
    query: &super::Fields,
) -> Option<HttpResponse> {
    let error = query.get("error")?;
    let described: String = query
        .get("error_description")
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect();
    let error: String = error.chars().take(64).collect();
    let message = format!(
        "{} did not sign you in: {error}{}{described}",
        oidc.label(),
        if described.is_empty() { "" } else { ": " }
    );
    let answer = refused(
        console,
        req,
        StatusCode::UNAUTHORIZED,
        None,
        serde_json::json!({"code": "provider_error", "error": error}),
        &message,
    )
    .await;
    Some(answer)
}

/// The person `identity` signs in as: a role from `console.oidc.roles`, a verified email, and
/// the person of that email (added with that role on a first sign-in); the answer otherwise.
async fn person_of(
    console: &Console,
    req: &HttpRequest,
    oidc: &OidcSignIn,
    identity: &Identity,
) -> Result<Person, HttpResponse> {
    let target = identity.email.clone().or(Some(identity.subject.clone()));
    let Some(role) = role_for(identity, &oidc.access.roles) else {
        return Err(refused(
            console,
            req,
            StatusCode::FORBIDDEN,
            target,
            serde_json::json!({"code": "no_role", "subject": identity.subject}),
            "Your account at the identity provider has no role in this console \
             (console.oidc.roles); ask an admin.",
        )
        .await);
    };
    let email = match (&identity.email, identity.email_verified) {
        (Some(email), true) => email.clone(),
        _ => {
            return Err(refused(
                console,
                req,
                StatusCode::FORBIDDEN,
                target,
                serde_json::json!({"code": "no_verified_email", "subject": identity.subject}),
                "The identity provider did not vouch for an email address (a verified \
                 `email` claim), which the console names people by.",
            )
            .await);
        }
    };
    match person_for(console, &email, role).await {
        Ok(Some(person)) => Ok(person),
        Ok(None) => Err(refused(
            console,
            req,
            StatusCode::FORBIDDEN,
            target,
            serde_json::json!({"code": "disabled"}),
            "This account is disabled in the console; ask an admin.",
        )
        .await),
        Err(PersonRefusal::Email(message)) => Err(refused(
            console,
            req,
            StatusCode::FORBIDDEN,
            target,
            serde_json::json!({"code": "email"}),
            &message,
        )
        .await),
        Err(PersonRefusal::Store(e)) => {
            tracing::error!(error = %e, "console: an OpenID sign-in could not read the people");
            Err(unavailable("the people cannot be read"))
        }
    }
}

/// Why no person could be had for a verified email.
enum PersonRefusal {
    /// The email does not normalise (the message says why).
    Email(String),
    /// The store failed.
    Store(flowgate_domain::ports::StoreError),
}

/// The person of `email`, with `role`: added when new, their role set when it differs;
/// `None` when disabled.
async fn person_for(
    console: &Console,
    email: &str,
    role: Role,
) -> Result<Option<Person>, PersonRefusal> {
    let now = OffsetDateTime::now_utc();
    let found = console
        .people
        .person_by_email(email)
        .await
        .map_err(PersonRefusal::Store)?;
    let person = match found {
        Some(person) if person.disabled => return Ok(None),
        Some(person) if person.role == role => person,
        Some(person) => {
            let from = person.role;
            let update = PersonUpdate {
                role: Some(role),
                ..PersonUpdate::default()
            };
            let Some(updated) = console
                .people
                .update_person(person.id, update, now)
                .await
                .map_err(PersonRefusal::Store)?
            else {
                return Ok(None);
            };
            let mut entry = audit_entry(
                OIDC_ACTOR,
                AuditAction::PersonRole,
                Some(updated.email.clone()),
            );
            entry.detail = serde_json::json!({"from": from.as_str(), "to": role.as_str()});
            record(console, entry).await;
            updated
        }
        None => {
            let person = Person::new(PersonId::new_v7(now), email, role, now)
                .map_err(|e| PersonRefusal::Email(e.to_string()))?;
            match console.people.add_person(person.clone()).await {
                Ok(()) => {}
                // Two first sign-ins at once: the other added them.
                Err(flowgate_domain::ports::StoreError::Conflict { .. }) => {
                    return match console.people.person_by_email(email).await {
                        Ok(Some(p)) if !p.disabled => Ok(Some(p)),
                        Ok(_) => Ok(None),
                        Err(e) => Err(PersonRefusal::Store(e)),
                    };
                }
                Err(e) => return Err(PersonRefusal::Store(e)),
            }
            let mut entry = audit_entry(
                OIDC_ACTOR,
                AuditAction::PersonAdd,
                Some(person.email.clone()),
            );
            entry.detail = serde_json::json!({"role": role.as_str()});
            record(console, entry).await;
            person
        }
    };
    Ok(Some(person))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine as _;

    fn identity(email: Option<&str>, verified: bool, groups: &[&str]) -> Identity {
        Identity {
            subject: "sub-1".into(),
            email: email.map(str::to_owned),
            email_verified: verified,
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        }
    }

    fn rules() -> Vec<RoleRule> {
        vec![
            RoleRule {
                matches: RoleMatch::EmailDomain("example.com".into()),
                role: Role::Viewer,
            },
            RoleRule {
                matches: RoleMatch::Group("growth".into()),
                role: Role::Editor,
            },
            RoleRule {
                matches: RoleMatch::Group("platform".into()),
                role: Role::Admin,
            },
        ]
    }

    #[test]
    fn the_highest_matching_role_wins_and_an_unverified_email_matches_no_domain() {
        let rules = rules();
        let ada = identity(Some("ada@Example.COM"), true, &[]);
        assert_eq!(role_for(&ada, &rules), Some(Role::Viewer));
        let growth = identity(Some("bo@example.com"), true, &["growth", "platform"]);
        assert_eq!(role_for(&growth, &rules), Some(Role::Admin));
        let unverified = identity(Some("eve@example.com"), false, &[]);
        assert_eq!(role_for(&unverified, &rules), None);
        // A look-alike domain is another domain.
        let other = identity(Some("eve@evil-example.com"), true, &["Growth"]);
        assert_eq!(role_for(&other, &rules), None);
        let groups_only = identity(None, false, &["growth"]);
        assert_eq!(role_for(&groups_only, &rules), Some(Role::Editor));
    }

    fn pending(at: OffsetDateTime) -> PendingSignIn {
        PendingSignIn {
            state: "s".repeat(64),
            nonce: "n".repeat(64),
            verifier: "v".repeat(64),
            created_at: at,
        }
    }

    #[test]
    fn a_sealed_sign_in_opens_only_with_its_key_unaltered_and_in_time() {
        let tokens = SignInTokens::with_key([7; 32]);
        let now = OffsetDateTime::now_utc().replace_nanosecond(0).unwrap();
        let sealed = seal(&tokens, &pending(now)).unwrap();
        assert!(sealed.starts_with("v1."), "{sealed}");
        // Neither the verifier nor the nonce can be read from the cookie.
        assert!(!sealed.contains("vvvv") && !sealed.contains("nnnn"));
        assert_eq!(open(&tokens, &sealed, now), Some(pending(now)));
        // Sealed twice, two cookies (a fresh nonce each time).
        assert_ne!(sealed, seal(&tokens, &pending(now)).unwrap());
        // Another deployment's key, or one flipped bit, opens nothing.
        let other = SignInTokens::with_key([8; 32]);
        assert_eq!(open(&other, &sealed, now), None);
        let mut bytes = URL_SAFE_NO_PAD.decode(&sealed[3..]).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let flipped = format!("v1.{}", URL_SAFE_NO_PAD.encode(bytes));
        assert_eq!(open(&tokens, &flipped, now), None);
        // Too old, from the future, another version, not base64.
        let late = now + time::Duration::seconds(601);
        assert_eq!(open(&tokens, &sealed, late), None);
        let early = now - time::Duration::minutes(2);
        assert_eq!(open(&tokens, &sealed, early), None);
        assert_eq!(open(&tokens, &sealed.replacen("v1.", "v2.", 1), now), None);
        assert_eq!(open(&tokens, "v1.%%%", now), None);
        assert_eq!(open(&tokens, "", now), None);
    }
}
