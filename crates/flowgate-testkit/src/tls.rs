//! TLS for PostgreSQL tests with certificates the test makes: a [`TestCa`] issues server
//! certificates for the names a test wants, and a [`TlsProxy`] in front of a PostgreSQL server
//! answers the protocol's TLS request with one of them and forwards the decrypted stream to the
//! server in plain text. A client connecting through the proxy therefore sees exactly the
//! certificate the test chose (another host name, another authority), whatever certificate the
//! server itself has.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The protocol's request for TLS (`SSLRequest`: length 8, code 80877103).
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];
/// The protocol's request for GSS encryption, answered "no".
const GSS_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x30];

/// A certificate authority of the test's own, its certificate written to a PEM file.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    dir: PathBuf,
    /// The authority's certificate (PEM), the file `sslrootcert` names.
    pub cert_file: PathBuf,
}

/// A server certificate and its key, PEM.
#[derive(Clone, Debug)]
pub struct ServerCert {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its private key, PEM.
    pub key_pem: String,
}

impl TestCa {
    /// A new authority named `name`.
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.distinguished_name.push(
            rcgen::DnType::CommonName,
            format!("flowgate test CA {name}"),
        );
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("CA key");
        let issuer = CertifiedIssuer::self_signed(params, key).expect("CA certificate");
        let dir = std::env::temp_dir().join(format!(
            "flowgate-test-ca-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).expect("CA folder");
        let cert_file = dir.join("root.pem");
        std::fs::write(&cert_file, issuer.pem()).expect("CA file");
        TestCa {
            issuer,
            dir,
            cert_file,
        }
    }

    /// `sslrootcert=<the authority's file>`.
    pub fn sslrootcert(&self) -> String {
        format!("sslrootcert={}", self.cert_file.display())
    }

    /// A server certificate for `names` (DNS names or IP addresses), signed by this authority.
    pub fn issue(&self, names: &[&str]) -> ServerCert {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let params = CertificateParams::new(names).expect("server params");
        let key = KeyPair::generate().expect("server key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("server certificate");
        ServerCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A TLS-terminating proxy for the PostgreSQL protocol on 127.0.0.1; runs until dropped.
pub struct TlsProxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl TlsProxy {
    /// Proxies to the PostgreSQL server at `upstream` (`host:port`), presenting `cert`.
    pub async fn start(upstream: String, cert: &ServerCert) -> TlsProxy {
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(cert.cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .expect("certificate PEM");
        let key = PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes()).expect("key PEM");
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server TLS config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
                tokio::spawn(async move {
                    let _ = serve(client, acceptor, upstream).await;
                });
            }
        });
        TlsProxy { addr, task }
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    mut client: TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    upstream: String,
) -> std::io::Result<()> {
    loop {
        let mut request = [0u8; 8];
        client.read_exact(&mut request).await?;
        if request == GSS_REQUEST {
            client.write_all(b"N").await?;
            continue;
        }
        let mut server = TcpStream::connect(&upstream).await?;
        if request != SSL_REQUEST {
            // A plain-text start-up message: pass it on as it came.
            server.write_all(&request).await?;
            tokio::io::copy_bidirectional(&mut client, &mut server).await?;
            return Ok(());
        }
        client.write_all(b"S").await?;
        let mut tls = acceptor.accept(client).await?;
        tokio::io::copy_bidirectional(&mut tls, &mut server).await?;
        return Ok(());
    }
}
