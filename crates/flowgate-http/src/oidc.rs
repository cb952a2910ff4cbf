//! OpenID Connect sign-in for the operator console (D28): a relying party of one issuer.
//!
//! The console asks [`OidcClient::begin`] for the authorization URL to send a person to and a
//! [`PendingSignIn`] to keep until the person comes back (in the store or a signed cookie; it
//! holds the PKCE verifier and the nonce, so it must not reach the browser readable). On the
//! callback, [`OidcClient::complete`] checks the returned `state`, redeems the code and
//! returns the [`Identity`] the ID token vouches for. Role mapping is the console's.
//!
//! What is checked, each failure an [`OidcError`] with a stable [`OidcError::code`]:
//!
//! - **Discovery** ([`OidcClient::discover`]): `{issuer}/.well-known/openid-configuration`
//!   names exactly the configured issuer (a provider answering for another would otherwise
//!   mint tokens we accept); it supports the `code` response type and, when it lists PKCE
//!   methods, `S256`; every URL is `https`, or `http` on a loopback address only (tests, a
//!   provider beside the service). The issuer's keys (`jwks_uri`) are fetched then, and again
//!   when a token names a key id not among them (the provider rotated its keys), at most once a
//!   minute so a stream of forged key ids cannot make us hammer the provider.
//! - **The flow**: authorization code with PKCE (`S256`), a fresh random `state` (compared in
//!   constant time) and `nonce` per sign-in, 256 bits each. The code is redeemed with
//!   `client_secret_basic`, or `client_secret_post` when the provider advertises only that.
//! - **The ID token**: a compact JWS whose signature verifies with the issuer's key of its
//!   `kid`; the algorithm is the key's (its type and curve, and its `alg` when the key names
//!   one), and the token's `alg` must agree with it, so `none`, HMAC (`HS256` would turn the
//!   public key into a shared secret) or an RSA token against an EC key are refused. Then `iss`
//!   equals the issuer, `aud` contains the client id (and `azp`, required when `aud` names
//!   several, equals it), `exp` is after `now`, `iat` is not more than a minute after `now`,
//!   `nonce` equals the sign-in's, `sub` is present. Numeric claims must be JSON numbers: a
//!   string `exp` is refused, not taken as absent.
//!
//! Messages quote the offending value, shortened; never the client secret, a code or a whole
//! token.
//!
//! **Why these crates.** The relying party is the `openidconnect` crate's (issue 66): its
//! provider metadata, `CoreClient` (the authorization URL with the state, nonce and S256
//! challenge; the token request with `client_secret_basic` or `client_secret_post` and the
//! PKCE verifier; the provider's error answers), its JSON Web Keys (their signatures, with the
//! RustCrypto RSA, P-256, P-384 and Ed25519 stacks it brings) and its `IdTokenVerifier` (`iss`,
//! `aud`, the signature, `exp`, `iat`, `nonce`, `typ`, `cty`, `crit`). It is built without
//! default features, so without reqwest: its HTTP goes through `AwcHttp`, actix's own client
//! (`awc`) that the workspace already builds, over rustls (`ring` provider) for `https`
//! issuers, trusting the system's roots or [`OidcSettings::ca_file`], bounded in time and size,
//! following no redirect. What the crate does not do is kept here, beside it: the key cache
//! and its refetch for an unknown `kid`; which keys are for signatures (`use`, `key_ops`, the
//! curve's coordinate lengths, RSA of 2048 bits or more) and the key's own `alg`; the token's
//! size, its `alg` read before any key is looked up, and the JSON types of the claims (each
//! refusal with its own code, where the crate has one serde error for them all); `azp`
//! (which the crate does not check); the issuer's equality in discovery, the `code` and `S256`
//! support and the `https`-or-loopback rule. `subtle` (already built for rustls) compares the
//! state and the nonce in constant time; `chrono` is the crate's clock type.

use flowgate_domain::text::{json_kind, shorten};
use std::fmt;
use std::future::Future;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreClientAuthMethod, CoreIdToken, CoreIdTokenVerifier,
    CoreJsonCurveType, CoreJsonWebKey, CoreJwsSigningAlgorithm, CoreProviderMetadata,
    CoreResponseType,
};
use openidconnect::{
    AsyncHttpClient, AuthType, AuthUrl, AuthorizationCode, ClaimsVerificationError, ClientId,
    ClientSecret, CsrfToken, EndpointNotSet, EndpointSet, HttpRequest, HttpResponse, IssuerUrl,
    JsonWebKey as _, JsonWebKeyId, JsonWebKeySet, Nonce, PkceCodeChallenge, PkceCodeVerifier,
    RedirectUrl, RequestTokenError, Scope, TokenResponse as _, TokenUrl,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;
use url::Url;

/// The largest ID token [`OidcClient::complete`] decodes, in bytes (64 KiB).
pub const MAX_TOKEN_BYTES: usize = 64 * 1024;

/// How far in the future an ID token's `iat` may be, for clocks that disagree a little.
pub const IAT_LEEWAY: Duration = Duration::from_secs(60);

/// The shortest time between two fetches of the issuer's keys for an unknown key id.
pub const KEY_REFETCH_INTERVAL: Duration = Duration::from_secs(60);

/// The largest body read from the provider (discovery, keys, token response): 1 MiB.
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// How long one request to the provider may take, connection included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How many characters of an offending value an error message quotes.
const QUOTE_CHARS: usize = 48;

/// The scopes asked for when the settings name none.
fn default_scopes() -> Vec<String> {
    ["openid", "email", "profile"]
        .into_iter()
        .map(str::to_owned)
        .collect()
}

fn default_groups_claim() -> String {
    "groups".to_owned()
}

/// The relying party's settings (`[console.oidc]`).
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcSettings {
    /// The issuer identifier, exactly as the provider's discovery document states it (a
    /// trailing `/` matters).
    pub issuer: String,
    /// This relying party's client id at the provider.
    pub client_id: String,
    /// Its client secret. Never logged: `Debug` shows it redacted.
    pub client_secret: String,
    /// Where the provider sends the person back (the console's callback), registered at the
    /// provider.
    pub redirect_url: String,
    /// The scopes asked for; `openid` is added when missing. Default `openid email profile`.
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
    /// The ID token claim that lists the person's groups. Default `groups`.
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// A PEM file of the certificate authorities that sign the provider's TLS certificate, for
    /// a provider on a private authority. Default: the system's trusted roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

impl OidcSettings {
    /// Settings with the default scopes, groups claim and trusted roots.
    pub fn new(
        issuer: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
        redirect_url: impl Into<String>,
    ) -> Self {
        Self {
            issuer: issuer.into(),
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            redirect_url: redirect_url.into(),
            scopes: default_scopes(),
            groups_claim: default_groups_claim(),
            ca_file: None,
        }
    }
}

impl fmt::Debug for OidcSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OidcSettings")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("redirect_url", &self.redirect_url)
            .field("scopes", &self.scopes)
            .field("groups_claim", &self.groups_claim)
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

/// A sign-in between the redirect to the provider and the callback. The console keeps it
/// where the browser cannot read it (the store, or a signed and encrypted cookie), hands it to
/// [`OidcClient::complete`] once, then forgets it; how long it stays valid is the console's
/// choice (`created_at`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingSignIn {
    /// The `state` sent to the provider, which the callback must return.
    pub state: String,
    /// The `nonce` sent to the provider, which the ID token must carry.
    pub nonce: String,
    /// The PKCE code verifier (its S256 challenge went to the provider).
    pub verifier: String,
    /// When the sign-in began.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

impl fmt::Debug for PendingSignIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingSignIn")
            .field("state", &self.state)
            .field("nonce", &"<redacted>")
            .field("verifier", &"<redacted>")
            .field("created_at", &self.created_at)
            .finish()
    }
}

/// Who signed in, as the ID token says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The provider's stable identifier of the person (`sub`).
    pub subject: String,
    /// Their email address (`email`), if the token carries one.
    pub email: Option<String>,
    /// Whether the provider verified that address (`email_verified`; false when absent).
    pub email_verified: bool,
    /// Their groups, from the claim [`OidcSettings::groups_claim`] names (empty when absent).
    pub groups: Vec<String>,
}

/// Why discovery or a sign-in failed. [`OidcError::code`] names the check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OidcError {
    /// The settings cannot be used (a URL that does not parse, a CA file that does not read).
    #[error("the OpenID Connect settings are invalid: {reason}")]
    InvalidSettings {
        /// What is wrong.
        reason: String,
    },
    /// A URL of the issuer or the provider is plain `http` on a host other than loopback.
    #[error("the {what} {url:?} is not https (plain http is taken on loopback addresses only)")]
    InsecureUrl {
        /// Which URL: `issuer`, `authorization_endpoint`, `token_endpoint`, `jwks_uri`.
        what: &'static str,
        /// The URL, shortened.
        url: String,
    },
    /// The discovery document or the issuer's keys could not be fetched or read.
    #[error("OpenID Connect discovery failed at {url:?}: {reason}")]
    DiscoveryFailed {
        /// What was fetched.
        url: String,
        /// Why it failed.
        reason: String,
    },
    /// The discovery document names another issuer than the configured one.
    #[error("the provider says its issuer is {advertised:?}, not the configured {configured:?}")]
    IssuerMismatch {
        /// The configured issuer.
        configured: String,
        /// The issuer the document names, shortened.
        advertised: String,
    },
    /// The provider lacks something this relying party needs.
    #[error("the provider does not support {what}")]
    ProviderUnsupported {
        /// What it lacks.
        what: String,
    },
    /// The operating system's random generator failed.
    #[error("no random bytes for the sign-in: {reason}")]
    Random {
        /// The generator's error.
        reason: String,
    },
    /// The callback's `state` is not the sign-in's.
    #[error("the returned state {returned:?} is not this sign-in's")]
    StateMismatch {
        /// The state the callback carried, shortened.
        returned: String,
    },
    /// The token endpoint refused the code or could not be reached.
    #[error("the token request failed: {reason}")]
    TokenRequestFailed {
        /// The provider's error code and description, or the transport's error.
        reason: String,
    },
    /// The issuer's keys could not be fetched again for an unknown key id.
    #[error("the issuer's keys could not be fetched: {reason}")]
    KeysUnavailable {
        /// Why.
        reason: String,
    },
    /// The ID token is not a compact JWS with a JSON header and a JSON object payload.
    #[error("the ID token is malformed: {reason}")]
    MalformedToken {
        /// What is wrong with it.
        reason: String,
    },
    /// The token's `alg` is `none`, HMAC or unknown.
    #[error("the ID token's alg {alg:?} is not accepted (RS*, PS*, ES256, ES384, EdDSA only)")]
    UnsupportedAlgorithm {
        /// The `alg` found, shortened.
        alg: String,
    },
    /// No key of the issuer has the token's `kid`, even after fetching the keys again.
    #[error("no key of the issuer has the ID token's kid {kid:?}")]
    UnknownKey {
        /// The `kid` (`<none>` when the token has none and the issuer has several keys).
        kid: String,
    },
    /// The signature does not verify with the key, or the key is not for the token's `alg`.
    #[error("the ID token's signature is invalid: {reason}")]
    InvalidSignature {
        /// Why.
        reason: String,
    },
    /// `iss` is not the issuer.
    #[error("the ID token's iss {found:?} is not the issuer {expected:?}")]
    WrongIssuer {
        /// The `iss` found, shortened.
        found: String,
        /// The issuer.
        expected: String,
    },
    /// `aud` does not contain the client id, or `azp` is not the client id.
    #[error("the ID token is not for this client: {reason}")]
    WrongAudience {
        /// Which of `aud` and `azp` is wrong, with its value.
        reason: String,
    },
    /// `exp` is not after `now`.
    #[error("the ID token expired at {exp} (unix seconds), now is {now}")]
    Expired {
        /// The token's `exp`.
        exp: i64,
        /// The `now` it was judged at.
        now: i64,
    },
    /// `iat` is more than [`IAT_LEEWAY`] after `now`.
    #[error("the ID token was issued at {iat} (unix seconds), in the future (now is {now})")]
    IssuedInFuture {
        /// The token's `iat`.
        iat: i64,
        /// The `now` it was judged at.
        now: i64,
    },
    /// `nonce` is missing or not the sign-in's.
    #[error("the ID token's nonce is not this sign-in's")]
    NonceMismatch,
    /// A required claim is missing.
    #[error("the ID token has no {claim} claim")]
    MissingClaim {
        /// The claim.
        claim: &'static str,
    },
    /// A claim has the wrong JSON type.
    #[error("the ID token's {claim} claim is {reason}")]
    InvalidClaim {
        /// The claim.
        claim: String,
        /// What it is instead.
        reason: String,
    },
}

impl OidcError {
    /// A stable snake_case name of the failed check, for logs, metrics and the audit log.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidSettings { .. } => "invalid_settings",
            Self::InsecureUrl { .. } => "insecure_url",
            Self::DiscoveryFailed { .. } => "discovery_failed",
            Self::IssuerMismatch { .. } => "issuer_mismatch",
            Self::ProviderUnsupported { .. } => "provider_unsupported",
            Self::Random { .. } => "random_failed",
            Self::StateMismatch { .. } => "state_mismatch",
            Self::TokenRequestFailed { .. } => "token_request_failed",
            Self::KeysUnavailable { .. } => "keys_unavailable",
            Self::MalformedToken { .. } => "malformed_token",
            Self::UnsupportedAlgorithm { .. } => "unsupported_algorithm",
            Self::UnknownKey { .. } => "unknown_key",
            Self::InvalidSignature { .. } => "invalid_signature",
            Self::WrongIssuer { .. } => "wrong_issuer",
            Self::WrongAudience { .. } => "wrong_audience",
            Self::Expired { .. } => "expired",
            Self::IssuedInFuture { .. } => "issued_in_future",
            Self::NonceMismatch => "nonce_mismatch",
            Self::MissingClaim { .. } => "missing_claim",
            Self::InvalidClaim { .. } => "invalid_claim",
        }
    }
}

/// How the client authenticates at the token endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClientAuth {
    /// HTTP Basic with the form-encoded id and secret (RFC 6749 2.3.1).
    Basic,
    /// `client_id` and `client_secret` in the form body.
    Post,
}

/// What this relying party uses of the discovery document, checked.
#[derive(Clone, Debug)]
struct ProviderMetadata {
    issuer: IssuerUrl,
    authorization_endpoint: AuthUrl,
    token_endpoint: TokenUrl,
    jwks_uri: Url,
    client_auth: ClientAuth,
}

/// The issuer's keys and when they were last fetched.
struct KeyCache {
    keys: Vec<Jwk>,
    fetched_at: Instant,
}

/// The relying party of `openidconnect`, with its authorization and token endpoints set.
type Rp = CoreClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

/// A relying party of one issuer, discovered and with its keys. Shared by every request
/// (`Send + Sync`); its futures run on actix's runtime (awc).
pub struct OidcClient {
    settings: OidcSettings,
    metadata: ProviderMetadata,
    rp: Rp,
    keys: Mutex<KeyCache>,
    http: AwcHttp,
}

impl fmt::Debug for OidcClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OidcClient")
            .field("settings", &self.settings)
            .field("metadata", &self.metadata)
            .finish_non_exhaustive()
    }
}

impl OidcClient {
    /// Reads the provider's discovery document and keys, and checks them (the module's
    /// documentation lists how).
    pub async fn discover(settings: OidcSettings) -> Result<OidcClient, OidcError> {
        let issuer_url = parse_url("issuer", &settings.issuer)?;
        let tls = if issuer_url.scheme() == "https" || settings.ca_file.is_some() {
            Some(tls_config(settings.ca_file.as_ref())?)
        } else {
            None
        };
        let discovery_url = format!(
            "{}/.well-known/openid-configuration",
            settings.issuer.trim_end_matches('/')
        );
        let document = AwcHttp { tls: tls.clone() }
            .get_json(&discovery_url)
            .await?;
        let metadata = ProviderMetadata::from_document(&settings.issuer, &document)?;
        let tls = match tls {
            None if metadata.uses_https() => Some(tls_config(None)?),
            tls => tls,
        };
        let http = AwcHttp { tls };
        let keys = fetch_keys(&http, &metadata.jwks_uri).await?;
        if keys.is_empty() {
            // Said now, at start, rather than as a failed sign-in later.
            return Err(OidcError::DiscoveryFailed {
                url: shorten(metadata.jwks_uri.as_str(), QUOTE_CHARS),
                reason: "the key set has no signature key of a type this relying party \
                         verifies with (RSA, EC P-256 or P-384, Ed25519)"
                    .to_owned(),
            });
        }
        OidcClient::new(settings, metadata, keys, http)
    }

    /// A client of checked metadata and keys fetched just now.
    fn new(
        settings: OidcSettings,
        metadata: ProviderMetadata,
        keys: Vec<Jwk>,
        http: AwcHttp,
    ) -> Result<OidcClient, OidcError> {
        let redirect_url = RedirectUrl::new(settings.redirect_url.clone()).map_err(|e| {
            OidcError::InvalidSettings {
                reason: format!(
                    "redirect_url {:?}: {e}",
                    shorten(&settings.redirect_url, QUOTE_CHARS)
                ),
            }
        })?;
        let rp = CoreClient::new(
            ClientId::new(settings.client_id.clone()),
            metadata.issuer.clone(),
            JsonWebKeySet::new(Vec::new()),
        )
        .set_client_secret(ClientSecret::new(settings.client_secret.clone()))
        .set_auth_uri(metadata.authorization_endpoint.clone())
        .set_token_uri(metadata.token_endpoint.clone())
        .set_redirect_uri(redirect_url)
        .set_auth_type(match metadata.client_auth {
            ClientAuth::Basic => AuthType::BasicAuth,
            ClientAuth::Post => AuthType::RequestBody,
        });
        Ok(OidcClient {
            settings,
            metadata,
            rp,
            keys: Mutex::new(KeyCache {
                keys,
                fetched_at: Instant::now(),
            }),
            http,
        })
    }

    /// The settings this client was discovered with.
    pub fn settings(&self) -> &OidcSettings {
        &self.settings
    }

    /// Starts a sign-in: the URL to redirect the person to, and what to keep until the
    /// callback (a fresh state, nonce and PKCE verifier).
    pub fn begin(&self) -> Result<(String, PendingSignIn), OidcError> {
        self.begin_at(OffsetDateTime::now_utc())
    }

    fn begin_at(&self, now: OffsetDateTime) -> Result<(String, PendingSignIn), OidcError> {
        let pending = PendingSignIn {
            state: random_token()?,
            nonce: random_token()?,
            verifier: random_token()?,
            created_at: now,
        };
        let (state, nonce) = (pending.state.clone(), pending.nonce.clone());
        // The crate asks for `openid` first; the settings' other scopes follow.
        let mut request = self
            .rp
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                move || CsrfToken::new(state),
                move || Nonce::new(nonce),
            )
            .set_pkce_challenge(pkce_challenge(&pending.verifier));
        for scope in &self.settings.scopes {
            if scope != "openid" && !scope.is_empty() {
                request = request.add_scope(Scope::new(scope.clone()));
            }
        }
        let (url, _, _) = request.url();
        Ok((url.into(), pending))
    }

    /// Finishes a sign-in at the callback: `returned_state` and `code` are the callback's query
    /// parameters; `now` judges the ID token's `exp` and `iat`.
    pub async fn complete(
        &self,
        pending: &PendingSignIn,
        returned_state: &str,
        code: &str,
        now: OffsetDateTime,
    ) -> Result<Identity, OidcError> {
        use subtle::ConstantTimeEq as _;
        if !bool::from(pending.state.as_bytes().ct_eq(returned_state.as_bytes())) {
            return Err(OidcError::StateMismatch {
                returned: shorten(returned_state, QUOTE_CHARS),
            });
        }
        let id_token = self.exchange_code(pending, code).await?;
        self.verify_id_token(&id_token, &pending.nonce, now).await
    }

    /// Redeems `code` at the token endpoint and returns the raw ID token, unverified. Only for
    /// tests: [`OidcClient::complete`] is the sign-in.
    #[doc(hidden)]
    pub async fn exchange_code(
        &self,
        pending: &PendingSignIn,
        code: &str,
    ) -> Result<String, OidcError> {
        self.redeem(&self.http, pending, code).await
    }

    /// [`OidcClient::exchange_code`] through `http` (the tests' stand-in for the provider).
    async fn redeem<'c, C>(
        &'c self,
        http: &'c C,
        pending: &PendingSignIn,
        code: &str,
    ) -> Result<String, OidcError>
    where
        C: AsyncHttpClient<'c>,
    {
        let failed = |reason: String| OidcError::TokenRequestFailed { reason };
        if code.is_empty() || code.len() > 4096 {
            return Err(failed(format!(
                "the callback's code is {} bytes long",
                code.len()
            )));
        }
        let answer = self
            .rp
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .set_pkce_verifier(PkceCodeVerifier::new(pending.verifier.clone()))
            .request_async(http)
            .await;
        match answer {
            Ok(tokens) => match tokens.id_token() {
                Some(token) => Ok(token.to_string()),
                None => Err(failed("the token response has no id_token".to_owned())),
            },
            Err(RequestTokenError::ServerResponse(refusal)) => Err(failed(format!(
                "the provider answered {} ({})",
                shorten(refusal.error().as_ref(), QUOTE_CHARS),
                refusal
                    .error_description()
                    .map(|text| shorten(text, QUOTE_CHARS))
                    .unwrap_or_default()
            ))),
            Err(RequestTokenError::Request(e)) => Err(failed(e.to_string())),
            Err(RequestTokenError::Parse(e, body)) => raw_id_token(&e, &body).ok_or_else(|| {
                // The path and place only: the body holds tokens.
                failed(format!(
                    "the provider's answer does not read as a token response at {} \
                     (line {}, column {})",
                    e.path(),
                    e.inner().line(),
                    e.inner().column()
                ))
            }),
            Err(RequestTokenError::Other(reason)) => Err(failed(shorten(&reason, 2 * QUOTE_CHARS))),
        }
    }

    /// Verifies a raw ID token against the issuer's keys and this client (the module's
    /// documentation lists the checks). Only for tests: [`OidcClient::complete`] is the
    /// sign-in.
    #[doc(hidden)]
    pub async fn verify_id_token(
        &self,
        id_token: &str,
        expected_nonce: &str,
        now: OffsetDateTime,
    ) -> Result<Identity, OidcError> {
        let token = CompactJws::parse(id_token)?;
        let kid = token.kid()?;
        let key = match self.cached_key(kid.as_deref())? {
            Some(key) => key,
            None => self.refetched_key(kid.as_deref()).await?,
        };
        // The signature first, so that no claim of a forged token is judged.
        token.verify_signature(&key)?;
        let claims = read_claims(&token.payload, &self.settings.groups_claim)?;
        self.verify_with_crate(id_token, &token, &key, &claims, expected_nonce, now)?;
        claims.check_authorized_party(&self.settings.client_id)?;
        Ok(claims.identity)
    }

    /// `openidconnect`'s `IdTokenVerifier` on the token, whose signature and claims' types
    /// were checked: `iss`, `aud`, the signature again, `exp`, `iat` and `nonce`.
    fn verify_with_crate(
        &self,
        id_token: &str,
        token: &CompactJws<'_>,
        key: &Jwk,
        claims: &Claims<'_>,
        expected_nonce: &str,
        now: OffsetDateTime,
    ) -> Result<(), OidcError> {
        let parsed: CoreIdToken =
            id_token
                .parse()
                .map_err(|e: serde_json::Error| OidcError::MalformedToken {
                    reason: format!(
                        "it does not read as an ID token: {}",
                        shorten(&e.to_string(), 2 * QUOTE_CHARS)
                    ),
                })?;
        let now_utc =
            chrono::DateTime::<chrono::Utc>::from_timestamp(now.unix_timestamp(), now.nanosecond())
                .ok_or_else(|| OidcError::InvalidSettings {
                    reason: format!("the time {now} is out of range"),
                })?;
        let latest_iat = now_utc
            + chrono::Duration::from_std(IAT_LEEWAY).unwrap_or_else(|_| chrono::Duration::zero());
        let verifier = CoreIdTokenVerifier::new_public_client(
            self.rp.client_id().clone(),
            self.metadata.issuer.clone(),
            JsonWebKeySet::new(vec![key.key.clone()]),
        )
        .set_allowed_algs([token.alg.clone()])
        // Further audiences are judged by `azp` (`Claims::check_authorized_party`).
        .set_other_audience_verifier_fn(|_| true)
        .set_time_fn(move || now_utc)
        .set_issue_time_verifier_fn(move |iat| match iat > latest_iat {
            true => Err(format!("issued at {iat}")),
            false => Ok(()),
        });
        let nonce_is_the_sign_ins = |nonce: Option<&Nonce>| {
            use subtle::ConstantTimeEq as _;
            match nonce {
                Some(nonce)
                    if bool::from(nonce.secret().as_bytes().ct_eq(expected_nonce.as_bytes())) =>
                {
                    Ok(())
                }
                _ => Err("not the sign-in's nonce".to_owned()),
            }
        };
        match parsed.claims(&verifier, nonce_is_the_sign_ins) {
            Ok(_) => Ok(()),
            Err(refusal) => Err(self.crate_refusal(refusal, key, claims, now.unix_timestamp())),
        }
    }

    /// The [`OidcError`] of a refusal by the crate's verifier, worded from the claims read.
    fn crate_refusal(
        &self,
        refusal: ClaimsVerificationError,
        key: &Jwk,
        claims: &Claims<'_>,
        now: i64,
    ) -> OidcError {
        match refusal {
            ClaimsVerificationError::InvalidIssuer(_) => OidcError::WrongIssuer {
                found: shorten(claims.iss, QUOTE_CHARS),
                expected: self.settings.issuer.clone(),
            },
            ClaimsVerificationError::InvalidAudience(_) => OidcError::WrongAudience {
                reason: format!(
                    "aud {:?} does not contain the client id",
                    shorten(&claims.aud.join(" "), QUOTE_CHARS)
                ),
            },
            // The crate says `Expired` for `exp` and for what the `iat` check refused.
            ClaimsVerificationError::Expired(_) if claims.exp <= now => OidcError::Expired {
                exp: claims.exp,
                now,
            },
            ClaimsVerificationError::Expired(_) => OidcError::IssuedInFuture {
                iat: claims.iat,
                now,
            },
            ClaimsVerificationError::InvalidNonce(_) => OidcError::NonceMismatch,
            ClaimsVerificationError::SignatureVerification(e) => OidcError::InvalidSignature {
                reason: format!("{e}, with key {:?}", key.kid_or_none()),
            },
            other => OidcError::MalformedToken {
                reason: shorten(&other.to_string(), 2 * QUOTE_CHARS),
            },
        }
    }

    /// The cached key for `kid`, if any.
    fn cached_key(&self, kid: Option<&str>) -> Result<Option<Jwk>, OidcError> {
        let cache = self.keys.lock().map_err(|_| OidcError::KeysUnavailable {
            reason: "the key cache's lock is poisoned".to_owned(),
        })?;
        Ok(find_key(&cache.keys, kid).cloned())
    }

    /// Fetches the keys again for a `kid` not among them, unless they were fetched less than
    /// [`KEY_REFETCH_INTERVAL`] ago, and looks again.
    async fn refetched_key(&self, kid: Option<&str>) -> Result<Jwk, OidcError> {
        let unknown = || OidcError::UnknownKey {
            kid: kid.map_or_else(|| "<none>".to_owned(), |k| shorten(k, QUOTE_CHARS)),
        };
        let poisoned = || OidcError::KeysUnavailable {
            reason: "the key cache's lock is poisoned".to_owned(),
        };
        {
            let mut cache = self.keys.lock().map_err(|_| poisoned())?;
            let now = Instant::now();
            if !refetch_due(cache.fetched_at, now) {
                return Err(unknown());
            }
            // Claimed before fetching, so concurrent sign-ins with unknown key ids make one
            // fetch, not one each.
            cache.fetched_at = now;
        }
        let keys = fetch_keys(&self.http, &self.metadata.jwks_uri)
            .await
            .map_err(|e| OidcError::KeysUnavailable {
                reason: e.to_string(),
            })?;
        let mut cache = self.keys.lock().map_err(|_| poisoned())?;
        cache.keys = keys;
        find_key(&cache.keys, kid).cloned().ok_or_else(unknown)
    }
}

/// The raw ID token of a successful token response the crate could not read because of its ID
/// token (a claim of the wrong type, say): [`OidcClient::verify_id_token`] then says which
/// check fails, with its own code.
fn raw_id_token(
    error: &serde_path_to_error::Error<serde_json::Error>,
    body: &[u8],
) -> Option<String> {
    if !error.path().to_string().starts_with("id_token") {
        return None;
    }
    match serde_json::from_slice::<Value>(body)
        .ok()?
        .get("id_token")?
    {
        Value::String(token) => Some(token.clone()),
        _ => None,
    }
}

/// Whether keys fetched at `fetched_at` may be fetched again at `now`.
fn refetch_due(fetched_at: Instant, now: Instant) -> bool {
    now.saturating_duration_since(fetched_at) >= KEY_REFETCH_INTERVAL
}

impl ProviderMetadata {
    /// Checks a discovery document: the issuer and the URLs here, the rest as the crate's
    /// `CoreProviderMetadata` (which also requires `response_types_supported`,
    /// `subject_types_supported` and `id_token_signing_alg_values_supported`).
    fn from_document(configured_issuer: &str, document: &Value) -> Result<Self, OidcError> {
        let failed = |reason: String| OidcError::DiscoveryFailed {
            url: shorten(configured_issuer, QUOTE_CHARS),
            reason,
        };
        let string = |key: &str| document.get(key).and_then(Value::as_str);
        let Some(advertised) = string("issuer") else {
            return Err(failed("the discovery document has no issuer".to_owned()));
        };
        if advertised != configured_issuer {
            return Err(OidcError::IssuerMismatch {
                configured: configured_issuer.to_owned(),
                advertised: shorten(advertised, QUOTE_CHARS),
            });
        }
        for key in ["authorization_endpoint", "token_endpoint", "jwks_uri"] {
            let value = string(key)
                .ok_or_else(|| failed(format!("the discovery document has no {key}")))?;
            parse_url(key, value)?;
        }
        let metadata = CoreProviderMetadata::deserialize(document).map_err(|e| {
            failed(format!(
                "the discovery document is not OpenID Connect Discovery metadata: {}",
                shorten(&e.to_string(), 2 * QUOTE_CHARS)
            ))
        })?;
        let code_flow = metadata
            .response_types_supported()
            .iter()
            .any(|types| types.as_slice() == [CoreResponseType::Code]);
        if !code_flow {
            return Err(OidcError::ProviderUnsupported {
                what: "the authorization code flow (response type \"code\")".to_owned(),
            });
        }
        // Not among the crate's core metadata (RFC 8414's, not OpenID Connect Discovery's).
        if let Some(Value::Array(methods)) = document.get("code_challenge_methods_supported") {
            if !methods.iter().any(|method| method.as_str() == Some("S256")) {
                return Err(OidcError::ProviderUnsupported {
                    what: "PKCE with S256".to_owned(),
                });
            }
        }
        // OpenID Connect Discovery: when absent, the default is client_secret_basic.
        let client_auth = match metadata.token_endpoint_auth_methods_supported() {
            None => ClientAuth::Basic,
            Some(methods) if methods.contains(&CoreClientAuthMethod::ClientSecretBasic) => {
                ClientAuth::Basic
            }
            Some(methods) if methods.contains(&CoreClientAuthMethod::ClientSecretPost) => {
                ClientAuth::Post
            }
            Some(_) => {
                return Err(OidcError::ProviderUnsupported {
                    what: "client_secret_basic or client_secret_post at the token endpoint"
                        .to_owned(),
                })
            }
        };
        let token_endpoint = metadata
            .token_endpoint()
            .cloned()
            .ok_or_else(|| failed("the discovery document has no token_endpoint".to_owned()))?;
        Ok(Self {
            issuer: metadata.issuer().clone(),
            authorization_endpoint: metadata.authorization_endpoint().clone(),
            token_endpoint,
            jwks_uri: metadata.jwks_uri().url().clone(),
            client_auth,
        })
    }

    fn uses_https(&self) -> bool {
        [
            self.authorization_endpoint.url(),
            self.token_endpoint.url(),
            &self.jwks_uri,
        ]
        .iter()
        .any(|url| url.scheme() == "https")
    }
}

/// Parses a URL of the issuer or provider, which must be `https` or loopback `http`.
fn parse_url(what: &'static str, value: &str) -> Result<Url, OidcError> {
    let url = Url::parse(value).map_err(|e| OidcError::InvalidSettings {
        reason: format!("{what} {:?} is not a URL: {e}", shorten(value, QUOTE_CHARS)),
    })?;
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback => Ok(url),
        _ => Err(OidcError::InsecureUrl {
            what,
            url: shorten(value, QUOTE_CHARS),
        }),
    }
}

/// The certificates of [`OidcSettings::ca_file`] as trusted roots; why not when the file cannot
/// be read, is not PEM or holds no certificate rustls can use. The binary checks the file with
/// this at start, so that a wrong file stops the start rather than the first sign-in.
pub fn ca_file_roots(path: &Path) -> Result<rustls::RootCertStore, String> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::CertificateDer;
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("ca_file {}: {e}", path.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(certs);
    if roots.is_empty() {
        return Err(format!(
            "ca_file {} holds no usable certificate (a PEM file of one or more \
             -----BEGIN CERTIFICATE----- blocks)",
            path.display()
        ));
    }
    Ok(roots)
}

/// rustls with the `ring` provider, trusting `ca_file`'s certificates, or the system's roots.
fn tls_config(ca_file: Option<&PathBuf>) -> Result<Arc<rustls::ClientConfig>, OidcError> {
    let bad = |reason: String| OidcError::InvalidSettings { reason };
    let roots = match ca_file {
        Some(path) => ca_file_roots(path).map_err(bad)?,
        None => {
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err(bad(
                    "no trusted root certificates found on this system for an https issuer \
                     (install ca-certificates or set ca_file)"
                        .to_owned(),
                ));
            }
            roots
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(format!("cannot set up TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// `openidconnect`'s HTTP client, on awc: one connection per exchange with the provider, no
/// redirect followed (a provider's endpoints are where its document says), at most
/// [`REQUEST_TIMEOUT`] and [`MAX_RESPONSE_BYTES`]. Its futures are not `Send`: they run on
/// actix's runtime, as the console's handlers do.
#[derive(Clone)]
pub(crate) struct AwcHttp {
    tls: Option<Arc<rustls::ClientConfig>>,
}

/// Why an exchange with the provider failed: its URL, shortened, and the transport's error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct HttpError(String);

impl<'c> AsyncHttpClient<'c> for AwcHttp {
    type Error = HttpError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(self.send(request))
    }
}

impl AwcHttp {
    fn client(&self) -> awc::Client {
        let mut connector = awc::Connector::new().timeout(REQUEST_TIMEOUT);
        if let Some(tls) = &self.tls {
            connector = connector.rustls_0_23(Arc::clone(tls));
        }
        awc::Client::builder()
            .connector(connector)
            .timeout(REQUEST_TIMEOUT)
            .disable_redirects()
            .finish()
    }

    /// One request (the crate's `http` 1 types) through awc (`http` 0.2 types).
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        use awc::http::header::{HeaderName, HeaderValue};
        let url = request.uri().to_string();
        let failed =
            |reason: String| HttpError(format!("{}: {reason}", shorten(&url, QUOTE_CHARS)));
        let method = awc::http::Method::from_bytes(request.method().as_str().as_bytes())
            .map_err(|e| failed(e.to_string()))?;
        let mut outgoing = self.client().request(method, url.as_str());
        for (name, value) in request.headers() {
            let name = HeaderName::from_bytes(name.as_str().as_bytes());
            let value = HeaderValue::from_bytes(value.as_bytes());
            let (Ok(name), Ok(value)) = (name, value) else {
                return Err(failed("a request header awc does not take".to_owned()));
            };
            outgoing = outgoing.append_header((name, value));
        }
        let mut response = outgoing
            .send_body(request.into_body())
            .await
            .map_err(|e| failed(e.to_string()))?;
        let mut answer =
            openidconnect::http::Response::builder().status(response.status().as_u16());
        for (name, value) in response.headers() {
            answer = answer.header(name.as_str(), value.as_bytes());
        }
        let body = response
            .body()
            .limit(MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| failed(format!("reading the answer: {e}")))?;
        answer
            .body(body.to_vec())
            .map_err(|e| failed(e.to_string()))
    }

    /// GETs `url` and reads a JSON object from a 200 answer.
    async fn get_json(&self, url: &str) -> Result<Value, OidcError> {
        let failed = |reason: String| OidcError::DiscoveryFailed {
            url: shorten(url, QUOTE_CHARS),
            reason,
        };
        let request = openidconnect::http::Request::get(url)
            .header("accept", "application/json")
            .body(Vec::new())
            .map_err(|e| failed(e.to_string()))?;
        let response = self.send(request).await.map_err(|e| failed(e.0))?;
        let status = response.status();
        if status != openidconnect::http::StatusCode::OK {
            return Err(failed(format!("the provider answered {status}")));
        }
        match serde_json::from_slice::<Value>(response.body()) {
            Ok(value @ Value::Object(_)) => Ok(value),
            Ok(_) => Err(failed("the answer is not a JSON object".to_owned())),
            Err(e) => Err(failed(format!("the answer is not JSON: {e}"))),
        }
    }
}

/// Fetches and reads the issuer's key set.
async fn fetch_keys(http: &AwcHttp, jwks_uri: &Url) -> Result<Vec<Jwk>, OidcError> {
    let document = http.get_json(jwks_uri.as_str()).await?;
    let Some(Value::Array(keys)) = document.get("keys") else {
        return Err(OidcError::DiscoveryFailed {
            url: shorten(jwks_uri.as_str(), QUOTE_CHARS),
            reason: "the key set has no keys array".to_owned(),
        });
    };
    Ok(keys.iter().filter_map(Jwk::from_json).collect())
}

/// A public key of the issuer, for signatures: the crate's key, and what this relying party
/// judges it by.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Jwk {
    kid: Option<String>,
    /// The `alg` the key is for, when it names one.
    alg: Option<String>,
    kind: KeyKind,
    key: CoreJsonWebKey,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeyKind {
    /// The modulus's length in bits.
    Rsa {
        bits: usize,
    },
    P256,
    P384,
    Ed25519,
}

impl Jwk {
    /// The key a JWK describes, or `None` for keys that are not for signatures or of a type
    /// this relying party does not verify with (symmetric `oct` keys among them: an HMAC
    /// "public" key would be a shared secret).
    fn from_json(value: &Value) -> Option<Jwk> {
        let text = |key: &str| value.get(key).and_then(Value::as_str);
        let bytes = |key: &str| text(key).and_then(|b| URL_SAFE_NO_PAD.decode(b).ok());
        if text("use").is_some_and(|u| u != "sig") {
            return None;
        }
        if let Some(ops) = value.get("key_ops").and_then(Value::as_array) {
            if !ops.iter().any(|op| op.as_str() == Some("verify")) {
                return None;
            }
        }
        let kid = text("kid").map(str::to_owned);
        let id = kid.clone().map(JsonWebKeyId::new);
        let point = |len: usize| -> Option<(Vec<u8>, Vec<u8>)> {
            let (x, y) = (bytes("x")?, bytes("y")?);
            (x.len() == len && y.len() == len).then_some((x, y))
        };
        let (kind, key) = match (text("kty")?, text("crv")) {
            ("RSA", _) => {
                let n = strip_leading_zeros(bytes("n")?);
                let e = strip_leading_zeros(bytes("e")?);
                let bits = (n.len() * 8)
                    .saturating_sub(n.first().map_or(8, |b| b.leading_zeros()) as usize);
                (KeyKind::Rsa { bits }, CoreJsonWebKey::new_rsa(n, e, id))
            }
            ("EC", Some("P-256")) => {
                let (x, y) = point(32)?;
                (
                    KeyKind::P256,
                    CoreJsonWebKey::new_ec(x, y, CoreJsonCurveType::P256, id),
                )
            }
            ("EC", Some("P-384")) => {
                let (x, y) = point(48)?;
                (
                    KeyKind::P384,
                    CoreJsonWebKey::new_ec(x, y, CoreJsonCurveType::P384, id),
                )
            }
            ("OKP", Some("Ed25519")) => {
                let x = bytes("x").filter(|x| x.len() == 32)?;
                (
                    KeyKind::Ed25519,
                    CoreJsonWebKey::new_okp(x, CoreJsonCurveType::Ed25519, id),
                )
            }
            _ => return None,
        };
        Some(Jwk {
            kid,
            // RFC 9864's fully specified name for the same keys.
            alg: text("alg").map(|alg| if alg == "Ed25519" { "EdDSA" } else { alg }.to_owned()),
            kind,
            key,
        })
    }

    /// Whether this key verifies tokens of `alg`: its type and curve decide, and its own `alg`
    /// when it names one.
    fn accepts(&self, alg: &CoreJwsSigningAlgorithm) -> bool {
        use CoreJwsSigningAlgorithm as A;
        let family = matches!(
            (self.kind, alg),
            (
                KeyKind::Rsa { .. },
                A::RsaSsaPkcs1V15Sha256
                    | A::RsaSsaPkcs1V15Sha384
                    | A::RsaSsaPkcs1V15Sha512
                    | A::RsaSsaPssSha256
                    | A::RsaSsaPssSha384
                    | A::RsaSsaPssSha512
            ) | (KeyKind::P256, A::EcdsaP256Sha256)
                | (KeyKind::P384, A::EcdsaP384Sha384)
                | (KeyKind::Ed25519, A::EdDsa)
        );
        family
            && self
                .alg
                .as_deref()
                .is_none_or(|own| parse_alg(own).as_ref() == Some(alg))
    }

    fn kid_or_none(&self) -> &str {
        self.kid.as_deref().unwrap_or("<none>")
    }
}

fn strip_leading_zeros(mut bytes: Vec<u8>) -> Vec<u8> {
    let zeros = bytes.iter().take_while(|b| **b == 0).count();
    bytes.drain(..zeros.min(bytes.len().saturating_sub(1)));
    bytes
}

/// The key with `kid`; without a `kid`, the only key there is.
fn find_key<'a>(keys: &'a [Jwk], kid: Option<&str>) -> Option<&'a Jwk> {
    match kid {
        Some(kid) => keys.iter().find(|key| key.kid.as_deref() == Some(kid)),
        None => match keys {
            [only] => Some(only),
            _ => None,
        },
    }
}

/// The signature algorithms an ID token may use, by their JOSE names.
const ALGORITHMS: [(&str, CoreJwsSigningAlgorithm); 9] = [
    ("RS256", CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256),
    ("RS384", CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha384),
    ("RS512", CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha512),
    ("PS256", CoreJwsSigningAlgorithm::RsaSsaPssSha256),
    ("PS384", CoreJwsSigningAlgorithm::RsaSsaPssSha384),
    ("PS512", CoreJwsSigningAlgorithm::RsaSsaPssSha512),
    ("ES256", CoreJwsSigningAlgorithm::EcdsaP256Sha256),
    ("ES384", CoreJwsSigningAlgorithm::EcdsaP384Sha384),
    ("EdDSA", CoreJwsSigningAlgorithm::EdDsa),
];

fn parse_alg(alg: &str) -> Option<CoreJwsSigningAlgorithm> {
    ALGORITHMS
        .iter()
        .find(|(name, _)| *name == alg)
        .map(|(_, alg)| alg.clone())
}

fn alg_name(alg: &CoreJwsSigningAlgorithm) -> &'static str {
    ALGORITHMS
        .iter()
        .find(|(_, known)| known == alg)
        .map_or("?", |(name, _)| name)
}

/// RSA keys shorter than this are refused (the `rsa` crate takes any length up to 4096 bits).
const MIN_RSA_BITS: usize = 2048;

/// A compact JWS, decoded but not verified: read here before the crate reads it, so that
/// its size, its parts and its `alg` are judged before any key is looked up.
struct CompactJws<'a> {
    signing_input: &'a str,
    header: Map<String, Value>,
    payload: Map<String, Value>,
    signature: Vec<u8>,
    alg: CoreJwsSigningAlgorithm,
}

impl<'a> CompactJws<'a> {
    fn parse(token: &'a str) -> Result<CompactJws<'a>, OidcError> {
        let malformed = |reason: String| OidcError::MalformedToken { reason };
        if token.len() > MAX_TOKEN_BYTES {
            return Err(malformed(format!(
                "it is {} bytes, over the limit of {MAX_TOKEN_BYTES}",
                token.len()
            )));
        }
        let parts: Vec<&str> = token.split('.').collect();
        let [header_b64, payload_b64, signature_b64] = parts[..] else {
            return Err(malformed(format!(
                "a compact JWS has 3 parts separated by '.', this token has {}",
                parts.len()
            )));
        };
        let decode = |part: &str, b64: &str| {
            URL_SAFE_NO_PAD
                .decode(b64)
                .map_err(|_| malformed(format!("its {part} is not base64url")))
        };
        let object = |part: &str, b64: &str| -> Result<Map<String, Value>, OidcError> {
            match serde_json::from_slice(&decode(part, b64)?) {
                Ok(Value::Object(map)) => Ok(map),
                _ => Err(malformed(format!("its {part} is not a JSON object"))),
            }
        };
        let header = object("header", header_b64)?;
        let payload = object("payload", payload_b64)?;
        let signature = decode("signature", signature_b64)?;
        if header.contains_key("crit") {
            return Err(malformed(
                "its header has crit extensions, none of which is understood here".to_owned(),
            ));
        }
        let alg = match header.get("alg") {
            Some(Value::String(alg)) => {
                parse_alg(alg).ok_or_else(|| OidcError::UnsupportedAlgorithm {
                    alg: shorten(alg, QUOTE_CHARS),
                })?
            }
            Some(other) => {
                return Err(OidcError::UnsupportedAlgorithm {
                    alg: shorten(&other.to_string(), QUOTE_CHARS),
                })
            }
            None => return Err(malformed("its header has no alg".to_owned())),
        };
        Ok(CompactJws {
            signing_input: &token[..header_b64.len() + 1 + payload_b64.len()],
            header,
            payload,
            signature,
            alg,
        })
    }

    fn kid(&self) -> Result<Option<String>, OidcError> {
        match self.header.get("kid") {
            None => Ok(None),
            Some(Value::String(kid)) => Ok(Some(kid.clone())),
            Some(_) => Err(OidcError::MalformedToken {
                reason: "its header's kid is not a string".to_owned(),
            }),
        }
    }

    /// The key's algorithm against the token's, then the signature, by the crate's key.
    fn verify_signature(&self, key: &Jwk) -> Result<(), OidcError> {
        let invalid = |reason: String| OidcError::InvalidSignature { reason };
        if !key.accepts(&self.alg) {
            return Err(invalid(format!(
                "the token says {}, but key {:?} is not for that algorithm",
                alg_name(&self.alg),
                key.kid_or_none()
            )));
        }
        if let KeyKind::Rsa { bits } = key.kind {
            if bits < MIN_RSA_BITS {
                return Err(invalid(format!(
                    "key {:?} is an RSA key of {bits} bits, under {MIN_RSA_BITS}",
                    key.kid_or_none()
                )));
            }
        }
        key.key
            .verify_signature(&self.alg, self.signing_input.as_bytes(), &self.signature)
            .map_err(|_| {
                invalid(format!(
                    "it does not verify with key {:?}",
                    key.kid_or_none()
                ))
            })
    }
}

/// The claims this relying party reads, their JSON types checked.
struct Claims<'a> {
    iss: &'a str,
    aud: Vec<&'a str>,
    azp: Option<&'a str>,
    exp: i64,
    iat: i64,
    identity: Identity,
}

/// The claims' presence and JSON types (OpenID Connect Core 3.1.3.7's, and the identity's),
/// each refusal with its code; their values are the crate's to judge, but `sub`'s emptiness.
fn read_claims<'a>(
    claims: &'a Map<String, Value>,
    groups_claim: &str,
) -> Result<Claims<'a>, OidcError> {
    let iss = required_string(claims, "iss")?;
    let aud: Vec<&str> = match claims.get("aud") {
        None => return Err(OidcError::MissingClaim { claim: "aud" }),
        Some(Value::String(aud)) => vec![aud.as_str()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .ok_or_else(|| invalid("aud", "an array with a non-string"))
            })
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(wrong_type("aud", other)),
    };
    let azp = match claims.get("azp") {
        None => None,
        Some(Value::String(azp)) => Some(azp.as_str()),
        Some(other) => return Err(wrong_type("azp", other)),
    };
    let exp = required_time(claims, "exp")?;
    let iat = required_time(claims, "iat")?;
    // Absent, the crate's check says so; of another type, it is not the sign-in's either.
    if claims
        .get("nonce")
        .is_some_and(|nonce| !matches!(nonce, Value::String(_)))
    {
        return Err(OidcError::NonceMismatch);
    }
    let subject = required_string(claims, "sub")?;
    if subject.is_empty() {
        return Err(invalid("sub", "an empty string"));
    }
    let email = match claims.get("email") {
        None | Some(Value::Null) => None,
        Some(Value::String(email)) => Some(email.clone()),
        Some(other) => return Err(wrong_type("email", other)),
    };
    // Some providers (older Amazon Cognito pools among them) send the boolean as a string.
    let email_verified = match claims.get("email_verified") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(verified)) => *verified,
        Some(Value::String(text)) if text == "true" => true,
        Some(Value::String(text)) if text == "false" => false,
        Some(other) => return Err(wrong_type("email_verified", other)),
    };
    let groups = match claims.get(groups_claim) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(group)) => vec![group.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| invalid(groups_claim, "an array with a non-string"))
            })
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(wrong_type(groups_claim, other)),
    };
    Ok(Claims {
        iss,
        aud,
        azp,
        exp,
        iat,
        identity: Identity {
            subject: subject.to_owned(),
            email,
            email_verified,
            groups,
        },
    })
}

impl Claims<'_> {
    /// `azp`, which the crate leaves unchecked: present when `aud` names several audiences,
    /// and this client when present.
    fn check_authorized_party(&self, client_id: &str) -> Result<(), OidcError> {
        match self.azp {
            None if self.aud.len() > 1 => Err(OidcError::WrongAudience {
                reason: "aud names several audiences and there is no azp".to_owned(),
            }),
            None => Ok(()),
            Some(azp) if azp == client_id => Ok(()),
            Some(azp) => Err(OidcError::WrongAudience {
                reason: format!("azp {:?} is not the client id", shorten(azp, QUOTE_CHARS)),
            }),
        }
    }
}

fn required_string<'a>(
    claims: &'a Map<String, Value>,
    claim: &'static str,
) -> Result<&'a str, OidcError> {
    match claims.get(claim) {
        None => Err(OidcError::MissingClaim { claim }),
        Some(Value::String(value)) => Ok(value),
        Some(other) => Err(wrong_type(claim, other)),
    }
}

/// A NumericDate claim: a JSON number of seconds, fractions dropped.
fn required_time(claims: &Map<String, Value>, claim: &'static str) -> Result<i64, OidcError> {
    match claims.get(claim) {
        None => Err(OidcError::MissingClaim { claim }),
        Some(Value::Number(number)) => number
            .as_i64()
            .or_else(|| {
                number
                    .as_f64()
                    .filter(|f| f.is_finite() && f.abs() < 1e15)
                    .map(|f| f.floor() as i64)
            })
            .ok_or_else(|| invalid(claim, "a number out of range")),
        Some(other) => Err(wrong_type(claim, other)),
    }
}

fn invalid(claim: &str, reason: impl Into<String>) -> OidcError {
    OidcError::InvalidClaim {
        claim: shorten(claim, QUOTE_CHARS),
        reason: reason.into(),
    }
}

/// A claim of the wrong JSON type.
fn wrong_type(claim: &str, value: &Value) -> OidcError {
    invalid(claim, format!("a JSON {}", json_kind(value)))
}

/// 32 random bytes, base64url: a state, a nonce or a PKCE verifier (43 characters, within
/// RFC 7636's 43 to 128).
fn random_token() -> Result<String, OidcError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| OidcError::Random {
        reason: e.to_string(),
    })?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// The PKCE S256 challenge of `verifier`: base64url(SHA-256(verifier)).
fn pkce_challenge(verifier: &str) -> PkceCodeChallenge {
    PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(verifier.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;
    use ring::rand::SystemRandom;
    use ring::signature::{self, EcdsaKeyPair, KeyPair as _};
    use serde_json::json;

    const ISSUER: &str = "https://id.example.com";
    const CLIENT: &str = "console";
    const NONCE: &str = "n-0S6_WzA2Mj";

    struct Signer {
        pair: EcdsaKeyPair,
        kid: &'static str,
    }

    impl Signer {
        fn new(kid: &'static str) -> Signer {
            let rng = SystemRandom::new();
            let pkcs8 =
                EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
                    .unwrap();
            let pair = EcdsaKeyPair::from_pkcs8(
                &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                pkcs8.as_ref(),
                &rng,
            )
            .unwrap();
            Signer { pair, kid }
        }

        fn jwk(&self) -> Value {
            let point = self.pair.public_key().as_ref();
            json!({
                "kty": "EC", "crv": "P-256", "kid": self.kid, "use": "sig", "alg": "ES256",
                "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
                "y": URL_SAFE_NO_PAD.encode(&point[33..]),
            })
        }

        fn sign(&self, header: &Value, claims: &Value) -> String {
            let input = format!(
                "{}.{}",
                URL_SAFE_NO_PAD.encode(header.to_string()),
                URL_SAFE_NO_PAD.encode(claims.to_string())
            );
            let sig = self
                .pair
                .sign(&SystemRandom::new(), input.as_bytes())
                .unwrap();
            format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
        }

        fn token(&self, claims: &Value) -> String {
            self.sign(&json!({"alg": "ES256", "kid": self.kid}), claims)
        }
    }

    fn now() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    fn claims() -> Value {
        json!({
            "iss": ISSUER, "aud": CLIENT, "sub": "248289761001", "nonce": NONCE,
            "iat": 1_800_000_000 - 10, "exp": 1_800_000_000 + 3600,
            "email": "ada@example.com", "email_verified": true, "groups": ["admins", "staff"],
        })
    }

    fn document() -> Value {
        json!({
            "issuer": ISSUER,
            "authorization_endpoint": "https://id.example.com/authorize?tenant=7",
            "token_endpoint": "https://id.example.com/token",
            "jwks_uri": "https://id.example.com/jwks",
            "response_types_supported": ["code", "id_token"],
            "code_challenge_methods_supported": ["plain", "S256"],
            // Required by OpenID Connect Discovery, and so by openidconnect's metadata.
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256", "ES256"],
        })
    }

    /// A client as discovery would make it, with `keys` fetched just now (so an unknown kid
    /// is not fetched again: the tests make no network request).
    fn client(keys: &[Value]) -> OidcClient {
        let settings = OidcSettings::new(
            ISSUER,
            CLIENT,
            "s3cr3t value",
            "https://flowgate.example.com/console/oidc/callback",
        );
        OidcClient::new(
            settings,
            ProviderMetadata::from_document(ISSUER, &document()).unwrap(),
            keys.iter().filter_map(Jwk::from_json).collect(),
            AwcHttp { tls: None },
        )
        .unwrap()
    }

    fn verify(client: &OidcClient, token: &str) -> Result<Identity, OidcError> {
        futures_util::FutureExt::now_or_never(client.verify_id_token(token, NONCE, now()))
            .expect("no I/O for a known key")
    }

    fn code_of(client: &OidcClient, token: &str) -> &'static str {
        verify(client, token).unwrap_err().code()
    }

    fn with(change: impl FnOnce(&mut Map<String, Value>)) -> Value {
        let mut claims = claims();
        change(claims.as_object_mut().unwrap());
        claims
    }

    #[test]
    fn a_valid_token_gives_the_identity() {
        let signer = Signer::new("k1");
        let client = client(&[signer.jwk()]);
        let identity = verify(&client, &signer.token(&claims())).unwrap();
        assert_eq!(
            identity,
            Identity {
                subject: "248289761001".into(),
                email: Some("ada@example.com".into()),
                email_verified: true,
                groups: vec!["admins".into(), "staff".into()],
            }
        );
    }

    #[test]
    fn the_groups_claim_is_configurable_and_optional_claims_may_be_absent() {
        let signer = Signer::new("k1");
        let mut client = client(&[signer.jwk()]);
        client.settings.groups_claim = "roles".into();
        let token = signer.token(&with(|c| {
            c.remove("email");
            c.remove("email_verified");
            c.insert("roles".into(), json!("editors"));
        }));
        let identity = verify(&client, &token).unwrap();
        assert_eq!(identity.email, None);
        assert!(!identity.email_verified);
        assert_eq!(identity.groups, vec!["editors".to_owned()]);
    }

    #[test]
    fn claims_are_checked_each_with_its_code() {
        let signer = Signer::new("k1");
        let client = client(&[signer.jwk()]);
        let cases: Vec<(&str, Value)> = vec![
            (
                "wrong_issuer",
                with(|c| drop(c.insert("iss".into(), json!("https://evil.example")))),
            ),
            (
                "wrong_audience",
                with(|c| drop(c.insert("aud".into(), json!("other")))),
            ),
            (
                "wrong_audience",
                with(|c| drop(c.insert("aud".into(), json!([CLIENT, "other"])))),
            ),
            (
                "wrong_audience",
                with(|c| drop(c.insert("azp".into(), json!("other")))),
            ),
            (
                "expired",
                with(|c| drop(c.insert("exp".into(), json!(1_800_000_000)))),
            ),
            (
                "issued_in_future",
                with(|c| drop(c.insert("iat".into(), json!(1_800_000_061)))),
            ),
            (
                "nonce_mismatch",
                with(|c| drop(c.insert("nonce".into(), json!("other")))),
            ),
            ("nonce_mismatch", with(|c| drop(c.remove("nonce")))),
            ("missing_claim", with(|c| drop(c.remove("sub")))),
            ("missing_claim", with(|c| drop(c.remove("exp")))),
            ("missing_claim", with(|c| drop(c.remove("iss")))),
            ("missing_claim", with(|c| drop(c.remove("aud")))),
            // A string expiry is refused, not taken as absent.
            (
                "invalid_claim",
                with(|c| drop(c.insert("exp".into(), json!("9999999999")))),
            ),
            (
                "invalid_claim",
                with(|c| drop(c.insert("groups".into(), json!([1])))),
            ),
            (
                "invalid_claim",
                with(|c| drop(c.insert("sub".into(), json!("")))),
            ),
        ];
        for (code, claims) in cases {
            assert_eq!(code_of(&client, &signer.token(&claims)), code, "{claims}");
        }
        // Within the leeway, and several audiences with azp naming this client: accepted.
        let ok = with(|c| {
            c.insert("iat".into(), json!(1_800_000_060));
            c.insert("aud".into(), json!([CLIENT, "other"]));
            c.insert("azp".into(), json!(CLIENT));
        });
        verify(&client, &signer.token(&ok)).unwrap();
    }

    #[test]
    fn the_algorithm_comes_from_the_key_and_none_or_hmac_are_refused() {
        let signer = Signer::new("k1");
        let client = client(&[signer.jwk()]);
        let token = signer.token(&claims());
        let [_, payload, signature]: [&str; 3] =
            token.split('.').collect::<Vec<_>>().try_into().unwrap();
        let with_header = |header: Value| {
            format!(
                "{}.{payload}.{signature}",
                URL_SAFE_NO_PAD.encode(header.to_string())
            )
        };
        for (header, code) in [
            (json!({"alg": "none", "kid": "k1"}), "unsupported_algorithm"),
            (
                json!({"alg": "HS256", "kid": "k1"}),
                "unsupported_algorithm",
            ),
            (json!({"alg": 256, "kid": "k1"}), "unsupported_algorithm"),
            (json!({"alg": "RS256", "kid": "k1"}), "invalid_signature"),
            (json!({"alg": "ES384", "kid": "k1"}), "invalid_signature"),
            (json!({"kid": "k1"}), "malformed_token"),
            (
                json!({"alg": "ES256", "kid": "k1", "crit": ["b64"]}),
                "malformed_token",
            ),
        ] {
            assert_eq!(
                code_of(&client, &with_header(header.clone())),
                code,
                "{header}"
            );
        }
        let unsigned = format!("{}.{payload}.", URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#));
        assert_eq!(code_of(&client, &unsigned), "unsupported_algorithm");
    }

    #[test]
    fn a_signature_by_another_key_or_a_changed_payload_is_refused() {
        let signer = Signer::new("k1");
        let client = client(&[signer.jwk()]);
        let forged = Signer::new("k1").token(&claims());
        let error = verify(&client, &forged).unwrap_err();
        assert_eq!(error.code(), "invalid_signature");
        assert!(error.to_string().contains("\"k1\""), "{error}");

        let token = signer.token(&claims());
        let other =
            URL_SAFE_NO_PAD.encode(with(|c| drop(c.insert("sub".into(), json!("x")))).to_string());
        let parts: Vec<&str> = token.split('.').collect();
        let tampered = format!("{}.{other}.{}", parts[0], parts[2]);
        assert_eq!(code_of(&client, &tampered), "invalid_signature");
    }

    #[test]
    fn key_ids_pick_the_key_and_unknown_ones_are_not_refetched_within_a_minute() {
        let (one, two) = (Signer::new("k1"), Signer::new("k2"));
        let client = client(&[one.jwk(), two.jwk()]);
        verify(&client, &two.token(&claims())).unwrap();
        // Fetched just now: no second fetch (which would need I/O) for an unknown kid.
        let stranger = Signer::new("k9");
        assert_eq!(code_of(&client, &stranger.token(&claims())), "unknown_key");
        // No kid and several keys: which one is unknown.
        let anonymous = one.sign(&json!({"alg": "ES256"}), &claims());
        assert_eq!(code_of(&client, &anonymous), "unknown_key");
        // No kid and a single key: that key.
        let single = super::tests::client(&[one.jwk()]);
        verify(&single, &anonymous).unwrap();

        let start = Instant::now();
        assert!(!refetch_due(start, start + Duration::from_secs(59)));
        assert!(refetch_due(start, start + KEY_REFETCH_INTERVAL));
    }

    #[test]
    fn keys_not_for_signatures_or_of_unknown_types_are_ignored() {
        let signer = Signer::new("k1");
        let mut enc = signer.jwk();
        enc["use"] = json!("enc");
        let mut wrong_ops = signer.jwk();
        wrong_ops["key_ops"] = json!(["encrypt"]);
        let oct = json!({"kty": "oct", "kid": "k1", "k": "c2VjcmV0"});
        let mut short = signer.jwk();
        short["x"] = json!("AAAA");
        for key in [enc, wrong_ops, oct, short] {
            assert_eq!(Jwk::from_json(&key), None, "{key}");
        }
        let rsa = json!({"kty": "RSA", "kid": "r", "n": "AAEC", "e": "AQAB"});
        assert_eq!(
            Jwk::from_json(&rsa).unwrap().key,
            CoreJsonWebKey::new_rsa(
                vec![1, 2],
                vec![1, 0, 1],
                Some(JsonWebKeyId::new("r".into()))
            )
        );
    }

    #[test]
    fn malformed_tokens_are_refused_before_any_key_is_looked_up() {
        let client = client(&[]);
        let huge = "a".repeat(MAX_TOKEN_BYTES + 1);
        for token in ["", "a.b", "a.b.c.d.e", "!!.e30.", "e30.W10.", huge.as_str()] {
            assert_eq!(code_of(&client, token), "malformed_token", "{token:.20}");
        }
    }

    #[test]
    fn discovery_documents_are_checked() {
        let check = |change: &dyn Fn(&mut Value)| {
            let mut doc = document();
            change(&mut doc);
            ProviderMetadata::from_document(ISSUER, &doc).map_err(|e| e.code())
        };
        let metadata = check(&|_| {}).unwrap();
        assert_eq!(metadata.client_auth, ClientAuth::Basic);
        assert_eq!(
            check(&|d| d["issuer"] = json!("https://id.example.com/")).unwrap_err(),
            "issuer_mismatch"
        );
        assert_eq!(
            check(&|d| d["response_types_supported"] = json!(["id_token"])).unwrap_err(),
            "provider_unsupported"
        );
        assert_eq!(
            check(&|d| d["code_challenge_methods_supported"] = json!(["plain"])).unwrap_err(),
            "provider_unsupported"
        );
        assert_eq!(
            check(&|d| d["token_endpoint"] = json!("http://id.example.com/token")).unwrap_err(),
            "insecure_url"
        );
        assert_eq!(
            check(&|d| drop(d.as_object_mut().unwrap().remove("jwks_uri"))).unwrap_err(),
            "discovery_failed"
        );
        let post = check(&|d| {
            d["token_endpoint_auth_methods_supported"] =
                json!(["private_key_jwt", "client_secret_post"])
        });
        assert_eq!(post.unwrap().client_auth, ClientAuth::Post);
        let both = check(&|d| {
            d["token_endpoint_auth_methods_supported"] =
                json!(["client_secret_post", "client_secret_basic"])
        });
        assert_eq!(both.unwrap().client_auth, ClientAuth::Basic);
        assert_eq!(
            check(&|d| d["token_endpoint_auth_methods_supported"] = json!(["private_key_jwt"]))
                .unwrap_err(),
            "provider_unsupported"
        );
    }

    #[test]
    fn plain_http_is_taken_on_loopback_only() {
        for ok in [
            "https://id.example.com",
            "http://127.0.0.1:8080",
            "http://[::1]:9000/x",
            "http://localhost:3000",
        ] {
            parse_url("issuer", ok).unwrap();
        }
        for (bad, code) in [
            ("http://id.example.com", "insecure_url"),
            ("http://10.0.0.1", "insecure_url"),
            ("ftp://127.0.0.1", "insecure_url"),
            ("not a url", "invalid_settings"),
        ] {
            assert_eq!(parse_url("issuer", bad).unwrap_err().code(), code, "{bad}");
        }
    }

    #[test]
    fn begin_sends_state_nonce_and_the_s256_challenge() {
        let client = client(&[]);
        let (url, pending) = client.begin_at(now()).unwrap();
        let url = Url::parse(&url).unwrap();
        let query: std::collections::HashMap<String, String> =
            url.query_pairs().into_owned().collect();
        assert_eq!(url.path(), "/authorize");
        assert_eq!(query["tenant"], "7");
        assert_eq!(query["response_type"], "code");
        assert_eq!(query["client_id"], CLIENT);
        assert_eq!(query["redirect_uri"], client.settings.redirect_url);
        assert_eq!(query["scope"], "openid email profile");
        assert_eq!(query["state"], pending.state);
        assert_eq!(query["nonce"], pending.nonce);
        assert_eq!(query["code_challenge_method"], "S256");
        assert_eq!(
            query["code_challenge"],
            pkce_challenge(&pending.verifier).as_str()
        );
        assert_eq!(pending.verifier.len(), 43);
        assert_eq!(pending.created_at, now());
        let (_, again) = client.begin_at(now()).unwrap();
        assert_ne!(again.state, pending.state);
        assert_ne!(again.nonce, pending.nonce);
        assert_ne!(again.verifier, pending.verifier);
        // RFC 7636 appendix B's example.
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk").as_str(),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        // The pending sign-in survives a round trip through JSON (the store or a cookie).
        let text = serde_json::to_string(&pending).unwrap();
        assert_eq!(
            serde_json::from_str::<PendingSignIn>(&text).unwrap(),
            pending
        );
    }

    #[test]
    fn a_state_mismatch_is_refused_before_any_request() {
        let client = client(&[]);
        let (_, pending) = client.begin_at(now()).unwrap();
        let result = futures_util::FutureExt::now_or_never(client.complete(
            &pending,
            "forged-state",
            "code",
            now(),
        ))
        .expect("no I/O before the state check");
        assert_eq!(result.unwrap_err().code(), "state_mismatch");
    }

    #[test]
    fn secrets_stay_out_of_debug_output_and_messages_are_shortened() {
        let client = client(&[]);
        let (_, pending) = client.begin_at(now()).unwrap();
        let shown = format!("{client:?} {pending:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(!shown.contains(&pending.nonce), "{shown}");
        assert!(!shown.contains(&pending.verifier), "{shown}");
        assert!(shown.contains(&pending.state), "{shown}");
        let long = "x".repeat(500);
        let error = OidcError::StateMismatch {
            returned: shorten(&long, QUOTE_CHARS),
        };
        assert!(error.to_string().len() < 120, "{error}");
        assert_eq!(
            authorization_sent(&client, &pending),
            format!("Basic {}", STANDARD.encode("console:s3cr3t+value"))
        );
    }

    /// The `Authorization` header of the token request `client` sends for `pending`, to a
    /// stand-in provider that refuses the code.
    fn authorization_sent(client: &OidcClient, pending: &PendingSignIn) -> String {
        let seen = std::sync::Mutex::new(String::new());
        let provider = |request: HttpRequest| {
            let header = request.headers().get("authorization");
            *seen.lock().unwrap() = header.map_or(String::new(), |h| h.to_str().unwrap().into());
            let refusal = openidconnect::http::Response::builder()
                .status(400)
                .header("content-type", "application/json")
                .body(br#"{"error":"invalid_grant"}"#.to_vec())
                .unwrap();
            std::future::ready(Ok::<_, HttpError>(refusal))
        };
        let refused = futures_util::FutureExt::now_or_never(client.redeem(&provider, pending, "c"))
            .expect("no I/O");
        assert_eq!(refused.unwrap_err().code(), "token_request_failed");
        seen.into_inner().unwrap()
    }

    #[test]
    fn settings_read_with_their_defaults() {
        let settings: OidcSettings = serde_json::from_value(json!({
            "issuer": ISSUER, "client_id": CLIENT, "client_secret": "s",
            "redirect_url": "https://flowgate.example.com/cb",
        }))
        .unwrap();
        assert_eq!(settings.scopes, ["openid", "email", "profile"]);
        assert_eq!(settings.groups_claim, "groups");
        assert_eq!(settings.ca_file, None);
    }
}
