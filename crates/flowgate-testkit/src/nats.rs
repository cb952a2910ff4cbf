//! NATS servers with JetStream for tests: each test starts its own `nats-server` processes on
//! free loopback ports with their own storage folders, and they are killed and their folders
//! removed on drop. A [`NatsCluster`] is three servers routed together, for tests that take a
//! node away (`kill -9`) and bring it back.
//!
//! The binary is `nats-server` on the `PATH`, else `/usr/sbin/nats-server` (Debian's package),
//! or `FLOWGATE_TEST_NATS_SERVER`. A missing binary fails the test: `make test` and CI install
//! it.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;

/// The `nats-server` binary.
fn binary() -> PathBuf {
    if let Ok(path) = std::env::var("FLOWGATE_TEST_NATS_SERVER") {
        return PathBuf::from(path);
    }
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let candidate = Path::new(dir).join("nats-server");
        if candidate.is_file() {
            return candidate;
        }
    }
    let debian = PathBuf::from("/usr/sbin/nats-server");
    assert!(
        debian.is_file(),
        "nats-server is required (apt-get install nats-server, or set FLOWGATE_TEST_NATS_SERVER)"
    );
    debian
}

/// One `nats-server` process: its client port, its configuration and storage.
pub struct NatsServer {
    /// The client port on 127.0.0.1.
    pub port: u16,
    name: String,
    config: PathBuf,
    dir: PathBuf,
    /// A single server removes its folder on drop; a cluster's servers share the cluster's.
    owns_dir: bool,
    child: Option<Child>,
}

impl NatsServer {
    /// A single server with JetStream, running and accepting connections.
    pub fn start() -> NatsServer {
        let dir = temp_dir("nats");
        let port = free_port();
        let mut server = Self::prepare("n1", port, &dir, "");
        server.owns_dir = true;
        server.spawn();
        server
    }

    fn prepare(name: &str, port: u16, dir: &Path, cluster: &str) -> NatsServer {
        let store = dir.join(name);
        std::fs::create_dir_all(&store).expect("the server's store folder");
        let config = dir.join(format!("{name}.conf"));
        std::fs::write(
            &config,
            format!(
                "server_name: {name}\nlisten: \"127.0.0.1:{port}\"\n\
                 jetstream {{ store_dir: \"{}\" }}\n{cluster}",
                store.display()
            ),
        )
        .expect("the server's configuration");
        NatsServer {
            port,
            name: name.to_owned(),
            config,
            dir: dir.to_owned(),
            owns_dir: false,
            child: None,
        }
    }

    fn spawn(&mut self) {
        let log = std::fs::File::create(self.dir.join(format!("{}.log", self.name)))
            .expect("the server's log file");
        let child = Command::new(binary())
            .arg("-c")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("nats-server starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nats-server {} did not listen on {}; its log: {}",
                self.name,
                self.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's log so far (for assertion messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join(format!("{}.log", self.name))).unwrap_or_default()
    }

    /// `nats://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// `kill -9`: the process ends at once, with what it had not written to disk.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again with the same name, port and storage.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
        if self.owns_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Three JetStream servers routed into one cluster.
pub struct NatsCluster {
    /// The servers, `n1`, `n2`, `n3`.
    pub nodes: Vec<NatsServer>,
    dir: PathBuf,
}

impl NatsCluster {
    /// Starts the three servers (they elect a JetStream leader within a few seconds: callers
    /// retry their first JetStream call).
    pub fn start() -> NatsCluster {
        let dir = temp_dir("nats-cluster");
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let routes = ports
            .iter()
            .map(|(_, route)| format!("\"nats-route://127.0.0.1:{route}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let mut nodes: Vec<NatsServer> = ports
            .iter()
            .enumerate()
            .map(|(i, (port, route))| {
                let cluster = format!(
                    "cluster {{ name: flowgate-test\n listen: \"127.0.0.1:{route}\"\n routes: [{routes}] }}\n"
                );
                NatsServer::prepare(&format!("n{}", i + 1), *port, &dir, &cluster)
            })
            .collect();
        for node in &mut nodes {
            node.spawn();
        }
        NatsCluster { nodes, dir }
    }

    /// Every server's URL, comma-separated (the client fails over between them).
    pub fn url(&self) -> String {
        self.nodes
            .iter()
            .map(NatsServer::url)
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn temp_dir(kind: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "flowgate-test-{kind}-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    dir
}
