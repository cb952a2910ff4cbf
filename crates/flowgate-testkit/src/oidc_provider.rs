//! A real OpenID Connect provider for sign-in tests (D28): panva's `oidc-provider` on Node
//! (`reliability/oidc-provider/provider.js`), installed with `npm ci` the first time.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::ServerCert;

/// A running `provider.js` on a free port of 127.0.0.1; stopped when dropped (and, should the
/// test process die, when its standard input closes). Its clients, accounts and claims are
/// described at the top of `provider.js`.
pub struct OidcProvider {
    child: Child,
    /// The issuer (`http://127.0.0.1:PORT`, or `https://` with a certificate).
    pub issuer: String,
    /// The certificate files of an https provider, removed with it.
    _tls_dir: Option<tempfile::TempDir>,
}

fn provider_dir() -> PathBuf {
    crate::node::node_project("oidc-provider")
}

impl OidcProvider {
    /// Starts a provider, https with `cert` when given, whose clients also accept
    /// `redirect_uris` (beside `http://127.0.0.1:9999/console/oidc/callback`). Returns once it
    /// listens.
    pub fn start(cert: Option<&ServerCert>, redirect_uris: &[&str]) -> OidcProvider {
        let dir = provider_dir();
        crate::node::npm_ci(&dir);
        let mut command = Command::new("node");
        command
            .arg("provider.js")
            .arg("0")
            .current_dir(&dir)
            .env("REDIRECT_URIS", redirect_uris.join(","))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let tls_dir = cert.map(|cert| {
            let tls_dir = tempfile::tempdir().unwrap();
            std::fs::write(tls_dir.path().join("cert.pem"), &cert.cert_pem).unwrap();
            std::fs::write(tls_dir.path().join("key.pem"), &cert.key_pem).unwrap();
            command
                .env("TLS_CERT_FILE", tls_dir.path().join("cert.pem"))
                .env("TLS_KEY_FILE", tls_dir.path().join("key.pem"));
            tls_dir
        });
        let child = command
            .spawn()
            .expect("node (Node.js 20 or later) must be installed to run the OpenID Connect tests");
        // Owned at once, so a failure from here on stops the provider too (`Drop`).
        let mut provider = OidcProvider {
            child,
            issuer: String::new(),
            _tls_dir: tls_dir,
        };
        // The first line says where it listens; the rest is drained so the pipe never fills.
        let stdout = provider.child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            for _ in lines {}
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("provider.js did not say where it listens within 30 s (see its stderr)");
        let started: serde_json::Value = serde_json::from_str(&line).unwrap();
        provider.issuer = started["issuer"].as_str().unwrap().to_owned();
        provider
    }
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
