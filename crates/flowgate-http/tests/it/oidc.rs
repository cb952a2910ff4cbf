//! OpenID Connect sign-in (D28, `flowgate_http::oidc`) against a real provider: panva's
//! `oidc-provider` (`flowgate_testkit::OidcProvider`), one per test on a free port. A test
//! signs in as a person would, without a browser: it follows the authorization URL with an
//! HTTP client that keeps cookies, posts the provider's login and consent forms, and reads the
//! code from the redirect to the console.
//! A test that cannot install or start the provider fails; none is skipped.

use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use flowgate_http::oidc::{Identity, OidcClient, OidcSettings, PendingSignIn};
use flowgate_testkit::{OidcProvider, ServerCert, TestCa};
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::Value;
use time::OffsetDateTime;

/// Where both test clients are sent back to (provider.js registers it).
const REDIRECT_URL: &str = "http://127.0.0.1:9999/console/oidc/callback";

/// The account the tests sign in as; provider.js derives its claims from the login.
const LOGIN: &str = "ada";

/// A running provider ([`OidcProvider`]) whose discovery document answers.
struct Provider {
    /// Stopped when this is dropped.
    _inner: OidcProvider,
    issuer: String,
}

impl Provider {
    /// A plain http provider on 127.0.0.1.
    async fn start() -> Provider {
        Self::start_with(None).await
    }

    /// An https provider with `cert`.
    async fn start_tls(cert: &ServerCert) -> Provider {
        Self::start_with(Some(cert)).await
    }

    async fn start_with(cert: Option<&ServerCert>) -> Provider {
        let inner = OidcProvider::start(cert, &[]);
        let provider = Provider {
            issuer: inner.issuer.clone(),
            _inner: inner,
        };
        provider.wait_for_discovery(cert.is_some()).await;
        provider
    }

    /// Until the discovery document answers 200.
    async fn wait_for_discovery(&self, tls: bool) {
        let url = format!("{}/.well-known/openid-configuration", self.issuer);
        let client = if tls {
            // Any certificate: this only waits; the tests judge the certificate.
            Browser::client(Some(insecure_tls()))
        } else {
            Browser::client(None)
        };
        for _ in 0..100 {
            if let Ok(response) = client.get(&url).send().await {
                if response.status() == 200 {
                    return;
                }
            }
            actix_web::rt::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the provider's discovery document at {url} did not answer within 10 s");
    }

    fn settings(&self, client: &str) -> OidcSettings {
        let mut settings = OidcSettings::new(
            &self.issuer,
            client,
            format!("secret-{}", client.trim_start_matches("client-")),
            REDIRECT_URL,
        );
        settings.scopes = ["openid", "email", "profile", "groups"]
            .map(String::from)
            .to_vec();
        settings
    }

    async fn client(&self, client: &str) -> OidcClient {
        OidcClient::discover(self.settings(client)).await.unwrap()
    }
}

/// A person's browser, as far as a sign-in needs one: it keeps cookies (by name and path),
/// does not follow redirects by itself, and fills the provider's forms.
struct Browser {
    client: awc::Client,
    /// (name, path, value)
    cookies: Vec<(String, String, String)>,
}

/// What the provider redirected back with.
struct Callback {
    code: String,
    state: String,
}

impl Browser {
    fn new(tls: Option<Arc<rustls::ClientConfig>>) -> Browser {
        Browser {
            client: Self::client(tls),
            cookies: Vec::new(),
        }
    }

    fn client(tls: Option<Arc<rustls::ClientConfig>>) -> awc::Client {
        let mut connector = awc::Connector::new();
        if let Some(tls) = tls {
            connector = connector.rustls_0_23(tls);
        }
        awc::Client::builder()
            .connector(connector)
            .disable_redirects()
            .timeout(Duration::from_secs(10))
            .finish()
    }

    /// GET or POST (`form`) `url` with the cookies for its path; keeps the cookies set.
    /// Returns the status, the redirect's absolute location, and the body.
    async fn request(
        &mut self,
        url: &str,
        form: Option<&[(&str, &str)]>,
    ) -> (u16, Option<String>, String) {
        let parsed = url::Url::parse(url).unwrap();
        let cookie = self
            .cookies
            .iter()
            .filter(|(_, path, _)| parsed.path().starts_with(path.as_str()))
            .map(|(name, _, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("; ");
        let mut request = match form {
            Some(_) => self.client.post(url),
            None => self.client.get(url),
        };
        if !cookie.is_empty() {
            request = request.insert_header(("cookie", cookie));
        }
        let mut response = match form {
            Some(form) => request.send_form(&form).await,
            None => request.send().await,
        }
        .unwrap_or_else(|e| panic!("{url}: {e}"));
        for set in response.headers().get_all("set-cookie") {
            self.keep_cookie(set.to_str().unwrap());
        }
        let location = response
            .headers()
            .get("location")
            .map(|l| parsed.join(l.to_str().unwrap()).unwrap().to_string());
        let body = response.body().limit(1 << 20).await.unwrap();
        (
            response.status().as_u16(),
            location,
            String::from_utf8_lossy(&body).into_owned(),
        )
    }

    fn keep_cookie(&mut self, header: &str) {
        let mut attributes = header.split(';').map(str::trim);
        let (name, value) = attributes.next().unwrap().split_once('=').unwrap();
        let mut path = "/".to_owned();
        let mut expired = false;
        for attribute in attributes {
            let (key, val) = attribute.split_once('=').unwrap_or((attribute, ""));
            match key.to_ascii_lowercase().as_str() {
                "path" => path = val.to_owned(),
                "expires" => expired |= val.contains("1970"),
                "max-age" => expired |= val.starts_with('0') || val.starts_with('-'),
                _ => {}
            }
        }
        self.cookies.retain(|(n, p, _)| !(n == name && *p == path));
        if !expired {
            self.cookies.push((name.to_owned(), path, value.to_owned()));
        }
    }

    /// Follows `authorization_url` through the provider's login and consent forms as `login`
    /// and returns what it redirects to the console with.
    async fn sign_in(&mut self, authorization_url: &str, login: &str) -> Callback {
        let mut url = authorization_url.to_owned();
        let mut form: Option<Vec<(String, String)>> = None;
        for _ in 0..12 {
            let pairs: Option<Vec<(&str, &str)>> = form
                .as_ref()
                .map(|form| form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect());
            let (status, location, body) = self.request(&url, pairs.as_deref()).await;
            form = None;
            match (status, location) {
                (300..=399, Some(location)) if location.starts_with(REDIRECT_URL) => {
                    let query: std::collections::HashMap<String, String> =
                        url::Url::parse(&location)
                            .unwrap()
                            .query_pairs()
                            .into_owned()
                            .collect();
                    assert!(
                        !query.contains_key("error"),
                        "the provider refused: {location}"
                    );
                    return Callback {
                        code: query["code"].clone(),
                        state: query["state"].clone(),
                    };
                }
                (300..=399, Some(location)) => url = location,
                (200, _) => {
                    let (action, mut fields) = read_form(&body);
                    if fields.iter().any(|(name, _)| name == "login") {
                        fields.retain(|(name, _)| name != "login" && name != "password");
                        fields.push(("login".into(), login.into()));
                        fields.push(("password".into(), "any password".into()));
                    }
                    url = url::Url::parse(&url)
                        .unwrap()
                        .join(&action)
                        .unwrap()
                        .to_string();
                    form = Some(fields);
                }
                (status, _) => panic!("{url} answered {status}: {body}"),
            }
        }
        panic!("no redirect to the console after 12 steps");
    }
}

/// The first form of a page: its action and its inputs (name, value).
fn read_form(html: &str) -> (String, Vec<(String, String)>) {
    let attribute = |tag: &str, name: &str| -> Option<String> {
        let start = tag.find(&format!("{name}=\""))? + name.len() + 2;
        let end = start + tag[start..].find('"')?;
        Some(tag[start..end].replace("&amp;", "&").replace("&#x2F;", "/"))
    };
    let form_start = html
        .find("<form")
        .unwrap_or_else(|| panic!("no form in {html}"));
    let form_html = &html[form_start..];
    let action = attribute(&form_html[..form_html.find('>').unwrap()], "action").unwrap();
    let mut fields = Vec::new();
    for piece in form_html.split("<input").skip(1) {
        let tag = &piece[..piece.find('>').unwrap()];
        if let Some(name) = attribute(tag, "name") {
            fields.push((name, attribute(tag, "value").unwrap_or_default()));
        }
    }
    (action, fields)
}

/// rustls trusting `ca`'s certificate.
fn tls_trusting(ca: &TestCa) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(&ca.cert_file).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// rustls accepting any certificate, only to wait for a provider to listen.
fn insecure_tls() -> Arc<rustls::ClientConfig> {
    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    #[derive(Debug)]
    struct Anything(Arc<rustls::crypto::CryptoProvider>);
    impl ServerCertVerifier for Anything {
        fn verify_server_cert(
            &self,
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &[rustls::pki_types::CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &rustls::pki_types::CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &rustls::pki_types::CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Anything(provider)))
            .with_no_client_auth(),
    )
}

/// A sign-in of `client` taken to the callback: what the console kept and what came back.
async fn signed_in(client: &OidcClient, browser: &mut Browser) -> (PendingSignIn, Callback) {
    let (url, pending) = client.begin().unwrap();
    let callback = browser.sign_in(&url, LOGIN).await;
    (pending, callback)
}

fn ada() -> Identity {
    Identity {
        subject: LOGIN.into(),
        email: Some(format!("{LOGIN}@flowgate.test")),
        email_verified: true,
        groups: vec!["flowgate-editors".into(), "staff".into()],
    }
}

/// The token's header and payload re-signed ES256 by a key of the test's own.
fn resigned_by_another_key(token: &str, header: Option<Value>) -> String {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let key =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let mut parts = token.split('.');
    let (header_b64, payload_b64) = (parts.next().unwrap(), parts.next().unwrap());
    let header_b64 = header.map_or_else(
        || header_b64.to_owned(),
        |header| URL_SAFE_NO_PAD.encode(header.to_string()),
    );
    let input = format!("{header_b64}.{payload_b64}");
    let signature = key.sign(&rng, input.as_bytes()).unwrap();
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
}

fn header_of(token: &str) -> Value {
    let header = token.split('.').next().unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap()).unwrap()
}

#[actix_web::test]
async fn a_person_signs_in_and_the_id_token_gives_their_email_and_groups() {
    let provider = Provider::start().await;
    // client-a's ID tokens are RS256, client-b's ES256: both key types of the issuer's set.
    for name in ["client-a", "client-b"] {
        let client = provider.client(name).await;
        let mut browser = Browser::new(None);
        let (pending, callback) = signed_in(&client, &mut browser).await;
        assert_eq!(callback.state, pending.state);
        let identity = client
            .complete(
                &pending,
                &callback.state,
                &callback.code,
                OffsetDateTime::now_utc(),
            )
            .await
            .unwrap_or_else(|e| panic!("{name}: {} {e}", e.code()));
        assert_eq!(identity, ada(), "{name}");
        // The code is single use: the provider refuses it a second time.
        let again = client
            .complete(
                &pending,
                &callback.state,
                &callback.code,
                OffsetDateTime::now_utc(),
            )
            .await
            .unwrap_err();
        assert_eq!(again.code(), "token_request_failed", "{again}");
        assert!(again.to_string().contains("invalid_grant"), "{again}");
    }
}

#[actix_web::test]
async fn a_state_that_is_not_the_sign_ins_is_refused_before_the_code_is_spent() {
    let provider = Provider::start().await;
    let client = provider.client("client-a").await;
    let (pending, callback) = signed_in(&client, &mut Browser::new(None)).await;
    let error = client
        .complete(
            &pending,
            "forged",
            &callback.code,
            OffsetDateTime::now_utc(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), "state_mismatch", "{error}");
    assert!(error.to_string().contains("\"forged\""), "{error}");
    // Nothing was sent: the code still signs the person in with the right state.
    let identity = client
        .complete(
            &pending,
            &callback.state,
            &callback.code,
            OffsetDateTime::now_utc(),
        )
        .await
        .unwrap();
    assert_eq!(identity, ada());
}

#[actix_web::test]
async fn an_id_token_with_another_nonce_is_refused() {
    let provider = Provider::start().await;
    let client = provider.client("client-a").await;
    let (pending, callback) = signed_in(&client, &mut Browser::new(None)).await;
    let (_, other) = client.begin().unwrap();
    let replayed = PendingSignIn {
        nonce: other.nonce,
        ..pending
    };
    let error = client
        .complete(
            &replayed,
            &callback.state,
            &callback.code,
            OffsetDateTime::now_utc(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), "nonce_mismatch", "{error}");
}

#[actix_web::test]
async fn an_id_token_for_another_client_is_refused() {
    let provider = Provider::start().await;
    let (a, b) = (
        provider.client("client-a").await,
        provider.client("client-b").await,
    );
    let (pending, callback) = signed_in(&b, &mut Browser::new(None)).await;
    let token = b.exchange_code(&pending, &callback.code).await.unwrap();
    // Valid for client-b, signed by the issuer; client-a must not take it.
    b.verify_id_token(&token, &pending.nonce, OffsetDateTime::now_utc())
        .await
        .unwrap();
    let error = a
        .verify_id_token(&token, &pending.nonce, OffsetDateTime::now_utc())
        .await
        .unwrap_err();
    assert_eq!(error.code(), "wrong_audience", "{error}");
    assert!(error.to_string().contains("client-b"), "{error}");
}

#[actix_web::test]
async fn an_expired_id_token_is_refused() {
    let provider = Provider::start().await;
    let client = provider.client("client-a").await;
    let (pending, callback) = signed_in(&client, &mut Browser::new(None)).await;
    let later = OffsetDateTime::now_utc() + time::Duration::hours(2);
    let error = client
        .complete(&pending, &callback.state, &callback.code, later)
        .await
        .unwrap_err();
    assert_eq!(error.code(), "expired", "{error}");
}

#[actix_web::test]
async fn an_id_token_signed_by_another_key_is_refused() {
    let provider = Provider::start().await;
    let b = provider.client("client-b").await;
    let (pending, callback) = signed_in(&b, &mut Browser::new(None)).await;
    let token = b.exchange_code(&pending, &callback.code).await.unwrap();
    let now = OffsetDateTime::now_utc();
    assert_eq!(header_of(&token)["kid"], "ec-1");

    // The same header (ES256, the issuer's kid) and payload, signed by the test's own key.
    let forged = resigned_by_another_key(&token, None);
    let error = b
        .verify_id_token(&forged, &pending.nonce, now)
        .await
        .unwrap_err();
    assert_eq!(error.code(), "invalid_signature", "{error}");

    // The issuer's RSA key id with an ES256 signature: the key decides the algorithm.
    let mut header = header_of(&token);
    header["kid"] = "rsa-1".into();
    let crossed = resigned_by_another_key(&token, Some(header.clone()));
    let error = b
        .verify_id_token(&crossed, &pending.nonce, now)
        .await
        .unwrap_err();
    assert_eq!(error.code(), "invalid_signature", "{error}");

    // A key id the issuer does not have (its keys were fetched moments ago: not again).
    header["kid"] = "rotated-away".into();
    let unknown = resigned_by_another_key(&token, Some(header));
    let error = b
        .verify_id_token(&unknown, &pending.nonce, now)
        .await
        .unwrap_err();
    assert_eq!(error.code(), "unknown_key", "{error}");

    // The genuine token still verifies.
    b.verify_id_token(&token, &pending.nonce, now)
        .await
        .unwrap();
}

#[actix_web::test]
async fn discovery_refuses_a_provider_that_names_another_issuer() {
    let provider = Provider::start().await;
    let port = provider.issuer.rsplit(':').next().unwrap();
    // The same provider reached by another name, and the configured issuer with a trailing
    // slash: the document names http://127.0.0.1:PORT exactly, so neither is accepted.
    for configured in [
        format!("http://localhost:{port}"),
        format!("{}/", provider.issuer),
    ] {
        let mut settings = provider.settings("client-a");
        settings.issuer = configured.clone();
        let error = OidcClient::discover(settings).await.unwrap_err();
        assert_eq!(error.code(), "issuer_mismatch", "{configured}: {error}");
        assert!(error.to_string().contains(&provider.issuer), "{error}");
    }
    // Nothing listening: discovery fails, and says where it looked.
    let mut settings = provider.settings("client-a");
    settings.issuer = "http://127.0.0.1:9".into();
    let error = OidcClient::discover(settings).await.unwrap_err();
    assert_eq!(error.code(), "discovery_failed", "{error}");
    assert!(
        error.to_string().contains("127.0.0.1:9/.well-known"),
        "{error}"
    );
}

#[actix_web::test]
async fn an_https_provider_on_a_private_authority_signs_in_with_its_ca_file() {
    let ca = TestCa::new("oidc");
    let provider = Provider::start_tls(&ca.issue(&["127.0.0.1"])).await;
    assert!(
        provider.issuer.starts_with("https://"),
        "{}",
        provider.issuer
    );

    // The system's roots do not include the test's authority (and a machine without
    // ca-certificates has no roots at all: refused as settings before any request).
    let error = OidcClient::discover(provider.settings("client-a"))
        .await
        .unwrap_err();
    assert!(
        ["discovery_failed", "invalid_settings"].contains(&error.code()),
        "{error}"
    );

    let mut settings = provider.settings("client-a");
    settings.ca_file = Some(ca.cert_file.clone());
    let client = OidcClient::discover(settings).await.unwrap();
    let mut browser = Browser::new(Some(tls_trusting(&ca)));
    let (pending, callback) = signed_in(&client, &mut browser).await;
    let identity = client
        .complete(
            &pending,
            &callback.state,
            &callback.code,
            OffsetDateTime::now_utc(),
        )
        .await
        .unwrap();
    assert_eq!(identity, ada());

    // Another authority's file: refused.
    let stranger = TestCa::new("stranger");
    let mut settings = provider.settings("client-a");
    settings.ca_file = Some(stranger.cert_file.clone());
    let error = OidcClient::discover(settings).await.unwrap_err();
    assert_eq!(error.code(), "discovery_failed", "{error}");
}
