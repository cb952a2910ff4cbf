//! The console's sessions and CSRF tokens (D24).
//!
//! Signing in with the admin token opens a session: a random 256-bit id in a cookie
//! (`HttpOnly`, `SameSite=Strict`, `Path=/console`, `Secure` over TLS, expiring with the
//! session) and a CSRF token of its own, which every form of the session carries and every post
//! must return. Sessions live in this process's memory: signing out or expiring removes one,
//! and a restart signs everyone out. The sign-in form, which has no session yet, carries a token
//! that must equal a cookie set with the form (a double-submit token) and that this server
//! issued: random bits and the time of issue, signed with HMAC-SHA-256 under a key drawn when
//! the process starts ([`SignInTokens`]), and accepted for an hour. A pair of cookie and field
//! made up elsewhere (say, a cookie planted by a sibling domain) is refused, so another site
//! cannot sign a browser in either.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use actix_web::cookie::{Cookie, SameSite};
use actix_web::HttpRequest;

use super::NewKey;

/// The session cookie.
pub(crate) const SESSION_COOKIE: &str = "flowgate_console";
/// The sign-in form's double-submit cookie.
pub(crate) const SIGN_IN_COOKIE: &str = "flowgate_console_sign_in";
/// Where the console's cookies are sent.
const COOKIE_PATH: &str = "/console";
/// How long a sign-in form may be left open before it is posted.
const SIGN_IN_FORM_LIFETIME: Duration = Duration::from_secs(3600);
/// Open sessions at most; the oldest is closed to open another (operators are few).
const MAX_SESSIONS: usize = 256;

/// One open session.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    /// Its id (the cookie's value).
    pub id: String,
    /// The token its forms carry.
    pub csrf: String,
    expires: Instant,
}

/// The open sessions.
#[derive(Debug)]
pub(crate) struct Sessions {
    lifetime: Duration,
    open: Mutex<HashMap<String, Session>>,
    /// A key each session created and has not shown yet (by session id): the key creation's
    /// post redirects to the page that shows it once (Post/Redirect/Get).
    held: Mutex<HashMap<String, NewKey>>,
}

/// Signs and checks the sign-in form's tokens: 8 random bytes, the issue time (8 bytes, seconds
/// since the Unix epoch) and the first 16 bytes of their HMAC-SHA-256 under a per-process key,
/// as 64 hex digits. Stateless, so a flood of sign-in pages stores nothing.
pub(crate) struct SignInTokens {
    key: [u8; 32],
}

impl std::fmt::Debug for SignInTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SignInTokens(<key>)")
    }
}

/// HMAC-SHA-256 (RFC 2104) of `message` under a 32-byte `key`, by RustCrypto's `hmac`.
fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> hmac::Hmac<sha2::Sha256> {
    use hmac::{KeyInit, Mac};
    let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key)
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
    pub fn new() -> Result<Self, getrandom::Error> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key)?;
        Ok(Self { key })
    }

    fn sign(&self, body: &[u8; 16]) -> [u8; 16] {
        use hmac::Mac;
        let mac = hmac_sha256(&self.key, body).finalize().into_bytes();
        let mut head = [0u8; 16];
        head.copy_from_slice(&mac[..16]);
        head
    }

    /// A token issued now.
    pub fn issue(&self) -> Result<String, getrandom::Error> {
        self.issue_at(time::OffsetDateTime::now_utc().unix_timestamp())
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

/// 32 random bytes from the operating system, as 64 hex digits.
pub(crate) fn random_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl Sessions {
    /// No session yet; each one opened lasts `lifetime`.
    pub fn new(lifetime: Duration) -> Self {
        Self {
            lifetime,
            open: Mutex::new(HashMap::new()),
            held: Mutex::new(HashMap::new()),
        }
    }

    /// How long a session lasts.
    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        // A panic while holding the map leaves it consistent (every change is one call).
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens a session.
    pub fn open(&self) -> Result<Session, getrandom::Error> {
        let session = Session {
            id: random_token()?,
            csrf: random_token()?,
            expires: Instant::now() + self.lifetime,
        };
        let mut open = self.lock();
        if open.len() >= MAX_SESSIONS {
            let now = Instant::now();
            open.retain(|_, s| s.expires > now);
        }
        if open.len() >= MAX_SESSIONS {
            let oldest = open
                .values()
                .min_by_key(|s| s.expires)
                .map(|s| s.id.clone());
            if let Some(oldest) = oldest {
                open.remove(&oldest);
            }
        }
        open.insert(session.id.clone(), session.clone());
        Ok(session)
    }

    /// The session of the request's cookie, when open and not expired.
    pub fn of(&self, req: &HttpRequest) -> Option<Session> {
        let cookie = req.cookie(SESSION_COOKIE)?;
        let mut open = self.lock();
        let session = open.get(cookie.value())?;
        if session.expires <= Instant::now() {
            open.remove(cookie.value());
            return None;
        }
        Some(session.clone())
    }

    /// Closes a session (signing out).
    pub fn close(&self, session: &Session) {
        self.lock().remove(&session.id);
        self.held().remove(&session.id);
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, NewKey>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Holds `key`, just created by `session`, until the session's next look at it (one). Keys
    /// held for sessions no longer open are dropped.
    pub fn hold_new_key(&self, session: &Session, key: NewKey) {
        let open = self.lock();
        let mut held = self.held();
        held.retain(|id, _| open.contains_key(id));
        held.insert(session.id.clone(), key);
    }

    /// The key `session` created and has not seen yet; it is then forgotten (shown once).
    pub fn take_new_key(&self, session: &Session) -> Option<NewKey> {
        self.held().remove(&session.id)
    }

    /// Open sessions (for tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().len()
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

/// The cookie that carries `session`.
pub(crate) fn session_cookie(
    req: &HttpRequest,
    session: &Session,
    lifetime: Duration,
) -> Cookie<'static> {
    cookie(req, SESSION_COOKIE, session.id.clone(), lifetime)
}

/// The sign-in form's cookie, holding `token`.
pub(crate) fn sign_in_cookie(req: &HttpRequest, token: String) -> Cookie<'static> {
    cookie(req, SIGN_IN_COOKIE, token, SIGN_IN_FORM_LIFETIME)
}

/// A cookie that removes cookie `name` from the browser.
pub(crate) fn removal(req: &HttpRequest, name: &'static str) -> Cookie<'static> {
    cookie(req, name, String::new(), Duration::ZERO)
}

/// Whether the sign-in form's `token` is the one its cookie holds, and one `tokens` issued.
pub(crate) fn sign_in_token_matches(req: &HttpRequest, tokens: &SignInTokens, token: &str) -> bool {
    req.cookie(SIGN_IN_COOKIE).is_some_and(|c| {
        !c.value().is_empty()
            && crate::admin::same_secret(token.as_bytes(), c.value().as_bytes())
            && tokens.issued(token)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    #[test]
    fn a_session_is_found_by_its_cookie_until_closed() {
        let sessions = Sessions::new(Duration::from_secs(60));
        let session = sessions.open().unwrap();
        assert_eq!(session.id.len(), 64);
        assert_ne!(session.id, session.csrf);
        let req = TestRequest::default()
            .cookie(Cookie::new(SESSION_COOKIE, session.id.clone()))
            .to_http_request();
        assert_eq!(
            sessions.of(&req).map(|s| s.csrf),
            Some(session.csrf.clone())
        );
        let other = TestRequest::default()
            .cookie(Cookie::new(SESSION_COOKIE, "0".repeat(64)))
            .to_http_request();
        assert!(sessions.of(&other).is_none());
        sessions.close(&session);
        assert!(sessions.of(&req).is_none());
    }

    #[test]
    fn an_expired_session_is_gone() {
        let sessions = Sessions::new(Duration::ZERO);
        let session = sessions.open().unwrap();
        let req = TestRequest::default()
            .cookie(Cookie::new(SESSION_COOKIE, session.id))
            .to_http_request();
        assert!(sessions.of(&req).is_none());
        assert_eq!(sessions.len(), 0, "removed when found expired");
    }

    #[test]
    fn sessions_are_bounded() {
        let sessions = Sessions::new(Duration::from_secs(60));
        for _ in 0..MAX_SESSIONS + 10 {
            sessions.open().unwrap();
        }
        assert_eq!(sessions.len(), MAX_SESSIONS);
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
