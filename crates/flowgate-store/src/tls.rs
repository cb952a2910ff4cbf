//! TLS to PostgreSQL, and how the store connects: the libpq-style `sslmode` and `sslrootcert`
//! parameters of a `postgres://` URL ([`TlsMode`], [`url_tls`]), and [`PgConnector`], which
//! makes every PostgreSQL connection of the store with them.
//!
//! The TLS is rustls's (`ring` provider: no OpenSSL, no aws-lc-rs C build) through
//! tokio-postgres-rustls's connector; the certificate verifiers of `prefer`/`require` (none)
//! and `verify-ca` (the chain without the host name) are written here because rustls ships
//! only `verify-full`'s.
//!
//! `AsyncPgConnection::establish` only connects without TLS, so every PostgreSQL connection of
//! the store (pooled, migrations, the `LISTEN` connection) is made here: tokio-postgres connects
//! with the connector, and diesel-async gets the client *and* its connection
//! (`try_from_client_and_connection`), which keeps notifications working.

use std::error::Error as _;
use std::fmt;
use std::future::Future;
use std::io;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use diesel::{ConnectionError, ConnectionResult};
use diesel_async::AsyncPgConnection;
use flowgate_domain::ports::StoreError;
use percent_encoding::percent_decode_str;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, InvalidDnsNameError, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::Socket;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::config_error;
use flowgate_domain::secrets::Secrets;

/// How a PostgreSQL connection uses TLS: the libpq `sslmode` URL parameter
/// (`postgres://host/db?sslmode=verify-full`), with libpq's meaning for each value.
///
/// **The default, when the URL has no `sslmode`, is [`TlsMode::Prefer`], as in libpq.** A URL
/// then behaves in flowgate as it does in `psql` and every other libpq client (operators test
/// URLs with `psql`); a managed server that requires TLS works even when its URL omits
/// `sslmode`; a local server without TLS keeps working. `prefer` guards against passive
/// eavesdropping only: it checks no certificate and falls back to plain text when the server
/// does not offer TLS. Production should say `sslmode=verify-full` (or at least `require`).
///
/// One difference from libpq: when the server accepts TLS but the handshake then fails,
/// `prefer` reports the error instead of retrying without TLS (tokio-postgres does not retry).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TlsMode {
    /// `disable`: plain text only.
    Disable,
    /// `prefer`: TLS when the server offers it, plain text otherwise; no certificate check
    /// (unless `sslrootcert` is given: then the chain is verified, as libpq does).
    #[default]
    Prefer,
    /// `require`: TLS or no connection; no certificate check (libpq semantics: encryption
    /// without authentication of the server). With `sslrootcert` it behaves as
    /// [`TlsMode::VerifyCa`], as in libpq.
    Require,
    /// `verify-ca`: TLS, and the server's certificate must chain to the root in
    /// `sslrootcert=FILE` (required, as in libpq); its host name is not checked.
    VerifyCa,
    /// `verify-full`: as `verify-ca`, and the certificate must name the host of the URL. With
    /// `sslrootcert=system` (as in PostgreSQL 16's libpq) the operating system's roots are
    /// trusted; that is the only mode that accepts them, since they trust certificates of every
    /// host, so only the host name check ties the certificate to the database.
    VerifyFull,
}

impl TlsMode {
    /// The `sslmode` value: `disable`, `prefer`, `require`, `verify-ca` or `verify-full`.
    pub const fn as_str(self) -> &'static str {
        match self {
            TlsMode::Disable => "disable",
            TlsMode::Prefer => "prefer",
            TlsMode::Require => "require",
            TlsMode::VerifyCa => "verify-ca",
            TlsMode::VerifyFull => "verify-full",
        }
    }
}

impl fmt::Display for TlsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TlsMode {
    type Err = StoreError;

    /// Parses an `sslmode` value; anything else is a [`StoreError::Config`] naming `sslmode`
    /// and the accepted values (`allow` is refused: it would try plain text first).
    fn from_str(value: &str) -> Result<Self, StoreError> {
        Ok(match value {
            "disable" => TlsMode::Disable,
            "prefer" => TlsMode::Prefer,
            "require" => TlsMode::Require,
            "verify-ca" => TlsMode::VerifyCa,
            "verify-full" => TlsMode::VerifyFull,
            other => {
                return Err(config_error(format!(
                    "invalid database URL parameter `sslmode={other}`: expected disable, prefer, \
                     require, verify-ca or verify-full"
                )))
            }
        })
    }
}

/// The trusted roots of `sslrootcert`: a PEM file, or the operating system's (`system`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Roots {
    File(String),
    System,
}

impl Roots {
    fn setting(&self) -> String {
        match self {
            Roots::File(path) => format!("sslrootcert={path}"),
            Roots::System => "sslrootcert=system".to_owned(),
        }
    }
}

/// What a `postgres://` URL asks of TLS, read without touching any file ([`url_tls`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UrlTls {
    /// The mode in effect (`require` with `sslrootcert=FILE` reads as `verify-ca`, and
    /// `sslrootcert=system` without `sslmode` as `verify-full`, as in libpq).
    pub mode: TlsMode,
    /// Whether every host of the URL is this machine (`localhost`, a loopback address or a
    /// Unix socket), where TLS protects nothing.
    pub loopback: bool,
}

impl UrlTls {
    /// Whether the server's certificate is checked (`verify-ca`, `verify-full`).
    pub fn authenticates(&self) -> bool {
        matches!(self.mode, TlsMode::VerifyCa | TlsMode::VerifyFull)
    }
}

/// What `url` asks of TLS, applying libpq's rules; the same errors as [`Store::connect`]
/// gives for the TLS parameters (a file named in `sslrootcert` is not read here).
///
/// [`Store::connect`]: crate::Store::connect
pub fn url_tls(url: &str) -> Result<UrlTls, StoreError> {
    let parsed = Parsed::new(url)?;
    let loopback = parsed.config.get_hosts().iter().all(|host| match host {
        tokio_postgres::config::Host::Tcp(name) => {
            name == "localhost"
                || name
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        tokio_postgres::config::Host::Unix(_) => true,
    });
    Ok(UrlTls {
        mode: parsed.mode,
        loopback,
    })
}

/// A `postgres://` URL with its TLS parameters taken out and checked against libpq's rules.
struct Parsed {
    config: tokio_postgres::Config,
    mode: TlsMode,
    roots: Option<Roots>,
    secrets: Secrets,
}

impl Parsed {
    fn new(url: &str) -> Result<Parsed, StoreError> {
        let secrets = Secrets::of(url);
        let scrub_err = |e: StoreError| scrub_config_error(e, &secrets);
        let (base, query) = match url.split_once('?') {
            Some((base, query)) => (base, query),
            None => (url, ""),
        };
        let mut mode = None;
        let mut roots = None;
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decoded = percent_decode_str(value).decode_utf8_lossy().into_owned();
            match key {
                "sslmode" => mode = Some(decoded.parse::<TlsMode>().map_err(scrub_err)?),
                "sslrootcert" if decoded == "system" => roots = Some(Roots::System),
                "sslrootcert" => roots = Some(Roots::File(decoded)),
                _ => kept.push(pair),
            }
        }
        let stripped = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        let config = tokio_postgres::Config::from_str(&stripped).map_err(|e| {
            scrub_config_error(
                config_error(format!("invalid PostgreSQL URL: {e}")),
                &secrets,
            )
        })?;
        let mode = match (mode, &roots) {
            // libpq: `sslrootcert=system` defaults the mode to verify-full.
            (None, Some(Roots::System)) => TlsMode::VerifyFull,
            // libpq: `require` with a root file verifies the chain, as verify-ca.
            (Some(TlsMode::Require), Some(Roots::File(_))) => TlsMode::VerifyCa,
            (mode, _) => mode.unwrap_or_default(),
        };
        match (mode, &roots) {
            (TlsMode::VerifyCa | TlsMode::VerifyFull, None) => {
                return Err(config_error(format!(
                    "the database URL's sslmode={mode} needs sslrootcert: the file of the \
                     certificate authority that signed the server's certificate \
                     (sslrootcert=/path/root.pem), or sslrootcert=system with \
                     sslmode=verify-full to trust the operating system's roots"
                )))
            }
            (mode, Some(Roots::System)) if mode != TlsMode::VerifyFull => {
                return Err(config_error(format!(
                    "the database URL's sslrootcert=system needs sslmode=verify-full, not \
                     sslmode={mode}: the system's roots trust certificates of every host, so \
                     only the host name check ties the certificate to the database"
                )))
            }
            _ => {}
        }
        Ok(Parsed {
            config,
            mode,
            roots,
            secrets,
        })
    }
}

/// Makes the connections of a [`Store`](crate::Store) on PostgreSQL: the parsed URL without the
/// TLS parameters, and the TLS those parameters asked for. Built once, by `Store::connect`, so a
/// bad URL or an unreadable `sslrootcert` stops start-up instead of each connection.
pub(crate) struct PgConnector {
    config: tokio_postgres::Config,
    mode: TlsMode,
    /// The TLS connector (never used with `sslmode=disable`: tokio-postgres then asks for no
    /// TLS).
    tls: MakeRustlsConnect,
    /// The URL's TLS settings (`sslmode=verify-full, sslrootcert=/path`), named by the message
    /// of a refused certificate.
    settings: String,
    /// The password as written in the URL (raw and decoded), scrubbed from every error message.
    secrets: Secrets,
}

impl fmt::Debug for PgConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgConnector")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// A tokio-postgres connection with the store's TLS.
type PgConnection =
    tokio_postgres::Connection<Socket, <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream>;

impl PgConnector {
    /// `postgres://HOST:PORT[,HOST:PORT]/DB` ([`crate::Store::identity`]).
    pub(crate) fn identity(&self) -> String {
        let ports = self.config.get_ports();
        let hosts = self
            .config
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, host)| {
                let port = ports
                    .get(i)
                    .or_else(|| ports.first().filter(|_| ports.len() == 1))
                    .copied()
                    .unwrap_or(5432);
                format!("{}:{port}", host_name(host)).replace('/', "%2F")
            })
            .collect::<Vec<_>>()
            .join(",");
        let db = self
            .config
            .get_dbname()
            .or_else(|| self.config.get_user())
            .unwrap_or("postgres");
        format!("postgres://{hosts}/{db}")
    }

    /// Parses a `postgres://` URL. Errors never contain the URL (it may hold a password).
    pub(crate) fn parse(url: &str) -> Result<PgConnector, StoreError> {
        let Parsed {
            mut config,
            mode,
            roots,
            secrets,
        } = Parsed::new(url)?;
        let verify = match (mode, &roots) {
            // `disable` never uses the connector, so no roots are read for it.
            (TlsMode::Disable, _) | (TlsMode::Prefer | TlsMode::Require, None) => Verify::Nothing,
            (TlsMode::VerifyFull, _) => Verify::ChainAndName,
            // `verify-ca`, and as libpq, `prefer` or `require` with `sslrootcert`.
            _ => Verify::Chain,
        };
        config.ssl_mode(match mode {
            TlsMode::Disable => SslMode::Disable,
            TlsMode::Prefer => SslMode::Prefer,
            TlsMode::Require | TlsMode::VerifyCa | TlsMode::VerifyFull => SslMode::Require,
        });
        let settings = match &roots {
            Some(roots) => format!("sslmode={mode}, {}", roots.setting()),
            None => format!("sslmode={mode}"),
        };
        Ok(PgConnector {
            config,
            mode,
            tls: MakeRustlsConnect::new(client_config(verify, roots.as_ref())?),
            settings,
            secrets,
        })
    }

    /// The TLS mode in effect (`require` with `sslrootcert` reads as `verify-ca`).
    pub(crate) fn mode(&self) -> TlsMode {
        self.mode
    }

    /// A new connection, within `timeout`. Its errors never contain the password.
    pub(crate) async fn connect(&self, timeout: Duration) -> ConnectionResult<AsyncPgConnection> {
        self.within(timeout, async {
            let (client, connection) = self.open().await?;
            AsyncPgConnection::try_from_client_and_connection(client, connection).await
        })
        .await
    }

    /// A plain tokio-postgres client on a new connection (the same TLS as the pool's), within
    /// `timeout`; its connection runs as a task of its own and ends with the client. For what
    /// diesel-async cannot send (`COPY`, `copy.rs`). Its errors never contain the password.
    pub(crate) async fn connect_client(
        &self,
        timeout: Duration,
    ) -> ConnectionResult<tokio_postgres::Client> {
        self.within(timeout, async {
            let (client, connection) = self.open().await?;
            tokio::spawn(connection);
            Ok(client)
        })
        .await
    }

    /// Asks the server, on a new connection with the same TLS, to cancel the statement that the
    /// connection of `token` is running; gives up after `timeout`. Best effort: a request that
    /// fails or arrives after the statement has ended does nothing, and the caller cannot tell.
    pub(crate) async fn cancel(&self, token: &tokio_postgres::CancelToken, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, token.cancel_query(self.tls.clone())).await;
    }

    /// `connect` within `timeout`, its error scrubbed of the password.
    async fn within<T>(
        &self,
        timeout: Duration,
        connect: impl Future<Output = ConnectionResult<T>>,
    ) -> ConnectionResult<T> {
        match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(connected)) => Ok(connected),
            Ok(Err(e)) => Err(scrub_connection_error(e, &self.secrets)),
            Err(_) => Err(ConnectionError::BadConnection(format!(
                "no connection within {} ms",
                timeout.as_millis()
            ))),
        }
    }

    /// Connects and shakes hands (TLS, authentication).
    async fn open(&self) -> ConnectionResult<(tokio_postgres::Client, PgConnection)> {
        self.config
            .connect(self.tls.clone())
            .await
            .map_err(|e| ConnectionError::BadConnection(self.describe(&e)))
    }

    /// A failed connection: its message with its causes ([`with_causes`]), or for a refused
    /// certificate or a host name TLS cannot use, what the URL asked that refused it.
    fn describe(&self, error: &tokio_postgres::Error) -> String {
        let hosts = || {
            let names: Vec<String> = self.config.get_hosts().iter().map(host_name).collect();
            names.join(", ")
        };
        let mut cause = error.source();
        while let Some(e) = cause {
            // The handshake reports rustls's error inside an `io::Error`.
            let inner = e
                .downcast_ref::<io::Error>()
                .and_then(io::Error::get_ref)
                .map_or(e, |inner| inner as &(dyn std::error::Error + 'static));
            if let Some(rustls::Error::InvalidCertificate(problem)) = inner.downcast_ref() {
                let why = match problem {
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. } => format!(
                        "the server's certificate is not valid for the host `{}` ({}: \
                         verify-full checks the host name): {problem:?}",
                        hosts(),
                        self.settings
                    ),
                    other => format!(
                        "the server's certificate is not trusted ({}: it must chain to those \
                         roots): {other:?}",
                        self.settings
                    ),
                };
                return format!("{error}: {why}");
            }
            if inner.downcast_ref::<InvalidDnsNameError>().is_some() {
                return format!(
                    "{error}: `{}` is not a host name or IP address for TLS",
                    hosts()
                );
            }
            cause = e.source();
        }
        with_causes(error)
    }
}

/// A host of the URL: its name or address, or a Unix socket's folder.
fn host_name(host: &tokio_postgres::config::Host) -> String {
    match host {
        tokio_postgres::config::Host::Tcp(name) => name.clone(),
        tokio_postgres::config::Host::Unix(dir) => dir.display().to_string(),
    }
}

/// An error and its causes: tokio-postgres's own message leaves out why (e.g. "error
/// performing TLS handshake", without the certificate problem).
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let text = e.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = e.source();
    }
    message
}

/// A configuration error with the password scrubbed from its message.
fn scrub_config_error(error: StoreError, secrets: &Secrets) -> StoreError {
    match error {
        StoreError::Config { detail } => StoreError::Config {
            detail: secrets.scrub(&detail),
        },
        other => other,
    }
}

/// Defence in depth: no error tokio-postgres or rustls produces today contains the password,
/// but a message is cheap to scrub and a leaked password is not.
fn scrub_connection_error(error: ConnectionError, secrets: &Secrets) -> ConnectionError {
    if secrets.is_empty() {
        return error;
    }
    match error {
        ConnectionError::BadConnection(m) => ConnectionError::BadConnection(secrets.scrub(&m)),
        ConnectionError::InvalidConnectionUrl(m) => {
            ConnectionError::InvalidConnectionUrl(secrets.scrub(&m))
        }
        other => {
            let message = other.to_string();
            let scrubbed = secrets.scrub(&message);
            if scrubbed == message {
                other
            } else {
                ConnectionError::BadConnection(scrubbed)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The rustls configuration

/// What the server's certificate is checked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verify {
    /// `prefer`/`require`: encryption only.
    Nothing,
    /// `verify-ca`: the chain, not the name.
    Chain,
    /// `verify-full`: the chain and the name.
    ChainAndName,
}

/// The rustls client configuration: the `ring` provider, and the verifier `verify` asks for with
/// the trusted roots of `roots`. Shared by every connection of the store.
fn client_config(verify: Verify, roots: Option<&Roots>) -> Result<ClientConfig, StoreError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| config_error(format!("cannot set up TLS: {e}")))?;
    let verifier: Arc<dyn ServerCertVerifier> = match (verify, roots) {
        (Verify::Nothing, _) => Arc::new(NoCertificateCheck { provider }),
        (Verify::Chain | Verify::ChainAndName, Some(roots)) => {
            let roots = match roots {
                Roots::File(path) => roots_from_file(path)?,
                Roots::System => system_roots()?,
            };
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| config_error(format!("cannot set up TLS: {e}")))?;
            if verify == Verify::Chain {
                Arc::new(ChainOnly { webpki })
            } else {
                webpki
            }
        }
        // `Parsed::new` refuses a verifying mode without roots.
        (Verify::Chain | Verify::ChainAndName, None) => {
            return Err(config_error("no trusted roots to verify the server with"))
        }
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

/// The operating system's trusted roots (`sslrootcert=system`), as OpenSSL finds them
/// (`SSL_CERT_FILE`, `SSL_CERT_DIR`, the distribution's bundle).
fn system_roots() -> Result<RootCertStore, StoreError> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (_added, _unusable) = roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        let why = found
            .errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        return Err(config_error(format!(
            "the database URL's sslrootcert=system: no trusted root certificates found on this \
             system{}",
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({why})")
            }
        )));
    }
    Ok(roots)
}

/// The PEM certificates of `sslrootcert`.
fn roots_from_file(path: &str) -> Result<RootCertStore, StoreError> {
    let problem = |what: String| {
        config_error(format!(
            "invalid database URL parameter `sslrootcert={path}`: {what}"
        ))
    };
    let pem = std::fs::read(path).map_err(|e| problem(format!("cannot read it: {e}")))?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| problem(format!("not a PEM certificate file: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| problem(format!("unusable certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(problem("no PEM certificate in it".to_owned()));
    }
    Ok(roots)
}

/// `prefer`/`require` (libpq): any certificate is accepted, but the handshake's signatures
/// are still checked against the certificate the server sent.
#[derive(Debug)]
struct NoCertificateCheck {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for NoCertificateCheck {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// `verify-ca`: webpki's verification, except that a certificate for another host name passes.
/// (rustls checks the name last, after the chain, so that error means the chain is good.)
#[derive(Debug)]
struct ChainOnly {
    webpki: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_values_parse_and_unknown_ones_name_the_parameter() {
        for mode in [
            TlsMode::Disable,
            TlsMode::Prefer,
            TlsMode::Require,
            TlsMode::VerifyCa,
            TlsMode::VerifyFull,
        ] {
            assert_eq!(mode.as_str().parse::<TlsMode>().unwrap(), mode);
        }
        let err = "allow".parse::<TlsMode>().unwrap_err().to_string();
        assert!(err.contains("sslmode=allow"), "{err}");
    }

    #[test]
    fn the_url_without_sslmode_prefers_tls() {
        let target = PgConnector::parse("postgres://u@h/db").unwrap();
        assert_eq!(target.mode(), TlsMode::Prefer);
        assert_eq!(target.config.get_ssl_mode(), SslMode::Prefer);
    }

    #[test]
    fn tls_parameters_are_taken_out_and_the_others_kept() {
        let target = PgConnector::parse(
            "postgres://u@h/db?application_name=fg&sslmode=disable&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(target.mode(), TlsMode::Disable);
        assert_eq!(target.config.get_ssl_mode(), SslMode::Disable);
        assert_eq!(target.config.get_application_name(), Some("fg"));
        assert_eq!(
            target.config.get_connect_timeout(),
            Some(&Duration::from_secs(3))
        );
    }

    #[test]
    fn require_with_a_root_certificate_verifies_the_chain() {
        let missing = "/nonexistent/flowgate-root.pem";
        let err = PgConnector::parse(&format!(
            "postgres://u@h/db?sslmode=require&sslrootcert={missing}"
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("sslrootcert=/nonexistent"), "{err}");
    }

    #[test]
    fn errors_of_a_bad_url_do_not_echo_the_password() {
        let err = PgConnector::parse("postgres://u:s3cr3t-pw@h:notaport/db")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("s3cr3t-pw"), "{err}");
        let err = PgConnector::parse("postgres://u:s3cr3t-pw@h/db?sslmode=s3cr3t-pw")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("s3cr3t-pw"), "{err}");
        let err = PgConnector::parse("postgres://u:s3cr3t-pw@h/db?s3cr3t-pw=1")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("s3cr3t-pw"), "{err}");
    }
}
