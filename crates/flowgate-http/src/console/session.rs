//! The console's sessions and CSRF tokens (D24, D28).
//!
//! Signing in opens a session: a random 256-bit id in a cookie (`HttpOnly`, `SameSite=Strict`,
//! `Path=/console`, `Secure` over TLS, expiring with the session) and a CSRF token of its own,
//! which every form of the session carries and every post must return. Sessions live in the
//! store ([`PeopleStore`]), keyed by the SHA-256 of the id (the id itself is never stored), so
//! any replica serves any session, a restart signs nobody out, and a person's sessions can be
//! listed and ended.
//!
//! Login CSRF (issue 65). The sign-in form, which has no session yet, is bound to a
//! pre-session cookie of its own, set when the form is served: a pre-session id that a replica
//! of this deployment issued (random bits and the time of issue, signed with HMAC-SHA-256
//! under a key every replica reads from the store, [`PeopleStore::console_secret`], drawn by
//! the first; accepted for an hour). The form carries another value, the HMAC of that id under
//! a key derived for the purpose, so the form's token is not the cookie and a post must carry
//! both, matching. A pair made up elsewhere is refused. A pair fetched from the server and
//! planted in a browser is refused too where it matters: over TLS the cookie is
//! `__Host-flowgate_console_sign_in`, which browsers let no other host (a sibling domain
//! included) set; and a post the browser marks as sent from another origin
//! (`Sec-Fetch-Site` other than `same-origin` or `none`) is refused whatever it carries.

use std::sync::Arc;
use std::time::Duration;

use actix_web::cookie::{Cookie, SameSite};
use actix_web::HttpRequest;
use flowgate_domain::ids::PersonId;
use flowgate_domain::people::{sha256_hex, Role, SessionRecord};
use flowgate_domain::ports::{PeopleStore, StoreError};
use time::OffsetDateTime;

/// The session cookie.
pub(crate) const SESSION_COOKIE: &str = "flowgate_console";
/// The sign-in form's pre-session cookie over plain HTTP.
pub(crate) const SIGN_IN_COOKIE: &str = "flowgate_console_sign_in";
/// The sign-in form's pre-session cookie over TLS: with the `__Host-` prefix, a browser takes
/// it only from this host, secure, for the path `/`.
pub(crate) const SIGN_IN_COOKIE_TLS: &str = "__Host-flowgate_console_sign_in";
/// What the sign-in form's token is derived for (from the console key).
const FORM_TOKEN_PURPOSE: &[u8] = b"flowgate console sign-in form token v1";
/// The cookie of a key just created (sealed).
pub(crate) const NEW_KEY_COOKIE: &str = "flowgate_new_key";
/// Where a key just created is shown, once.
pub(crate) const NEW_KEY_PATH: &str = "/console/keys/created";
/// Where the console's cookies are sent.
const COOKIE_PATH: &str = "/console";
/// How long a sign-in form may be left open before it is posted.
const SIGN_IN_FORM_LIFETIME: Duration = Duration::from_secs(3600);

/// One open session.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    /// The SHA-256 of its id (the cookie's value): how the store knows it.
    pub id_hash: String,
    /// The token its forms carry.
    pub csrf: String,
    /// Who: the person's email, or `admin-token`.
    pub actor: String,
    /// What the session may do.
    pub role: Role,
    /// The person, `None` for the admin token's session.
    pub person_id: Option<PersonId>,
}

impl Session {
    fn of_record(record: SessionRecord) -> Self {
        Self {
            id_hash: record.id_hash,
            csrf: record.csrf,
            actor: record.actor,
            role: record.role,
            person_id: record.person_id,
        }
    }
}

/// Who a new session is for.
#[derive(Clone, Debug)]
pub(crate) struct Who {
    /// The person, `None` for the admin token.
    pub person_id: Option<PersonId>,
    /// The person's email, or `admin-token`.
    pub actor: String,
    /// The role the session acts with.
    pub role: Role,
}

/// Why a session could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    /// No random bytes for an id.
    #[error("no randomness for a session: {0}")]
    Random(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The sessions, in the store.
pub(crate) struct Sessions {
    lifetime: Duration,
    people: Arc<dyn PeopleStore>,
    /// The sign-in form's token signer, its key read from the store once.
    tokens: tokio::sync::OnceCell<SignInTokens>,
}

impl From<getrandom::Error> for SessionError {
    fn from(e: getrandom::Error) -> Self {
        Self::Random(e.to_string())
    }
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

/// Signs and checks the sign-in form's tokens: 8 random bytes, the issue time (8 bytes, seconds
/// since the Unix epoch) and the first 16 bytes of their HMAC-SHA-256 under the deployment's
/// console key, as 64 hex digits. Stateless, so a flood of sign-in pages stores nothing.
pub(crate) struct SignInTokens {
    key: [u8; 32],
}

impl std::fmt::Debug for SignInTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SignInTokens(<key>)")
    }
}

/// HMAC-SHA-256 (RFC 2104) of `message` under a 32-byte `key`, by RustCrypto's `hmac`.
fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> hmac::Hmac<hmac_sha2::Sha256> {
    use hmac::{KeyInit, Mac};
    let mut mac = <hmac::Hmac<hmac_sha2::Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
    mac.update(message);
    mac
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

impl SignInTokens {
    /// A new signing key from the operating system.
    #[cfg(test)]
    pub fn new() -> Result<Self, getrandom::Error> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key)?;
        Ok(Self { key })
    }

    /// Signing with `key`.
    pub fn with_key(key: [u8; 32]) -> Self {
        Self { key }
    }

    /// A key for `purpose`, derived from the console key (HMAC-SHA-256 of the purpose).
    pub fn derive(&self, purpose: &[u8]) -> [u8; 32] {
        use hmac::Mac;
        hmac_sha256(&self.key, purpose)
            .finalize()
            .into_bytes()
            .into()
    }

    fn sign(&self, body: &[u8; 16]) -> [u8; 16] {
        use hmac::Mac;
        let mac = hmac_sha256(&self.key, body).finalize().into_bytes();
        let mut head = [0u8; 16];
        head.copy_from_slice(&mac[..16]);
        head
    }

    /// A sign-in form issued now: its pre-session id and its token.
    pub fn issue(&self) -> Result<SignInForm, getrandom::Error> {
        let cookie = self.issue_at(time::OffsetDateTime::now_utc().unix_timestamp())?;
        Ok(SignInForm {
            token: self.form_token(&cookie),
            cookie,
        })
    }

    /// The token of the form bound to pre-session id `cookie`: HMAC-SHA-256 of the id under the
    /// key derived for [`FORM_TOKEN_PURPOSE`], as 64 hex digits.
    pub fn form_token(&self, cookie: &str) -> String {
        use hmac::Mac;
        let key = self.derive(FORM_TOKEN_PURPOSE);
        hex(&hmac_sha256(&key, cookie.as_bytes()).finalize().into_bytes())
    }

    fn issue_at(&self, now: i64) -> Result<String, getrandom::Error> {
        let mut body = [0u8; 16];
        getrandom::fill(&mut body[..8])?;
        body[8..].copy_from_slice(&now.to_be_bytes());
        Ok(format!("{}{}", hex(&body), hex(&self.sign(&body))))
    }

    /// Whether `token` is one this process issued within [`SIGN_IN_FORM_LIFETIME`].
    pub fn issued(&self, token: &str) -> bool {
        self.issued_at(token, time::OffsetDateTime::now_utc().unix_timestamp())
    }

    fn issued_at(&self, token: &str, now: i64) -> bool {
        let Some(bytes) = unhex(token).filter(|b| b.len() == 32) else {
            return false;
        };
        let mut body = [0u8; 16];
        body.copy_from_slice(&bytes[..16]);
        // Constant time, on the first 16 bytes of the MAC.
        if hmac::Mac::verify_truncated_left(hmac_sha256(&self.key, &body), &bytes[16..]).is_err() {
            return false;
        }
        let mut at = [0u8; 8];
        at.copy_from_slice(&body[8..]);
        let age = now.saturating_sub(i64::from_be_bytes(at));
        let lifetime = i64::try_from(SIGN_IN_FORM_LIFETIME.as_secs()).unwrap_or(i64::MAX);
        (0..=lifetime).contains(&age)
    }
}

/// A sign-in form just issued.
#[derive(Debug)]
pub(crate) struct SignInForm {
    /// The pre-session id, for the cookie.
    pub cookie: String,
    /// The token, for the form.
    pub token: String,
}

/// The sealed form's version prefix.
const SEALED_PREFIX: &str = "v1.";

/// `plain` sealed with AES-256-GCM (`ring`) under the console key's derivation for `purpose`,
/// bound to `bound` (associated data): `v1.` and base64url of a random 96-bit nonce, the
/// ciphertext and the tag. For what a cookie carries that the browser must not read or alter
/// and any replica must open.
pub(crate) fn seal(
    tokens: &SignInTokens,
    purpose: &[u8],
    bound: &[u8],
    plain: &[u8],
) -> Result<String, getrandom::Error> {
    use base64::Engine as _;
    let mut nonce = [0u8; 12];
    getrandom::fill(&mut nonce)?;
    let mut bytes = plain.to_vec();
    sealing_key(tokens, purpose)
        .seal_in_place_append_tag(
            ring::aead::Nonce::assume_unique_for_key(nonce),
            ring::aead::Aad::from(bound),
            &mut bytes,
        )
        .unwrap_or_else(|_| unreachable!("a cookie's few hundred bytes fit AES-GCM"));
    let mut sealed = nonce.to_vec();
    sealed.extend_from_slice(&bytes);
    Ok(format!(
        "{SEALED_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sealed)
    ))
}

/// What [`seal`] sealed in `text` for `purpose` and `bound`; `None` for anything else (another
/// key, purpose or binding, one altered bit, another version, not base64, over 4 KiB).
pub(crate) fn open(
    tokens: &SignInTokens,
    purpose: &[u8],
    bound: &[u8],
    text: &str,
) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let sealed = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.strip_prefix(SEALED_PREFIX)?)
        .ok()?;
    if sealed.len() < 12 + 16 || sealed.len() > 4096 {
        return None;
    }
    let (nonce, rest) = sealed.split_at(12);
    let mut rest = rest.to_vec();
    let nonce = ring::aead::Nonce::try_assume_unique_for_key(nonce).ok()?;
    let plain = sealing_key(tokens, purpose)
        .open_in_place(nonce, ring::aead::Aad::from(bound), &mut rest)
        .ok()?;
    Some(plain.to_vec())
}

fn sealing_key(tokens: &SignInTokens, purpose: &[u8]) -> ring::aead::LessSafeKey {
    let key = tokens.derive(purpose);
    let unbound = ring::aead::UnboundKey::new(&ring::aead::AES_256_GCM, &key)
        .unwrap_or_else(|_| unreachable!("AES-256-GCM takes a 32-byte key"));
    ring::aead::LessSafeKey::new(unbound)
}

/// 32 random bytes from the operating system, as 64 hex digits.
pub(crate) fn random_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl Sessions {
    /// The sessions of `people`; each one opened lasts `lifetime`.
    pub fn new(lifetime: Duration, people: Arc<dyn PeopleStore>) -> Self {
        Self {
            lifetime,
            people,
            tokens: tokio::sync::OnceCell::new(),
        }
    }

    /// How long a session lasts.
    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }

    /// The sign-in form's token signer, under the deployment's key (drawn by the first replica
    /// to ask, then read).
    pub async fn sign_in_tokens(&self) -> Result<&SignInTokens, SessionError> {
        self.tokens
            .get_or_try_init(|| async {
                let mut candidate = [0u8; 32];
                getrandom::fill(&mut candidate)?;
                let key = self.people.console_secret(candidate).await?;
                Ok::<_, SessionError>(SignInTokens::with_key(key))
            })
            .await
    }

    /// Opens a session for `who`; the id to set in the cookie comes back with it.
    pub async fn open(
        &self,
        who: Who,
        address: Option<String>,
    ) -> Result<(String, Session), SessionError> {
        let id = random_token()?;
        let now = OffsetDateTime::now_utc();
        let lifetime =
            time::Duration::seconds(i64::try_from(self.lifetime.as_secs()).unwrap_or(i64::MAX));
        let record = SessionRecord {
            id_hash: sha256_hex(id.as_bytes()),
            person_id: who.person_id,
            actor: who.actor,
            role: who.role,
            csrf: random_token()?,
            created_at: now,
            expires_at: now + lifetime,
            address,
        };
        self.people.create_session(record.clone()).await?;
        Ok((id, Session::of_record(record)))
    }

    /// The session of the request's cookie, when open and not expired.
    pub async fn of(&self, req: &HttpRequest) -> Result<Option<Session>, StoreError> {
        let Some(cookie) = req.cookie(SESSION_COOKIE) else {
            return Ok(None);
        };
        // A session id is 64 hex digits: anything else is no session, without a store read.
        if cookie.value().len() != 64 || !cookie.value().bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let hash = sha256_hex(cookie.value().as_bytes());
        let found = self
            .people
            .session(&hash, OffsetDateTime::now_utc())
            .await?;
        Ok(found.map(Session::of_record))
    }

    /// Closes a session (signing out).
    pub async fn close(&self, session: &Session) -> Result<(), StoreError> {
        self.people.delete_session(&session.id_hash).await?;
        Ok(())
    }
}

/// Whether the request came over TLS (directly, or as a proxy in front of the admin listener
/// says with `Forwarded`/`X-Forwarded-Proto`): the cookies are then `Secure`.
fn over_tls(req: &HttpRequest) -> bool {
    req.connection_info().scheme() == "https"
}

/// A console cookie: `HttpOnly`, `SameSite=Strict`, `Path=/console`, `Secure` over TLS,
/// expiring after `max_age`.
fn cookie(
    req: &HttpRequest,
    name: &'static str,
    value: String,
    max_age: Duration,
) -> Cookie<'static> {
    let max_age = time::Duration::seconds(i64::try_from(max_age.as_secs()).unwrap_or(i64::MAX));
    Cookie::build(name, value)
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(over_tls(req))
        .path(COOKIE_PATH)
        .max_age(max_age)
        .finish()
}

/// The cookie that carries a session's `id`.
pub(crate) fn session_cookie(req: &HttpRequest, id: String, lifetime: Duration) -> Cookie<'static> {
    cookie(req, SESSION_COOKIE, id, lifetime)
}

/// The cookie that carries a key just created to the page that shows it once (sealed), or
/// removes it (`value` empty, `max_age` zero).
pub(crate) fn new_key_cookie(
    req: &HttpRequest,
    value: String,
    max_age: Duration,
) -> Cookie<'static> {
    let mut cookie = cookie(req, NEW_KEY_COOKIE, value, max_age);
    cookie.set_path(NEW_KEY_PATH);
    cookie
}

/// The name of the sign-in form's cookie for `req`: [`SIGN_IN_COOKIE_TLS`] over TLS.
fn sign_in_cookie_name(req: &HttpRequest) -> &'static str {
    if over_tls(req) {
        SIGN_IN_COOKIE_TLS
    } else {
        SIGN_IN_COOKIE
    }
}

/// The sign-in form's pre-session cookie, holding `pre_session` (its id); `Path=/` over TLS,
/// as the `__Host-` prefix requires.
pub(crate) fn sign_in_cookie(req: &HttpRequest, pre_session: String) -> Cookie<'static> {
    let mut cookie = cookie(
        req,
        sign_in_cookie_name(req),
        pre_session,
        SIGN_IN_FORM_LIFETIME,
    );
    if over_tls(req) {
        cookie.set_path("/");
    }
    cookie
}

/// A cookie that removes the sign-in form's cookie from the browser.
pub(crate) fn sign_in_removal(req: &HttpRequest) -> Cookie<'static> {
    let mut cookie = sign_in_cookie(req, String::new());
    cookie.set_max_age(time::Duration::ZERO);
    cookie
}

/// Whether the browser says the request was sent by a page of another origin (a sibling
/// domain's included): `Sec-Fetch-Site` present and neither `same-origin` nor `none` (typed
/// or bookmarked). Browsers set the header themselves; a page cannot forge it.
fn from_another_origin(req: &HttpRequest) -> bool {
    req.headers()
        .get("sec-fetch-site")
        .is_some_and(|site| !matches!(site.as_bytes(), b"same-origin" | b"none"))
}

/// A cookie that removes cookie `name` from the browser.
pub(crate) fn removal(req: &HttpRequest, name: &'static str) -> Cookie<'static> {
    cookie(req, name, String::new(), Duration::ZERO)
}

/// Whether a sign-in form's post is good: sent from this console's own pages, carrying its
/// pre-session cookie (one `tokens` issued within the hour) and the form's `token` bound to
/// it.
pub(crate) fn sign_in_token_matches(req: &HttpRequest, tokens: &SignInTokens, token: &str) -> bool {
    if from_another_origin(req) {
        return false;
    }
    req.cookie(sign_in_cookie_name(req)).is_some_and(|c| {
        !c.value().is_empty()
            && tokens.issued(c.value())
            && crate::access::same_secret(token.as_bytes(), tokens.form_token(c.value()).as_bytes())
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use actix_web::test::TestRequest;
    use flowgate_domain::memory::InMemoryStore;

    fn sessions(lifetime: Duration) -> (Arc<InMemoryStore>, Sessions) {
        let store = Arc::new(InMemoryStore::default());
        let sessions = Sessions::new(lifetime, store.clone());
        (store, sessions)
    }

    fn admin() -> Who {
        Who {
            person_id: None,
            actor: "admin-token".into(),
            role: Role::Admin,
        }
    }

    #[tokio::test]
    async fn a_session_is_found_by_its_cookie_until_closed_and_only_its_hash_is_stored() {
        let (store, sessions) = sessions(Duration::from_secs(60));
        let (id, session) = sessions.open(admin(), None).await.unwrap();
        assert_eq!(id.len(), 64);
        assert_ne!(id, session.csrf);
        assert_eq!(session.id_hash, sha256_hex(id.as_bytes()));
        let stored = store.all_sessions(OffsetDateTime::now_utc()).await.unwrap();
        assert_eq!(stored.len(), 1);
        assert_ne!(stored[0].id_hash, id, "the id itself is not stored");
        let req = TestRequest::default()
            .cookie(Cookie::new(SESSION_COOKIE, id.clone()))
            .to_http_request();
        let found = sessions.of(&req).await.unwrap().unwrap();
        assert_eq!(
            (found.csrf, found.role),
            (session.csrf.clone(), Role::Admin)
        );
        // Another replica (another Sessions over the same store) knows it too.
        let other_replica = Sessions::new(Duration::from_secs(60), store.clone());
        assert!(other_replica.of(&req).await.unwrap().is_some());
        for forged in ["0".repeat(64), "zz".repeat(32), id[..63].to_owned()] {
            let other = TestRequest::default()
                .cookie(Cookie::new(SESSION_COOKIE, forged))
                .to_http_request();
            assert!(sessions.of(&other).await.unwrap().is_none());
        }
        sessions.close(&session).await.unwrap();
        assert!(sessions.of(&req).await.unwrap().is_none());
        assert!(other_replica.of(&req).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn an_expired_session_is_gone() {
        let (_, sessions) = sessions(Duration::ZERO);
        let (id, _) = sessions.open(admin(), None).await.unwrap();
        let req = TestRequest::default()
            .cookie(Cookie::new(SESSION_COOKIE, id))
            .to_http_request();
        assert!(sessions.of(&req).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn every_replica_signs_sign_in_forms_with_the_same_key() {
        let (store, a) = sessions(Duration::from_secs(60));
        let b = Sessions::new(Duration::from_secs(60), store.clone());
        let form = a.sign_in_tokens().await.unwrap().issue().unwrap();
        let b_tokens = b.sign_in_tokens().await.unwrap();
        assert!(b_tokens.issued(&form.cookie));
        assert_eq!(b_tokens.form_token(&form.cookie), form.token);
        let (_, elsewhere) = sessions(Duration::from_secs(60));
        assert!(!elsewhere
            .sign_in_tokens()
            .await
            .unwrap()
            .issued(&form.cookie));
    }

    #[test]
    fn hmac_sha256_is_rfc_4231s() {
        // RFC 4231 test case 2's message and MAC, under its key padded to 32 bytes with zeros
        // (HMAC pads a short key with zeros, so the MAC is the same).
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        assert_eq!(
            hex(
                &hmac::Mac::finalize(hmac_sha256(&key, b"what do ya want for nothing?"))
                    .into_bytes()
            ),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn only_tokens_issued_here_and_recently_are_accepted() {
        let tokens = SignInTokens::new().unwrap();
        let now = 1_700_000_000;
        let token = tokens.issue_at(now).unwrap();
        assert_eq!(token.len(), 64);
        assert!(tokens.issued_at(&token, now));
        assert!(tokens.issued_at(&token, now + 3600));
        assert!(!tokens.issued_at(&token, now + 3601), "expired");
        assert!(!tokens.issued_at(&token, now - 10), "from the future");
        let other = SignInTokens::new().unwrap();
        assert!(!other.issued_at(&token, now), "another process's key");
        for forged in [
            "0".repeat(64),
            random_token().unwrap(),
            format!(
                "{}{}",
                &token[..63],
                if token.ends_with('0') { '1' } else { '0' }
            ),
            token[..62].to_owned(),
            "zz".repeat(32),
        ] {
            assert!(!tokens.issued_at(&forged, now), "{forged}");
        }
    }

    /// Issue 65 (login CSRF): the form's token is bound to its pre-session cookie and is not
    /// the cookie; a post needs both, matching, and is refused when the browser says another
    /// origin sent it. Over TLS the cookie is `__Host-` prefixed (no sibling domain can set it).
    #[test]
    fn a_sign_in_post_needs_the_pre_session_cookie_and_its_bound_token() {
        let tokens = SignInTokens::new().unwrap();
        let form = tokens.issue().unwrap();
        assert_ne!(form.token, form.cookie, "the token is not the cookie");
        let post = |cookie: &str, headers: &[(&str, &str)]| {
            let mut req =
                TestRequest::post().cookie(Cookie::new(SIGN_IN_COOKIE, cookie.to_owned()));
            for header in headers {
                req = req.insert_header(*header);
            }
            req.to_http_request()
        };
        assert!(sign_in_token_matches(
            &post(&form.cookie, &[]),
            &tokens,
            &form.token
        ));
        let same_origin = [("sec-fetch-site", "same-origin")];
        assert!(sign_in_token_matches(
            &post(&form.cookie, &same_origin),
            &tokens,
            &form.token
        ));
        // The old double submit (the cookie's value as the token) no longer signs in.
        assert!(!sign_in_token_matches(
            &post(&form.cookie, &[]),
            &tokens,
            &form.cookie
        ));
        // Another form's token, or a cookie this deployment did not issue, is refused.
        let other = tokens.issue().unwrap();
        assert!(!sign_in_token_matches(
            &post(&form.cookie, &[]),
            &tokens,
            &other.token
        ));
        let forged = random_token().unwrap();
        let forged_token = tokens.form_token(&forged);
        assert!(!sign_in_token_matches(
            &post(&forged, &[]),
            &tokens,
            &forged_token
        ));
        // A pair fetched from the server and planted, posted from a sibling or another site.
        for site in ["same-site", "cross-site"] {
            let req = post(&form.cookie, &[("sec-fetch-site", site)]);
            assert!(!sign_in_token_matches(&req, &tokens, &form.token), "{site}");
        }
        // Over TLS only the `__Host-` cookie counts.
        let tls = [("x-forwarded-proto", "https")];
        assert!(!sign_in_token_matches(
            &post(&form.cookie, &tls),
            &tokens,
            &form.token
        ));
        let host = TestRequest::post()
            .insert_header(tls[0])
            .cookie(Cookie::new(SIGN_IN_COOKIE_TLS, form.cookie.clone()))
            .to_http_request();
        assert!(sign_in_token_matches(&host, &tokens, &form.token));
        let set = sign_in_cookie(&host, form.cookie.clone()).to_string();
        assert!(
            set.starts_with("__Host-flowgate_console_sign_in=")
                && set.contains("Path=/;")
                && set.contains("Secure"),
            "{set}"
        );
    }

    #[test]
    fn cookies_are_http_only_strict_and_secure_behind_tls() {
        let plain = TestRequest::default().to_http_request();
        let c = sign_in_cookie(&plain, "t".into());
        let text = c.to_string();
        assert!(
            text.contains("HttpOnly") && text.contains("SameSite=Strict"),
            "{text}"
        );
        assert!(
            text.contains("Path=/console") && text.contains("Max-Age=3600"),
            "{text}"
        );
        assert!(!text.contains("Secure"), "{text}");
        let tls = TestRequest::default()
            .insert_header(("x-forwarded-proto", "https"))
            .to_http_request();
        assert!(sign_in_cookie(&tls, "t".into())
            .to_string()
            .contains("Secure"));
    }
}
