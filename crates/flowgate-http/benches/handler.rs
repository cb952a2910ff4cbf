//! In-process benchmark of the public API's request path: one single resolve of the
//! realistic placement (the domain benchmark's, `fixtures::catalogs`) through `api_app`, with
//! no socket, beside a baseline service that answers the same bytes with no logic, as
//! `flowgate-bench-baseline` does over TCP. Both are called the same way and both bodies are
//! copied into a reused write buffer, as actix's HTTP/1 encoder does, so the difference of the
//! two is flowgate's own work per request: dispatch, authentication, rate limits, body
//! parsing, evaluation, rendering, the request id, metrics and headers.
//!
//! The load benchmark (`make bench-http`) cannot show a change of a fraction of a microsecond
//! on this shared machine; this one can. Run with `make bench-handler`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::future::poll_fn;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::Arc;

use actix_http::Request;
use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceResponse};
use actix_web::http::header;
use actix_web::{test, web, App, HttpResponse};
use arc_swap::ArcSwap;
use criterion::{criterion_group, criterion_main, Criterion};
use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::keys::{KeyEnvironment, KeyType};
use flowgate_domain::ports::{Admission, BoxFuture, EventSink, Overloaded, Receipt, SystemClock};
use flowgate_domain::Catalog;
use flowgate_http::{api_app, ApiState, HttpConfig, HttpMetrics};
use serde_json::json;

use flowgate_contract_tests::fixtures::catalogs as fixtures;

/// Accepts every event and keeps none (the real sink's enqueue is benchmarked by
/// `flowgate-analytics`' `enqueue` bench).
struct DroppingSink;

struct Admitted;

impl Admission for Admitted {
    fn enqueue(self: Box<Self>, events: Vec<AnalyticsEvent>) -> Result<Receipt, Overloaded> {
        drop(black_box(events));
        Ok(Receipt::ready())
    }
}

impl EventSink for DroppingSink {
    fn try_enqueue(&self, events: Vec<AnalyticsEvent>) -> Result<(), Overloaded> {
        drop(black_box(events));
        Ok(())
    }

    fn admit(&self, _max: usize) -> BoxFuture<'_, Result<Box<dyn Admission + '_>, Overloaded>> {
        Box::pin(async { Ok(Box::new(Admitted) as Box<dyn Admission>) })
    }
}

/// Copies a response's body into `buf`, chunk by chunk, as the HTTP/1 encoder does; the
/// number of bytes.
async fn drain<B: MessageBody>(res: ServiceResponse<B>, buf: &mut Vec<u8>) -> usize {
    buf.clear();
    let mut body = std::pin::pin!(res.into_body());
    while let Some(chunk) = poll_fn(|cx| Pin::as_mut(&mut body).poll_next(cx)).await {
        let Ok(chunk) = chunk else { break };
        buf.extend_from_slice(&chunk);
    }
    buf.len()
}

/// One request through `service`, its body copied into `buf`; the body's length.
fn call<S, B>(rt: &actix_web::rt::Runtime, service: &S, req: Request, buf: &mut Vec<u8>) -> usize
where
    S: Service<Request, Response = ServiceResponse<B>, Error = actix_web::Error>,
    B: MessageBody,
{
    rt.block_on(async {
        let res = service.call(req).await.unwrap();
        black_box(drain(res, buf).await)
    })
}

fn resolve(c: &mut Criterion) {
    let rt = actix_web::rt::Runtime::new().expect("runtime");
    let sdk = fixtures::key(KeyEnvironment::Test, 'a');
    let mut data = fixtures::data_from(&fixtures::realistic_catalog_json());
    data.api_keys
        .push(fixtures::record(fixtures::WS1, &sdk, KeyType::Sdk, 1));
    let catalog = Catalog::build(data).expect("catalog builds");
    let mut config = HttpConfig::default();
    let limits = &mut config.rate_limit;
    (limits.per_ip_rps, limits.per_ip_burst) = (u32::MAX, u32::MAX);
    (limits.per_key_rps, limits.per_key_burst) = (u32::MAX, u32::MAX);
    let state = web::Data::new(ApiState::new(
        config,
        Arc::new(ArcSwap::from_pointee(catalog)),
        Arc::new(DroppingSink),
        Arc::new(SystemClock),
        HttpMetrics::default(),
    ));
    let flowgate = rt.block_on(test::init_service(api_app(state)));

    let path = format!("/v1/apps/{}/placements/onboarding/resolve", fixtures::APP1);
    let bearer = format!("Bearer {}", sdk.expose());
    let attributes = fixtures::realistic_attributes();
    let bodies: Vec<Vec<u8>> = (0..1024)
        .map(|i| {
            serde_json::to_vec(&json!({"user_id": format!("user-{i:05}"),
                "session_id": format!("session-{i}"), "device_platform": "ios",
                "attributes": attributes}))
            .unwrap()
        })
        .collect();
    let request = |i: usize, accept: Option<&str>| {
        let mut req = test::TestRequest::post()
            .uri(&path)
            .insert_header((header::AUTHORIZATION, bearer.as_str()))
            .insert_header((header::CONTENT_TYPE, "application/json"));
        if let Some(accept) = accept {
            req = req.insert_header((header::ACCEPT_ENCODING, accept));
        }
        req.set_payload(bodies[i % bodies.len()].clone())
            .to_request()
    };

    // The baseline answers the bytes flowgate gave the first user.
    let mut buf = Vec::with_capacity(64 * 1024);
    let sample = rt.block_on(async {
        let res = flowgate
            .call(request(0, None))
            .await
            .expect("flowgate answers");
        assert_eq!(res.status(), 200);
        drain(res, &mut buf).await;
        web::Bytes::copy_from_slice(&buf)
    });
    assert!(sample.len() > 15_000, "a flow of about 20 KB");
    let baseline = rt.block_on(test::init_service(App::new().default_service(web::to(
        move |_body: web::Bytes| {
            let sample = sample.clone();
            async move {
                HttpResponse::Ok()
                    .content_type("application/json")
                    .body(sample)
            }
        },
    ))));

    // The three variants, each one request `i` answered into `buf`.
    let answer = |variant: Variant, i: usize, buf: &mut Vec<u8>| match variant {
        Variant::Baseline => call(&rt, &baseline, request(i, None), buf),
        Variant::Flowgate => call(&rt, &flowgate, request(i, None), buf),
        Variant::FlowgateGzip => call(&rt, &flowgate, request(i, Some("gzip, deflate, br")), buf),
    };

    // Instruction counts: `HANDLER_ITERS=N HANDLER_VARIANT=baseline|flowgate|flowgate_gzip`
    // answers N requests of that variant and exits, without criterion, for
    // `valgrind --tool=callgrind` (repeatable on this shared machine, where times are not).
    // Two runs of N and 2N requests give the cost of one request without the setup's.
    if let Ok(iters) = std::env::var("HANDLER_ITERS") {
        let iters: usize = iters.parse().expect("HANDLER_ITERS is a count");
        let name = std::env::var("HANDLER_VARIANT").unwrap_or_else(|_| "flowgate".into());
        let Some(&(variant, _)) = Variant::ALL.iter().find(|(_, n)| *n == name) else {
            panic!("HANDLER_VARIANT {name}: baseline, flowgate or flowgate_gzip");
        };
        for i in 1..=iters {
            answer(variant, i, &mut buf);
        }
        std::process::exit(0);
    }

    let mut group = c.benchmark_group("http");
    let mut i = 0usize;
    for (variant, name) in Variant::ALL {
        group.bench_function(format!("resolve/{name}"), |b| {
            b.iter(|| {
                i += 1;
                answer(variant, i, &mut buf)
            })
        });
    }
    group.finish();
}

/// What a benchmark iteration sends, and to which service.
#[derive(Clone, Copy)]
enum Variant {
    /// The no-logic service answering flowgate's bytes.
    Baseline,
    /// Flowgate, identity response.
    Flowgate,
    /// Flowgate, for a client accepting gzip as mobile HTTP stacks do.
    FlowgateGzip,
}

impl Variant {
    /// Each with the name its criterion benchmark and `HANDLER_VARIANT` use.
    const ALL: [(Variant, &'static str); 3] = [
        (Variant::Baseline, "baseline"),
        (Variant::Flowgate, "flowgate"),
        (Variant::FlowgateGzip, "flowgate_gzip"),
    ];
}

criterion_group!(benches, resolve);
criterion_main!(benches);
