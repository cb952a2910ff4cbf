//! The baseline of `make bench-http` (docs/benchmarks.md): an actix-web server with the service's actix
//! settings (same crate, features and worker count) that answers every request with the same
//! status and bytes, read once from a file, after reading the request body. No routing, no
//! middleware, no logic: what this stack can do on this machine.
//!
//! `flowgate-bench-baseline LISTEN WORKERS STATUS BODY_FILE [CONTENT_ENCODING]` (the coding
//! of the body when it is flowgate's compressed bytes, for clients that accept gzip)
//!
//! `BASELINE_WORK_NS=N` in the environment makes it spin for N nanoseconds per request before
//! answering: the same server with more work per request, to see what a given CPU cost does to
//! throughput and latency on this stack (docs/benchmarks-method.md: why the saturated p99
//! target of 2 ms was retired).

use actix_web::http::StatusCode;
use actix_web::{web, App, HttpResponse, HttpServer};

struct Fixed {
    status: StatusCode,
    body: web::Bytes,
    /// `Content-Encoding` of the body, when it is flowgate's gzip bytes (mobile header runs).
    coding: Option<String>,
    /// Busy work per request (`BASELINE_WORK_NS`, default none).
    work: std::time::Duration,
}

async fn answer(fixed: web::Data<Fixed>, _body: web::Bytes) -> HttpResponse {
    if !fixed.work.is_zero() {
        let start = std::time::Instant::now();
        while start.elapsed() < fixed.work {
            std::hint::spin_loop();
        }
    }
    let mut res = HttpResponse::build(fixed.status);
    res.content_type("application/json");
    if let Some(coding) = &fixed.coding {
        res.insert_header(("content-encoding", coding.as_str()));
    }
    res.body(fixed.body.clone())
}

fn usage() -> std::io::Error {
    std::io::Error::other(
        "usage: flowgate-bench-baseline LISTEN WORKERS STATUS BODY_FILE [CONTENT_ENCODING]",
    )
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (listen, workers, status, file, coding) = match args.as_slice() {
        [listen, workers, status, file] => (listen, workers, status, file, None),
        [listen, workers, status, file, coding] => (listen, workers, status, file, Some(coding)),
        _ => return Err(usage()),
    };
    let workers: usize = workers.parse().map_err(|_| usage())?;
    let status = status
        .parse::<u16>()
        .ok()
        .and_then(|s| StatusCode::from_u16(s).ok())
        .ok_or_else(usage)?;
    let fixed = web::Data::new(Fixed {
        status,
        body: web::Bytes::from(std::fs::read(file)?),
        coding: coding.cloned(),
        work: std::time::Duration::from_nanos(
            std::env::var("BASELINE_WORK_NS")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
        ),
    });
    HttpServer::new(move || {
        App::new()
            .app_data(fixed.clone())
            .app_data(web::PayloadConfig::new(1 << 20))
            .default_service(web::to(answer))
    })
    .workers(workers)
    .bind(listen.as_str())?
    .run()
    .await
}
