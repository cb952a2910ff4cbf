//! The `Authorization` header (D1, D9): where the API's and the admin API's callers present
//! their key or token. The domain authenticates a key; reading it out of a request is HTTP's.
//!
//! The store notification routes (D30, `POST /v1/apps/{appId}/store/...`) take a `webhook` key
//! of the app's workspace: [`authenticate_webhook`] reads it out of the header value
//! ([`webhook_token`]: `Bearer <key>` or the key alone, as RevenueCat sends the value exactly
//! as configured) and answers with the SDK routes' problems. Neither logs the header: it is a
//! secret.

use actix_web::http::header::{self, HeaderMap};
use flowgate_domain::catalog::{AppAccessError, WebhookAuthError};
use flowgate_domain::ids::AppId;
use flowgate_domain::keys::{AuthError, KeyEnvironment, KeyRecord};
use flowgate_domain::Catalog;

use crate::problem::ApiError;

/// The token of an `Authorization` header value: `Bearer <token>`, the scheme matched
/// case-insensitively as RFC 9110 requires, the token trimmed; `None` for another scheme or
/// no token.
pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then_some(token)
}

/// The webhook key of a store notification's `Authorization` header value (D30): the token of
/// `Bearer <key>` ([`bearer_token`]), or the whole value, trimmed, when it is one word (the
/// key alone: RevenueCat sends the header exactly as configured). `None` for another scheme
/// (`Basic ...`), `Bearer` without a key, or an empty value.
pub fn webhook_token(header: &str) -> Option<&str> {
    if let Some(token) = bearer_token(header) {
        return Some(token);
    }
    let token = header.trim();
    let one_word = !token.is_empty() && !token.contains(char::is_whitespace);
    (one_word && !token.eq_ignore_ascii_case("bearer")).then_some(token)
}

/// The request's one `Authorization` header value: `None` without one (or with a value that
/// is not visible ASCII, which no key is); two or more are 401 `invalid_api_key` (D25: which
/// one a proxy on the way would have used is anybody's guess), as on the SDK routes.
pub fn authorization_value(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let mut values = headers.get_all(header::AUTHORIZATION);
    let first = values.next();
    if values.next().is_some() {
        return Err(ApiError {
            detail: "the request has more than one Authorization header; send the key in one"
                .to_owned(),
            ..ApiError::several_authorization_headers()
        });
    }
    Ok(first.and_then(|v| v.to_str().ok()))
}

/// Whether a store notification for `app` carries a valid webhook key of the app's workspace
/// (D30): `authorization` is its `Authorization` header value ([`authorization_value`]), read
/// by [`webhook_token`], and `accepted` the deployment's key environment
/// (`auth.key_environment`, D1). The key's record on success (its workspace, its id for a
/// per-key rate limit); otherwise the problem to answer, as the SDK routes answer theirs, the
/// key before the app (D9): 401 `missing_api_key`, `invalid_api_key` (malformed, unknown or
/// revoked), `key_type_not_allowed` (an `sdk` or `secret` key), `key_environment_mismatch`;
/// then 404 `app_not_found`, 403 `forbidden_app` (another workspace's app). Nothing is
/// logged, and no problem repeats the key.
pub fn authenticate_webhook<'c>(
    catalog: &'c Catalog,
    authorization: Option<&str>,
    app: AppId,
    accepted: KeyEnvironment,
) -> Result<&'c KeyRecord, ApiError> {
    let token = authorization.and_then(webhook_token);
    match catalog.authenticate_webhook(token, accepted, app) {
        Ok((record, _)) => Ok(record),
        Err(WebhookAuthError::Key(AuthError::MissingApiKey)) => Err(ApiError {
            detail: "send the webhook key as `Authorization: Bearer <key>` or as the header's \
                     whole value"
                .to_owned(),
            ..ApiError::unauthorized(AuthError::MissingApiKey)
        }),
        Err(WebhookAuthError::Key(AuthError::KeyTypeNotAllowed)) => Err(ApiError {
            detail: "this route takes a webhook key (`flowgate keys create --type webhook`), \
                     not an SDK or secret key"
                .to_owned(),
            ..ApiError::unauthorized(AuthError::KeyTypeNotAllowed)
        }),
        Err(WebhookAuthError::Key(other)) => Err(ApiError::unauthorized(other)),
        Err(WebhookAuthError::App(AppAccessError::NotFound)) => Err(ApiError::app_not_found()),
        Err(WebhookAuthError::App(AppAccessError::Forbidden)) => Err(ApiError::forbidden_app()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_token_is_read_and_other_schemes_are_not() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer   abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearer"), None);
    }

    #[test]
    fn a_webhook_key_is_read_with_the_bearer_scheme_or_alone() {
        assert_eq!(webhook_token("Bearer fg_test_abc"), Some("fg_test_abc"));
        assert_eq!(webhook_token("BEARER  fg_test_abc "), Some("fg_test_abc"));
        assert_eq!(webhook_token("fg_test_abc"), Some("fg_test_abc"));
        assert_eq!(webhook_token(" fg_test_abc\t"), Some("fg_test_abc"));
        assert_eq!(webhook_token("Basic abc"), None);
        assert_eq!(webhook_token("Bearer "), None);
        assert_eq!(webhook_token(""), None);
        assert_eq!(webhook_token("   "), None);
        assert_eq!(webhook_token("Bearer"), None, "a scheme without its key");
    }

    #[test]
    fn one_authorization_value_is_read_and_two_are_refused() {
        use actix_web::http::header::HeaderValue;

        let mut headers = HeaderMap::new();
        assert_eq!(authorization_value(&headers), Ok(None));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer a"));
        assert_eq!(authorization_value(&headers), Ok(Some("Bearer a")));
        headers.append(header::AUTHORIZATION, HeaderValue::from_static("b"));
        let refused = authorization_value(&headers).unwrap_err();
        assert_eq!(
            (refused.status.as_u16(), refused.code),
            (401, "invalid_api_key")
        );
        assert!(
            refused.detail.contains("more than one"),
            "{}",
            refused.detail
        );
    }
}
