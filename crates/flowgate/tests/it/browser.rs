//! A real headless Chromium for the console's browser tests (D24): the tests drive it over
//! WebDriver (`fantoccini`), assert on the DOM a person sees, and take the screenshots kept in
//! `docs/console/`.
//!
//! [`Browser::start`] runs a `chromedriver` of its own on a free port and opens one session on
//! it. A test that cannot start the browser fails, never skips: `make browser-up` installs
//! Debian's `chromium` and `chromium-driver`. `CHROMEDRIVER` and `CHROME_BIN` override where
//! they are looked for.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;

use crate::support::free_port;

/// How long chromedriver has to answer its `/status` as ready.
const DRIVER_READY_TIMEOUT: Duration = Duration::from_secs(15);

/// The first bytes of every PNG file.
const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// What to do when the browser cannot be started.
const INSTALL_HINT: &str = "`make browser-up` installs Debian's chromium and chromium-driver";

/// A headless Chromium session and the chromedriver serving it. End it with
/// [`Browser::finish`]; when a test panics first, dropping it still kills both.
pub struct Browser {
    /// The WebDriver session: navigate, find elements, run scripts.
    pub client: Client,
    driver: Driver,
}

/// The chromedriver process, leader of its own process group, and the temporary folder it and
/// Chromium write their profiles into. Dropping it kills the group and removes the folder, so
/// that a panicking test leaves nothing behind.
struct Driver {
    child: Child,
    tmp: Option<tempfile::TempDir>,
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The whole group: a Chromium whose chromedriver was killed keeps running (checked with
        // chromedriver 156), and `finish` may have left processes still exiting. The group id
        // is the child's pid, not reused while the child is unreaped or the group has members.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Removed once every process that wrote into it is gone.
        if let Some(tmp) = self.tmp.take() {
            let _ = tmp.close();
        }
    }
}

impl Browser {
    /// Starts chromedriver on a free port, waits until it is ready, and opens a headless
    /// session with a 1280x900 window. Panics, saying what is missing, when the driver or the
    /// browser cannot be started.
    pub async fn start() -> Browser {
        let driver_path = chromedriver();
        let chrome = std::env::var_os("CHROME_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
        assert!(
            chrome.is_file(),
            "no Chromium at {} (set CHROME_BIN to override); {INSTALL_HINT}",
            chrome.display()
        );

        // chromedriver's profile folders and Chromium's own temporary files (many, with
        // `--disable-dev-shm-usage`) go here rather than to /tmp, which they would outlive.
        let tmp = tempfile::tempdir().unwrap();
        let port = free_port();
        let child = Command::new(&driver_path)
            .arg(format!("--port={port}"))
            .env("TMPDIR", tmp.path())
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start chromedriver ({}): {e} (set CHROMEDRIVER to override); \
                     {INSTALL_HINT}",
                    driver_path.display()
                )
            });
        let mut driver = Driver {
            child,
            tmp: Some(tmp),
        };
        wait_ready(&mut driver, port).await;

        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".to_owned(),
            serde_json::json!({
                "binary": chrome,
                // `--no-sandbox`: Chromium refuses to start as root with its sandbox, and CI
                // runs as root. `--disable-dev-shm-usage`: containers' /dev/shm is small.
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--window-size=1280,900",
                ],
            }),
        );
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "chromedriver cannot start Chromium ({}): {e}; {INSTALL_HINT}",
                    chrome.display()
                )
            });
        Browser { client, driver }
    }

    /// Resizes the window, e.g. to a phone's width before a screenshot.
    pub async fn set_window_size(&self, width: u32, height: u32) {
        self.client
            .set_window_size(width, height)
            .await
            .unwrap_or_else(|e| panic!("set the window to {width}x{height}: {e}"));
    }

    /// Takes a screenshot of the whole page (the window is made as tall as the page, at most
    /// 4,000 pixels, then given its height back) and checks it is a PNG. With
    /// `UPDATE_SCREENSHOTS=1` it is written to `docs/console/{name}.png` (commit the result);
    /// otherwise nothing is written, so a plain test run changes no file.
    pub async fn screenshot(&self, name: &str) {
        let (width, height) = self
            .client
            .get_window_size()
            .await
            .unwrap_or_else(|e| panic!("the window's size: {e}"));
        let page: serde_json::Value = self
            .client
            .execute("return document.documentElement.scrollHeight", vec![])
            .await
            .unwrap_or_else(|e| panic!("the page's height: {e}"));
        let page = page.as_u64().unwrap_or(height).clamp(height, 4000);
        let (width, height) = (width as u32, height as u32);
        self.set_window_size(width, page as u32).await;
        let png = self.png(name).await;
        self.set_window_size(width, height).await;
        if std::env::var("UPDATE_SCREENSHOTS").as_deref() == Ok("1") {
            assert!(
                !name.is_empty() && !name.contains(['/', '\\']) && name != "..",
                "screenshot name {name:?} is not a plain file name"
            );
            let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/console"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(format!("{name}.png")), &png).unwrap();
        }
    }

    /// A screenshot of the page, checked to be a PNG; `name` is for messages.
    async fn png(&self, name: &str) -> Vec<u8> {
        let png = self
            .client
            .screenshot()
            .await
            .unwrap_or_else(|e| panic!("screenshot {name}: {e}"));
        assert!(
            png.starts_with(PNG_SIGNATURE),
            "screenshot {name} is not a PNG ({} bytes)",
            png.len()
        );
        png
    }

    /// Ends the session (chromedriver quits Chromium), then kills chromedriver's process group
    /// and removes its temporary folder.
    pub async fn finish(self) {
        let Browser { client, driver } = self;
        let closed = client.close().await;
        drop(driver);
        if let Err(e) = closed {
            panic!("closing the browser session: {e}");
        }
    }
}

/// `CHROMEDRIVER`, else `chromedriver` on `PATH`, else Debian's `/usr/bin/chromedriver`.
fn chromedriver() -> PathBuf {
    if let Some(path) = std::env::var_os("CHROMEDRIVER") {
        return PathBuf::from(path);
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("chromedriver"))
                .find(|path| path.is_file())
        })
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromedriver"))
}

/// Polls chromedriver's `/status` until it reports ready; panics when it exits first or after
/// [`DRIVER_READY_TIMEOUT`].
async fn wait_ready(driver: &mut Driver, port: u16) {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + DRIVER_READY_TIMEOUT;
    loop {
        if driver_status(addr).is_ok_and(|status| status["value"]["ready"] == true) {
            return;
        }
        if let Ok(Some(exit)) = driver.child.try_wait() {
            panic!("chromedriver exited before it was ready ({exit}); {INSTALL_HINT}");
        }
        assert!(
            Instant::now() < deadline,
            "chromedriver on port {port} not ready after {DRIVER_READY_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One `GET /status` to chromedriver. It keeps the connection open whatever the request says,
/// so the answer ends where its `Content-Length` says, not at the end of the stream.
fn driver_status(addr: SocketAddr) -> std::io::Result<serde_json::Value> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.write_all(b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut raw = Vec::new();
    let mut buf = [0; 1024];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw);
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            continue;
        };
        let length = head
            .lines()
            .filter_map(|line| line.split_once(':'))
            .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, value)| value.trim().parse::<usize>().ok());
        if length.is_some_and(|length| body.len() >= length) {
            return serde_json::from_str(body).map_err(std::io::Error::other);
        }
    }
}

/// Serves `html` to every request on a free local port, from threads that live as long as the
/// test process; returns the page's URL.
fn serve_page(html: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            // One thread per connection: Chromium may open one it never sends on.
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut head = Vec::new();
                let mut buf = [0; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{html}",
                    html.len()
                );
                let _ = stream.write_all(response.as_bytes());
            });
        }
    });
    format!("http://{addr}/")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_starts_and_renders_a_page() -> Result<(), fantoccini::error::CmdError> {
    let url = serve_page(
        "<!doctype html><html><head><title>t</title></head>\
         <body><h1 id=\"t\">&lt;script&gt;</h1></body></html>",
    );
    let browser = Browser::start().await;
    browser.client.goto(&url).await?;
    // The markup holds the escaped text; the DOM a person reads holds it decoded.
    let text = browser
        .client
        .find(Locator::Css("#t"))
        .await?
        .text()
        .await?;
    assert_eq!(text, "<script>");
    browser.set_window_size(390, 844).await;
    // Not `screenshot`: this page is no part of the console's documentation. In headless
    // mode the window is the viewport, so the screenshot is as wide as the window was set.
    let png = browser.png("smoke").await;
    // IHDR's width, big-endian, after the signature and the chunk's length and type.
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    assert_eq!(width, 390);
    browser.finish().await;
    Ok(())
}
