//! TLS to PostgreSQL: the libpq-style `sslmode` and `sslrootcert` parameters of a
//! `postgres://` URL, and the rustls connector (`ring` provider: no OpenSSL, no aws-lc-rs C
//! build) that tokio-postgres connects with.
//!
//! `AsyncPgConnection::establish` only connects without TLS, so every PostgreSQL connection of
//! the store (pooled, migrations, the `LISTEN` connection) is made here: tokio-postgres connects
//! with the connector, and diesel-async gets the client *and* its connection
//! (`try_from_client_and_connection`), which keeps notifications working (TECH-NOTES).

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use diesel::{ConnectionError, ConnectionResult};
use diesel_async::AsyncPgConnection;
use flowgate_domain::ports::StoreError;
use percent_encoding::percent_decode_str;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};
use tokio_postgres::{NoTls, Socket};

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

    /// Parses an `sslmode` value; anything else is a [`StoreError::Other`] naming `sslmode`
    /// and the accepted values (`allow` is refused: it would try plain text first).
    fn from_str(value: &str) -> Result<Self, StoreError> {
        Ok(match value {
            "disable" => TlsMode::Disable,
            "prefer" => TlsMode::Prefer,
            "require" => TlsMode::Require,
            "verify-ca" => TlsMode::VerifyCa,
            "verify-full" => TlsMode::VerifyFull,
            other => {
                return Err(StoreError::Other(format!(
                    "invalid database URL parameter `sslmode={other}`: expected disable, prefer, \
                     require, verify-ca or verify-full"
                )))
            }
        })
    }
}

/// Where a [`Store`](crate::Store) connects on PostgreSQL: the parsed URL without the TLS
/// parameters, and the connector those parameters asked for. Built once, by `Store::connect`,
/// so a bad URL or an unreadable `sslrootcert` stops start-up instead of each connection.
pub(crate) struct PgTarget {
    config: tokio_postgres::Config,
    mode: TlsMode,
    /// `None` for [`TlsMode::Disable`].
    connector: Option<RustlsConnect>,
    /// The password as written in the URL (raw and decoded), scrubbed from every error message.
    secrets: Vec<String>,
}

impl fmt::Debug for PgTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgTarget")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
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
    secrets: Vec<String>,
}

impl Parsed {
    fn new(url: &str) -> Result<Parsed, StoreError> {
        let secrets = url_password(url);
        let scrub_err = |e: StoreError| scrub_store_error(e, &secrets);
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
            scrub_store_error(
                StoreError::Other(format!("invalid PostgreSQL URL: {e}")),
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
                return Err(StoreError::Other(format!(
                    "the database URL's sslmode={mode} needs sslrootcert: the file of the \
                     certificate authority that signed the server's certificate \
                     (sslrootcert=/path/root.pem), or sslrootcert=system with \
                     sslmode=verify-full to trust the operating system's roots"
                )))
            }
            (mode, Some(Roots::System)) if mode != TlsMode::VerifyFull => {
                return Err(StoreError::Other(format!(
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

impl PgTarget {
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
                match host {
                    tokio_postgres::config::Host::Tcp(name) => format!("{name}:{port}"),
                    tokio_postgres::config::Host::Unix(dir) => {
                        format!("{}:{port}", dir.display()).replace('/', "%2F")
                    }
                }
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
    pub(crate) fn parse(url: &str) -> Result<PgTarget, StoreError> {
        let Parsed {
            mut config,
            mode,
            roots,
            secrets,
        } = Parsed::new(url)?;
        let verify = match (mode, &roots) {
            (TlsMode::Disable, _) => None,
            (TlsMode::Prefer | TlsMode::Require, None) => Some(Verify::Nothing),
            (TlsMode::Prefer | TlsMode::Require | TlsMode::VerifyCa, _) => Some(Verify::Chain),
            (TlsMode::VerifyFull, _) => Some(Verify::ChainAndName),
        };
        config.ssl_mode(match mode {
            TlsMode::Disable => SslMode::Disable,
            TlsMode::Prefer => SslMode::Prefer,
            TlsMode::Require | TlsMode::VerifyCa | TlsMode::VerifyFull => SslMode::Require,
        });
        let connector = match verify {
            None => None,
            Some(verify) => Some(RustlsConnect::new(verify, mode, roots.as_ref())?),
        };
        Ok(PgTarget {
            config,
            mode,
            connector,
            secrets,
        })
    }

    /// The TLS mode in effect (`require` with `sslrootcert` reads as `verify-ca`).
    pub(crate) fn mode(&self) -> TlsMode {
        self.mode
    }

    /// A new connection, within `timeout`. Its errors never contain the password.
    pub(crate) async fn connect(&self, timeout: Duration) -> ConnectionResult<AsyncPgConnection> {
        match tokio::time::timeout(timeout, self.connect_now()).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(scrub_connection_error(e, &self.secrets)),
            Err(_) => Err(ConnectionError::BadConnection(format!(
                "no connection within {} ms",
                timeout.as_millis()
            ))),
        }
    }

    /// A plain tokio-postgres client on a new connection (the same TLS as the pool's), within
    /// `timeout`; its connection runs as a task of its own and ends with the client. For what
    /// diesel-async cannot send (`COPY`, `events.rs`). Its errors never contain the password.
    pub(crate) async fn connect_client(
        &self,
        timeout: Duration,
    ) -> ConnectionResult<tokio_postgres::Client> {
        let bad = |e: tokio_postgres::Error| ConnectionError::BadConnection(with_causes(&e));
        let connect = async {
            match &self.connector {
                None => {
                    let (client, connection) = self.config.connect(NoTls).await.map_err(bad)?;
                    tokio::spawn(connection);
                    Ok(client)
                }
                Some(tls) => {
                    let (client, connection) =
                        self.config.connect(tls.clone()).await.map_err(bad)?;
                    tokio::spawn(connection);
                    Ok(client)
                }
            }
        };
        match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(scrub_connection_error(e, &self.secrets)),
            Err(_) => Err(ConnectionError::BadConnection(format!(
                "no connection within {} ms",
                timeout.as_millis()
            ))),
        }
    }

    /// Asks the server, on a new connection with the same TLS, to cancel the statement that the
    /// connection of `token` is running; gives up after `timeout`. Best effort: a request that
    /// fails or arrives after the statement has ended does nothing, and the caller cannot tell.
    pub(crate) async fn cancel(&self, token: &tokio_postgres::CancelToken, timeout: Duration) {
        let cancel = async {
            match &self.connector {
                None => token.cancel_query(NoTls).await,
                Some(tls) => token.cancel_query(tls.clone()).await,
            }
        };
        let _ = tokio::time::timeout(timeout, cancel).await;
    }

    async fn connect_now(&self) -> ConnectionResult<AsyncPgConnection> {
        let bad = |e: tokio_postgres::Error| ConnectionError::BadConnection(with_causes(&e));
        match &self.connector {
            None => {
                let (client, connection) = self.config.connect(NoTls).await.map_err(bad)?;
                AsyncPgConnection::try_from_client_and_connection(client, connection).await
            }
            Some(tls) => {
                let (client, connection) = self.config.connect(tls.clone()).await.map_err(bad)?;
                AsyncPgConnection::try_from_client_and_connection(client, connection).await
            }
        }
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

/// The password of a `postgres://user:password@host` URL, as written and percent-decoded.
fn url_password(url: &str) -> Vec<String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let Some((userinfo, _)) = authority.rsplit_once('@') else {
        return Vec::new();
    };
    let Some((_, password)) = userinfo.split_once(':') else {
        return Vec::new();
    };
    let mut secrets = vec![password.to_owned()];
    let decoded = percent_decode_str(password)
        .decode_utf8_lossy()
        .into_owned();
    if decoded != password {
        secrets.push(decoded);
    }
    secrets.retain(|s| !s.is_empty());
    secrets
}

fn scrub(message: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .fold(message.to_owned(), |m, s| m.replace(s.as_str(), "***"))
}

fn scrub_store_error(error: StoreError, secrets: &[String]) -> StoreError {
    match error {
        StoreError::Other(m) => StoreError::Other(scrub(&m, secrets)),
        other => other,
    }
}

/// Defence in depth: no error tokio-postgres or rustls produces today contains the password,
/// but a message is cheap to scrub and a leaked password is not.
fn scrub_connection_error(error: ConnectionError, secrets: &[String]) -> ConnectionError {
    if secrets.is_empty() {
        return error;
    }
    match error {
        ConnectionError::BadConnection(m) => ConnectionError::BadConnection(scrub(&m, secrets)),
        ConnectionError::InvalidConnectionUrl(m) => {
            ConnectionError::InvalidConnectionUrl(scrub(&m, secrets))
        }
        other => {
            let message = other.to_string();
            if secrets.iter().any(|s| message.contains(s.as_str())) {
                ConnectionError::BadConnection(scrub(&message, secrets))
            } else {
                other
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The rustls connector

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verify {
    /// `prefer`/`require`: encryption only.
    Nothing,
    /// `verify-ca`: the chain, not the name.
    Chain,
    /// `verify-full`: the chain and the name.
    ChainAndName,
}

/// tokio-postgres's `MakeTlsConnect` for rustls: one client configuration, shared by every
/// connection of the store.
#[derive(Clone)]
struct RustlsConnect {
    config: Arc<ClientConfig>,
    /// The URL's TLS settings (`sslmode=verify-full, sslrootcert=/path`), named by the
    /// message of a refused certificate.
    settings: Arc<str>,
}

impl RustlsConnect {
    fn new(
        verify: Verify,
        mode: TlsMode,
        roots: Option<&Roots>,
    ) -> Result<RustlsConnect, StoreError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| StoreError::Other(format!("cannot set up TLS: {e}")))?;
        let settings: Arc<str> = match roots {
            Some(roots) => format!("sslmode={mode}, {}", roots.setting()),
            None => format!("sslmode={mode}"),
        }
        .into();
        let verifier: Arc<dyn ServerCertVerifier> = match verify {
            Verify::Nothing => Arc::new(NoCertificateCheck { provider }),
            Verify::Chain | Verify::ChainAndName => {
                let roots = match roots {
                    Some(Roots::File(path)) => roots_from_file(path)?,
                    Some(Roots::System) => system_roots()?,
                    // Parsed::new refuses a verifying mode without roots.
                    None => {
                        return Err(StoreError::Other(format!(
                            "{settings}: no trusted roots to verify the server with"
                        )))
                    }
                };
                let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|e| StoreError::Other(format!("cannot set up TLS: {e}")))?;
                if verify == Verify::Chain {
                    Arc::new(ChainOnly { webpki })
                } else {
                    webpki
                }
            }
        };
        let config = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(RustlsConnect {
            config: Arc::new(config),
            settings,
        })
    }
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
        return Err(StoreError::Other(format!(
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
        StoreError::Other(format!(
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

impl MakeTlsConnect<Socket> for RustlsConnect {
    type Stream = RustlsStream;
    type TlsConnect = RustlsHandshake;
    type Error = io::Error;

    /// Never fails: a host that is no valid server name (a Unix socket gives "") only matters
    /// if the server accepts TLS, so the handshake reports it.
    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsHandshake, io::Error> {
        Ok(RustlsHandshake {
            config: self.config.clone(),
            host: domain.to_owned(),
            server_name: ServerName::try_from(domain.to_owned()).map_err(|_| domain.to_owned()),
            settings: self.settings.clone(),
        })
    }
}

/// One handshake.
struct RustlsHandshake {
    config: Arc<ClientConfig>,
    host: String,
    server_name: Result<ServerName<'static>, String>,
    settings: Arc<str>,
}

/// A refused certificate explained with the setting that refused it: the host name check of
/// `verify-full`, or the roots of `sslrootcert`.
fn explain(error: io::Error, host: &str, settings: &str) -> io::Error {
    let certificate = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .and_then(|e| match e {
            rustls::Error::InvalidCertificate(c) => Some(c.clone()),
            _ => None,
        });
    let Some(problem) = certificate else {
        return error;
    };
    let message = match problem {
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            format!(
                "the server's certificate is not valid for the host `{host}` ({settings}: \
                 verify-full checks the host name): {problem:?}"
            )
        }
        other => format!(
            "the server's certificate is not trusted ({settings}: it must chain to those \
             roots): {other:?}"
        ),
    };
    io::Error::new(io::ErrorKind::InvalidData, message)
}

impl TlsConnect<Socket> for RustlsHandshake {
    type Stream = RustlsStream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream>> + Send>>;

    fn connect(self, stream: Socket) -> Self::Future {
        Box::pin(async move {
            let name = self.server_name.map_err(|host| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("`{host}` is not a host name or IP address for TLS"),
                )
            })?;
            let stream = tokio_rustls::TlsConnector::from(self.config)
                .connect(name, stream)
                .await
                .map_err(|e| explain(e, &self.host, &self.settings))?;
            Ok(RustlsStream(Box::new(stream)))
        })
    }
}

/// A TLS stream for tokio-postgres.
struct RustlsStream(Box<tokio_rustls::client::TlsStream<Socket>>);

impl tokio_postgres::tls::TlsStream for RustlsStream {
    /// None: SCRAM authenticates without channel binding (tokio-postgres's default
    /// `channel_binding=prefer` accepts that; `channel_binding=require` would fail).
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl AsyncRead for RustlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for RustlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
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
        let target = PgTarget::parse("postgres://u@h/db").unwrap();
        assert_eq!(target.mode(), TlsMode::Prefer);
        assert_eq!(target.config.get_ssl_mode(), SslMode::Prefer);
    }

    #[test]
    fn tls_parameters_are_taken_out_and_the_others_kept() {
        let target = PgTarget::parse(
            "postgres://u@h/db?application_name=fg&sslmode=disable&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(target.mode(), TlsMode::Disable);
        assert!(target.connector.is_none());
        assert_eq!(target.config.get_application_name(), Some("fg"));
        assert_eq!(
            target.config.get_connect_timeout(),
            Some(&Duration::from_secs(3))
        );
    }

    #[test]
    fn require_with_a_root_certificate_verifies_the_chain() {
        let missing = "/nonexistent/flowgate-root.pem";
        let err = PgTarget::parse(&format!(
            "postgres://u@h/db?sslmode=require&sslrootcert={missing}"
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("sslrootcert=/nonexistent"), "{err}");
    }

    #[test]
    fn the_password_is_found_raw_and_decoded() {
        assert_eq!(
            url_password("postgres://u:p%40ss@h:5/db?x=1"),
            vec!["p%40ss".to_owned(), "p@ss".to_owned()]
        );
        assert!(url_password("postgres://u@h/db").is_empty());
        assert!(url_password("postgres://h/db").is_empty());
    }

    #[test]
    fn errors_of_a_bad_url_do_not_echo_the_password() {
        let err = PgTarget::parse("postgres://u:s3cr3t-pw@h:notaport/db")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("s3cr3t-pw"), "{err}");
        let err = PgTarget::parse("postgres://u:s3cr3t-pw@h/db?sslmode=s3cr3t-pw")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("s3cr3t-pw"), "{err}");
        let err = PgTarget::parse("postgres://u:s3cr3t-pw@h/db?s3cr3t-pw=1")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("s3cr3t-pw"), "{err}");
    }
}
