//! The console's sessions and CSRF tokens (D24).
//!
//! Signing in with the admin token opens a session: a random 256-bit id in a cookie
//! (`HttpOnly`, `SameSite=Strict`, `Path=/console`, `Secure` over TLS, expiring with the
//! session) and a CSRF token of its own, which every form of the session carries and every post
//! must return. Sessions live in this process's memory: signing out or expiring removes one,
//! and a restart signs everyone out. The sign-in form, which has no session yet, carries a token
//! that must equal a cookie set with the form (a double-submit token), so another site cannot
//! sign a browser in either.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use actix_web::cookie::{Cookie, SameSite};
use actix_web::HttpRequest;

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

/// Whether the sign-in form's `token` is the one its cookie holds.
pub(crate) fn sign_in_token_matches(req: &HttpRequest, token: &str) -> bool {
    req.cookie(SIGN_IN_COOKIE).is_some_and(|c| {
        !c.value().is_empty() && crate::admin::same_secret(token.as_bytes(), c.value().as_bytes())
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
