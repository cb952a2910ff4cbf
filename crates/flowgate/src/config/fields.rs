//! The rules of single keys, as `validator` attributes on the configuration's sections: an
//! address, a secret's strength, a currency code, a Redis URL, a log filter, the OpenID
//! provider's URLs and role rules. Each refusal's message quotes the value (never a secret's)
//! and says what is allowed; [`problems`] puts the key's whole path before it.
//!
//! What one key cannot say alone stays in [`super::Config::validate`]: rules across keys (the
//! lease longer than the interval, the reporting currency without a rate of its own, a
//! replica of the same kind, production's own rules) and the numeric ranges, which
//! [`super::BOUNDED`] holds as data because they are checked before the values are typed (a
//! negative number or one too wide for its type is refused with its key and range, as one
//! within the type is).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::SocketAddr;

use validator::{ValidationError, ValidationErrors, ValidationErrorsKind};

use super::{OidcRoleRule, LOG_LEVELS, MIN_ADMIN_TOKEN_CHARS, MIN_ADMIN_TOKEN_DISTINCT, ROLES};

/// A refusal with its message.
fn refused(message: String) -> ValidationError {
    ValidationError::new("invalid").with_message(Cow::Owned(message))
}

/// Every refusal in `errors`, as `(key, message)` sorted by key; `prefix` is the path of the
/// section validated (`console.oidc`), empty for the whole configuration.
pub(super) fn problems(prefix: &str, errors: &ValidationErrors) -> Vec<(String, String)> {
    let mut out = Vec::new();
    collect(prefix, errors, &mut out);
    out.sort();
    out
}

fn collect(prefix: &str, errors: &ValidationErrors, out: &mut Vec<(String, String)>) {
    for (field, kind) in errors.errors() {
        let key = if prefix.is_empty() {
            field.to_string()
        } else {
            format!("{prefix}.{field}")
        };
        match kind {
            ValidationErrorsKind::Field(refusals) => {
                for refusal in refusals {
                    let message = refusal
                        .message
                        .as_deref()
                        .map_or_else(|| refusal.code.to_string(), str::to_owned);
                    out.push((key.clone(), message));
                }
            }
            ValidationErrorsKind::Struct(inner) => collect(&key, inner, out),
            ValidationErrorsKind::List(items) => {
                for (index, inner) in items {
                    collect(&format!("{key}[{index}]"), inner, out);
                }
            }
        }
    }
}

/// `server.listen`, `admin.listen`: a socket address.
pub(super) fn socket_address(value: &str) -> Result<(), ValidationError> {
    value
        .parse::<SocketAddr>()
        .map(drop)
        .map_err(|_| refused(format!("`{value}` is not an address like 127.0.0.1:8080")))
}

/// `admin.token`: off (empty), or a random secret. The message never repeats the token.
pub(super) fn admin_token(token: &str) -> Result<(), ValidationError> {
    let chars = token.chars().count();
    let distinct = token
        .chars()
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    if token.is_empty()
        || (chars >= MIN_ADMIN_TOKEN_CHARS
            && distinct >= MIN_ADMIN_TOKEN_DISTINCT
            && token.chars().all(|c| c.is_ascii_graphic()))
    {
        return Ok(());
    }
    Err(refused(format!(
        "is too weak: it must be at least {MIN_ADMIN_TOKEN_CHARS} printable ASCII characters \
         without spaces, at least {MIN_ADMIN_TOKEN_DISTINCT} of them different (a random \
         secret, e.g. `openssl rand -hex 32`); the one given has {chars} characters, \
         {distinct} different"
    )))
}

/// Three upper-case letters (ISO 4217).
fn is_currency_code(code: &str) -> bool {
    code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase())
}

/// `experiments.currency`: a currency code.
pub(super) fn currency(code: &str) -> Result<(), ValidationError> {
    if is_currency_code(code) {
        Ok(())
    } else {
        Err(refused(format!(
            "must be three upper-case letters (ISO 4217), not {code:?}"
        )))
    }
}

/// `experiments.exchange_rates`: currency codes, each with a positive rate.
pub(super) fn exchange_rates(rates: &BTreeMap<String, f64>) -> Result<(), ValidationError> {
    for (currency, rate) in rates {
        if !is_currency_code(currency) {
            return Err(refused(format!(
                "{currency:?} is not a currency code: three letters (ISO 4217)"
            )));
        }
        if !(rate.is_finite() && *rate > 0.0) {
            return Err(refused(format!(
                "{currency} = {rate}: a rate must be a positive number"
            )));
        }
    }
    Ok(())
}

/// `sticky.redis_url`: empty (the main database keeps assignments) or a Redis URL.
pub(super) fn redis_url(url: &str) -> Result<(), ValidationError> {
    let url = url.trim();
    if url.is_empty() || url.starts_with("redis://") || url.starts_with("redis+unix://") {
        return Ok(());
    }
    Err(refused(format!(
        "must start with redis:// or redis+unix:// (TLS is not built in), not {}",
        flowgate_redis::redact_url(url)
    )))
}

/// `log.level`: at least one directive, each naming one of [`LOG_LEVELS`] (alone or after
/// `target=`), and the whole a filter `tracing` reads.
pub(super) fn log_filter(filter: &str) -> Result<(), ValidationError> {
    let refuse = |why: String| {
        refused(format!(
            "{filter:?} {why}; allowed: {}, or comma-separated directives, each a level or \
             target=level (flowgate=debug,info)",
            LOG_LEVELS.map(|l| format!("`{l}`")).join(", ")
        ))
    };
    let directives: Vec<&str> = filter
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    if directives.is_empty() {
        return Err(refuse("names no level".into()));
    }
    for directive in directives {
        let level = directive.rsplit_once('=').map_or(directive, |(_, l)| l);
        if !LOG_LEVELS
            .iter()
            .any(|l| l.eq_ignore_ascii_case(level.trim()))
        {
            return Err(refuse(format!(
                "is not a level or a filter: `{directive}` names no level"
            )));
        }
    }
    tracing_subscriber::EnvFilter::try_new(filter)
        .map(drop)
        .map_err(|e| refuse(format!("is not a filter ({e})")))
}

/// An OpenID provider's URL: `https`, or `http` on a loopback address.
pub(super) fn https_or_loopback(value: &str) -> Result<(), ValidationError> {
    let loopback = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
        .iter()
        .any(|p| value.starts_with(p));
    if value.starts_with("https://") || loopback {
        Ok(())
    } else {
        Err(refused(format!(
            "must be an https:// URL (http:// only on loopback), not {value:?}"
        )))
    }
}

/// `console.oidc.client_id`, `client_secret`: required once an issuer is set (the section's
/// rules run only then).
pub(super) fn required_with_issuer(value: &str) -> Result<(), ValidationError> {
    if value.trim().is_empty() {
        Err(refused("is required with console.oidc.issuer".into()))
    } else {
        Ok(())
    }
}

/// `console.oidc.redirect_url`: such a URL, ending in the console's callback.
pub(super) fn callback_url(value: &str) -> Result<(), ValidationError> {
    https_or_loopback(value)?;
    if value.ends_with("/console/oidc/callback") {
        Ok(())
    } else {
        Err(refused(format!(
            "must end in /console/oidc/callback (the console's callback), not {value:?}"
        )))
    }
}

/// `console.oidc.groups_claim`: a claim's name, without spaces around it.
pub(super) fn claim_name(claim: &str) -> Result<(), ValidationError> {
    if claim.trim().is_empty() || claim.trim() != claim {
        return Err(refused(format!(
            "must name the ID token claim that lists a person's groups (e.g. \"groups\"), \
             without spaces around it, not {claim:?}"
        )));
    }
    Ok(())
}

/// `console.oidc.ca_file`: empty (the system's roots) or a PEM file of authorities the
/// provider's TLS can be checked with, read now so a file that cannot serve stops the start.
pub(super) fn ca_file(path: &str) -> Result<(), ValidationError> {
    if path.is_empty() {
        return Ok(());
    }
    flowgate_http::oidc::ca_file_roots(std::path::Path::new(path))
        .map(drop)
        .map_err(|why| refused(format!("{path:?} cannot be used: {why}")))
}

/// `console.oidc.roles`: at least one rule, each naming one match and a known role.
pub(super) fn role_rules(rules: &[OidcRoleRule]) -> Result<(), ValidationError> {
    if rules.is_empty() {
        return Err(refused(
            "needs at least one rule (e.g. { email_domain = \"example.com\", role = \"viewer\" }): \
             without one nobody could sign in"
                .into(),
        ));
    }
    for rule in rules {
        if rule.email_domain.is_some() == rule.group.is_some() {
            return Err(refused(format!(
                "each rule names an email_domain or a group, one of them: {rule:?}"
            )));
        }
        if !ROLES.contains(&rule.role.as_str()) {
            return Err(refused(format!(
                "role {:?} is not one of viewer, editor, admin",
                rule.role
            )));
        }
        role_match(rule)?;
    }
    Ok(())
}

/// A rule that can match someone: an `email_domain` is a domain name (labels of letters,
/// digits and inner hyphens, without `@`); a `group` names a group, without spaces around it.
fn role_match(rule: &OidcRoleRule) -> Result<(), ValidationError> {
    if let Some(given) = &rule.email_domain {
        let domain = given.trim();
        let labels_ok = domain.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
        if !labels_ok || domain.len() > 253 {
            let hint = if domain.contains('@') {
                " (without the @)"
            } else {
                ""
            };
            return Err(refused(format!(
                "email_domain {given:?} is not a domain name like \"example.com\"{hint}: it \
                 would never match"
            )));
        }
    }
    if let Some(group) = &rule.group {
        if group.trim().is_empty() || group.trim() != group {
            return Err(refused(format!(
                "group {group:?} must name a group, without spaces around it: it would never \
                 match"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Environment};

    /// Every refusal is named by its whole path, sorted, so the first reported is the same on
    /// every run (validator keeps its errors in a hash map).
    #[test]
    fn refusals_name_their_whole_key_in_a_stable_order() {
        let mut config = Config::default();
        config.sticky.key_prefix.clear();
        config.server.listen = "nowhere".into();
        config.log.level = "loud".into();
        let errors = validator::Validate::validate(&config).unwrap_err();
        let keys: Vec<String> = problems("", &errors).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["log.level", "server.listen", "sticky.key_prefix"]);
        let message = config
            .validate(Environment::Development)
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            "invalid configuration: log.level: \"loud\" is not a level or a filter: `loud` \
             names no level; allowed: `trace`, `debug`, `info`, `warn`, `error`, `off`, or \
             comma-separated directives, each a level or target=level (flowgate=debug,info)"
        );
        let nested = problems("console.oidc", &errors);
        assert!(nested.iter().all(|(k, _)| k.starts_with("console.oidc.")));
    }
}
