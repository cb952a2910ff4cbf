//! Per-worker state on the production runtime: `flowgate serve` runs the API server on a plain
//! multi-threaded tokio runtime, without an actix `System` (the other tests run inside one).

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use flowgate_domain::catalog::CatalogData;
use flowgate_domain::Catalog;
use flowgate_http::HttpConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{bind_api, CollectingSink};

fn empty_catalog() -> Catalog {
    Catalog::build(CatalogData::default()).expect("an empty catalog builds")
}

/// One request that reads the snapshot (any `/v1` request authenticates against it).
async fn touch(addr: std::net::SocketAddr) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let path = "/v1/apps/00000000-0000-0000-0000-000000000001/placements/p/resolve";
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\
         Content-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    response
}

/// A worker that serves no more requests still lets go of a replaced snapshot within its
/// sweep interval (1 s), so reloads do not keep old catalogs alive in idle workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_lets_go_of_a_replaced_snapshot() {
    let handle = Arc::new(ArcSwap::from_pointee(empty_catalog()));
    let (addr, server) = bind_api(
        HttpConfig::default(),
        Arc::clone(&handle),
        Arc::new(CollectingSink::default()),
    );
    let server_handle = server.handle();
    tokio::spawn(server);

    let old = handle.load_full();
    let response = touch(addr).await;
    assert!(response.starts_with("HTTP/1.1 401"), "{response}");
    assert_eq!(
        Arc::strong_count(&old),
        3,
        "the handle's, the worker's and this test's"
    );
    handle.store(Arc::new(empty_catalog()));
    let deadline = Instant::now() + Duration::from_secs(5);
    while Arc::strong_count(&old) > 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        Arc::strong_count(&old),
        1,
        "the idle worker let go of the replaced snapshot"
    );
    server_handle.stop(true).await;
}
