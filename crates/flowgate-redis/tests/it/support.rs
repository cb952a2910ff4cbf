//! A store under a key prefix of the test's own, and Redis servers of the test's own.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use flowgate_domain::ids::AppId;
use flowgate_domain::sticky::{StickyDoc, StickyId, StickyWrite};
use flowgate_redis::{RedisStickyOptions, RedisStickyStore};

/// The shared test Redis.
pub fn redis_url() -> String {
    std::env::var("FLOWGATE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// Options with a fresh random key prefix.
pub fn options(prefix: &str) -> RedisStickyOptions {
    RedisStickyOptions {
        key_prefix: prefix.to_owned(),
        ..RedisStickyOptions::default()
    }
}

/// A port nothing listens on (bound, then released).
pub fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("its address")
        .port()
}

/// A key prefix of the test's own on the shared Redis; its keys are deleted on drop.
pub struct Prefix {
    pub prefix: String,
}

impl Prefix {
    pub fn new() -> Prefix {
        Prefix {
            prefix: format!("flowgate-test:{}", uuid::Uuid::new_v4()),
        }
    }

    /// The keys under the prefix.
    pub fn keys(&self) -> Vec<String> {
        let client = redis::Client::open(redis_url()).expect("the test Redis URL");
        let mut conn = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap_or_else(|e| {
                panic!(
                    "the test Redis at {} is required (make redis-up): {e}",
                    redis_url()
                )
            });
        let pattern = format!("{}:*", self.prefix);
        let mut keys = Vec::new();
        let mut cursor = 0_u64;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query(&mut conn)
                .expect("SCAN");
            keys.extend(batch);
            if next == 0 {
                return keys;
            }
            cursor = next;
        }
    }

    /// SCAN + DEL of every key under the prefix.
    pub fn clean(&self) {
        let keys = self.keys();
        if keys.is_empty() {
            return;
        }
        let client = redis::Client::open(redis_url()).expect("the test Redis URL");
        let mut conn = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("the test Redis");
        for chunk in keys.chunks(500) {
            let _: usize = redis::cmd("DEL").arg(chunk).query(&mut conn).expect("DEL");
        }
    }
}

impl Drop for Prefix {
    fn drop(&mut self) {
        // A panic while panicking aborts: clean up as well as possible, never panic here.
        if let Err(e) = std::panic::catch_unwind(|| self.clean()) {
            eprintln!("could not delete the keys of {}: {e:?}", self.prefix);
        }
    }
}

/// A store on the shared Redis under a prefix of its own (deleted on drop).
pub struct Fixture {
    pub store: RedisStickyStore,
    pub prefix: Prefix,
}

impl Fixture {
    pub async fn new() -> Fixture {
        let prefix = Prefix::new();
        let store = connect(&redis_url(), &prefix.prefix).await;
        Fixture { store, prefix }
    }
}

/// A store on `url` under `prefix`; a Redis that cannot be reached fails the test.
pub async fn connect(url: &str, prefix: &str) -> RedisStickyStore {
    RedisStickyStore::connect(url, options(prefix))
        .await
        .unwrap_or_else(|e| panic!("Redis at {url} is required (make redis-up): {e}"))
}

pub fn app(n: u128) -> AppId {
    AppId::from_uuid(uuid::Uuid::from_u128(0xB000 + n))
}

pub fn id(name: &str, value: &str) -> StickyId {
    StickyId {
        attribute_name: name.to_owned(),
        attribute_value: value.to_owned(),
    }
}

pub fn write(app_id: AppId, name: &str, value: &str, assignments: &[(&str, &str)]) -> StickyWrite {
    StickyWrite {
        app_id,
        doc: StickyDoc {
            attribute_name: name.to_owned(),
            attribute_value: value.to_owned(),
            assignments: assignments
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        },
    }
}

/// The `redis-server` binary: `FLOWGATE_TEST_REDIS_SERVER`, else the one on the `PATH`. A
/// missing binary fails the test (`make redis-up` installs it).
fn binary() -> PathBuf {
    if let Ok(path) = std::env::var("FLOWGATE_TEST_REDIS_SERVER") {
        return PathBuf::from(path);
    }
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(|dir| Path::new(dir).join("redis-server"))
        .find(|candidate| candidate.is_file())
        .expect("redis-server is required (apt-get install redis-server, or set FLOWGATE_TEST_REDIS_SERVER)")
}

/// A `redis-server` of the test's own on a free loopback port, without persistence; killed on
/// drop.
pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        let mut server = RedisServer {
            port: closed_port(),
            child: None,
        };
        server.spawn();
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) {
        let child = Command::new(binary())
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not listen on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `kill -9`: the server ends at once, its connections drop.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` (`STOP`, `CONT`) to the server process.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("a running server").id();
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} {pid}");
    }

    /// Starts the server again on the same port (empty: nothing is persisted).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
