//! The console's settings as the binary reads them: `[console.oidc]` for the console's sign-in.
//! The console's use cases are `flowgate_control::console`'s, over the store (wired in
//! `serve`).

/// `[console.oidc]` as the console takes it; `None` while `issuer` is empty. The rules were
/// validated with the configuration (each names one match and a known role).
pub fn oidc_access(
    config: &crate::config::OidcConfig,
) -> Option<flowgate_http::console::OidcAccess> {
    use flowgate_http::console::{OidcAccess, RoleMatch, RoleRule};
    if config.issuer.trim().is_empty() {
        return None;
    }
    let roles = config
        .roles
        .iter()
        .filter_map(|rule| {
            let matches = match (&rule.email_domain, &rule.group) {
                (Some(domain), None) => RoleMatch::EmailDomain(domain.trim().to_owned()),
                (None, Some(group)) => RoleMatch::Group(group.clone()),
                _ => return None,
            };
            Some(RoleRule {
                matches,
                role: rule.role.parse().ok()?,
            })
        })
        .collect();
    let mut settings = flowgate_http::oidc::OidcSettings::new(
        config.issuer.trim(),
        config.client_id.trim(),
        config.client_secret.clone(),
        config.redirect_url.trim(),
    );
    settings.scopes = config.scopes.clone();
    settings.groups_claim = config.groups_claim.clone();
    settings.ca_file = (!config.ca_file.is_empty()).then(|| config.ca_file.clone().into());
    Some(OidcAccess { settings, roles })
}
