//! In-process benchmark of the public API's request path: one single resolve of the
//! realistic placement (the domain benchmark's, `fixtures::catalogs`) through `api_app`, with
//! no socket, beside a baseline service that answers the same bytes with no logic, as
//! `flowgate-bench-baseline` does over TCP. Both are called the same way and both bodies are
//! copied into a reused write buffer, as actix's HTTP/1 encoder does, so the difference of the
//! two is flowgate's own work per request: dispatch, authentication, rate limits, body
//! parsing, evaluation, rendering, the request id, metrics and headers.
//!
//! The batch variants resolve 10 and 50 placements of one app in one request (the realistic
//! placement first, then small ones shaped as the load benchmark's, `bench/gen_catalog.py`),
//! each beside a baseline answering flowgate's batch bytes, so their cost can be read per
//! placement.
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
use flowgate_domain::keys::{ApiKey, KeyEnvironment, KeyType};
use flowgate_domain::ports::{Admission, BoxFuture, EventSink, Overloaded, Receipt, SystemClock};
use flowgate_domain::Catalog;
use flowgate_http::{api_app, ApiState, HttpConfig, HttpMetrics};
use serde_json::{json, Value};

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

/// The API's state over `catalog` with `sdk` as its key, rate limits out of the way.
fn state(catalog: &Value, sdk: &ApiKey) -> web::Data<ApiState> {
    let mut data = fixtures::data_from(catalog);
    data.api_keys
        .push(fixtures::record(fixtures::WS1, sdk, KeyType::Sdk, 1));
    let catalog = Catalog::build(data).expect("catalog builds");
    let mut config = HttpConfig::default();
    let limits = &mut config.rate_limit;
    (limits.per_ip_rps, limits.per_ip_burst) = (u32::MAX, u32::MAX);
    (limits.per_key_rps, limits.per_key_burst) = (u32::MAX, u32::MAX);
    web::Data::new(ApiState::new(
        config,
        Arc::new(ArcSwap::from_pointee(catalog)),
        Arc::new(DroppingSink),
        Arc::new(SystemClock),
        HttpMetrics::default(),
    ))
}

/// The largest batch the benchmark sends; the realistic app gets that many placements.
const BATCH_MAX: usize = 50;

/// The realistic catalog with `BATCH_MAX - 1` more placements in its app, `placement.1` ..,
/// shaped as the load benchmark's small ones (`bench/gen_catalog.py`): two audience rules
/// (`$in` with `$vgte`, a `$regex`), every fifth an experiment of two variants over the whole
/// audience; their default flows go round the app's 11 flows of about 20 KB. Every request is
/// the typical user, who matches each small placement's first rule (the load benchmark's
/// batches alternate two attribute sets, so its experiments run there).
fn batch_catalog_json() -> Value {
    let mut catalog = fixtures::realistic_catalog_json();
    let flow = |i: usize| format!("70000000-0000-4000-8000-{i:012}");
    let placements = catalog["workspaces"][0]["apps"][0]["placements"]
        .as_array_mut()
        .expect("placements");
    for p in 1..BATCH_MAX {
        let mut rules = vec![
            json!({"audience": {"country": {"$in": ["US", "CA", "GB"]}, "app.version": {"$vgte": "2.1.0"}},
                   "flow_id": flow(2)}),
            json!({"audience": {"email": {"$regex": "@example\\.(org|com)$"}}, "flow_id": flow(3)}),
        ];
        if p % 5 == 0 {
            rules.push(json!({"audience": {}, "experiment": {
                "id": format!("72000000-0000-4000-8000-{:012}", 100 + p), "name": format!("test {p}"),
                "status": "running", "coverage": 0.9, "variants": [
                    {"id": format!("73000000-0000-4000-8000-{:012}", 200 + 2 * p), "name": "control",
                     "weight": 1, "flow_id": null},
                    {"id": format!("73000000-0000-4000-8000-{:012}", 201 + 2 * p), "name": "new",
                     "weight": 1, "flow_id": flow(4)}]}}));
        }
        let placement = json!({"key": format!("placement.{p}"), "default_flow_id": flow(1 + p % 11),
                               "rules": rules});
        placements.push(placement);
    }
    catalog
}

/// Flowgate's answer to `req`, which must be a 200, for a baseline to send.
fn sample<S, B>(
    rt: &actix_web::rt::Runtime,
    service: &S,
    req: Request,
    buf: &mut Vec<u8>,
) -> web::Bytes
where
    S: Service<Request, Response = ServiceResponse<B>, Error = actix_web::Error>,
    B: MessageBody,
{
    rt.block_on(async {
        let res = service.call(req).await.expect("flowgate answers");
        assert_eq!(res.status(), 200);
        drain(res, buf).await;
        web::Bytes::copy_from_slice(buf)
    })
}

/// The no-logic service: answers `sample` to every request, after reading its body.
async fn baseline_service(
    sample: web::Bytes,
) -> impl Service<Request, Response = ServiceResponse<impl MessageBody>, Error = actix_web::Error> {
    test::init_service(
        App::new().default_service(web::to(move |_body: web::Bytes| {
            let sample = sample.clone();
            async move {
                HttpResponse::Ok()
                    .content_type("application/json")
                    .body(sample)
            }
        })),
    )
    .await
}

fn resolve(c: &mut Criterion) {
    let rt = actix_web::rt::Runtime::new().expect("runtime");
    let sdk = fixtures::key(KeyEnvironment::Test, 'a');
    let flowgate = rt.block_on(test::init_service(api_app(state(
        &fixtures::realistic_catalog_json(),
        &sdk,
    ))));
    let batched = rt.block_on(test::init_service(api_app(state(
        &batch_catalog_json(),
        &sdk,
    ))));

    let path = format!("/v1/apps/{}/placements/onboarding/resolve", fixtures::APP1);
    let batch_path = format!("/v1/apps/{}/placements/resolve-batch", fixtures::APP1);
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
    // The same users and attributes asking for the first `n` placements of the app.
    let batch_bodies = |n: usize| -> Vec<Vec<u8>> {
        let keys: Vec<String> = std::iter::once("onboarding".to_owned())
            .chain((1..n).map(|p| format!("placement.{p}")))
            .collect();
        (0..1024)
            .map(|i| {
                serde_json::to_vec(
                    &json!({"placement_keys": keys, "user_id": format!("user-{i:05}"),
                    "session_id": format!("session-{i}"), "device_platform": "ios",
                    "attributes": attributes}),
                )
                .unwrap()
            })
            .collect()
    };
    let (batch10_bodies, batch50_bodies) = (batch_bodies(10), batch_bodies(BATCH_MAX));
    let post = |uri: &str, body: &[u8], accept: Option<&str>| {
        let mut req = test::TestRequest::post()
            .uri(uri)
            .insert_header((header::AUTHORIZATION, bearer.as_str()))
            .insert_header((header::CONTENT_TYPE, "application/json"));
        if let Some(accept) = accept {
            req = req.insert_header((header::ACCEPT_ENCODING, accept));
        }
        req.set_payload(body.to_vec()).to_request()
    };
    let request = |i: usize, accept: Option<&str>| post(&path, &bodies[i % bodies.len()], accept);
    let batch = |bodies: &[Vec<u8>], i: usize| post(&batch_path, &bodies[i % bodies.len()], None);

    // Each baseline answers the bytes flowgate gave the first user.
    let mut buf = Vec::with_capacity(64 * 1024);
    let single = sample(&rt, &flowgate, request(0, None), &mut buf);
    let batch10_sample = sample(&rt, &batched, batch(&batch10_bodies, 0), &mut buf);
    let batch50_sample = sample(&rt, &batched, batch(&batch50_bodies, 0), &mut buf);
    assert!(single.len() > 15_000, "a flow of about 20 KB");
    assert!(
        batch50_sample.len() > batch10_sample.len() && batch10_sample.len() > single.len(),
        "the batches answer more placements than the single resolve"
    );
    let baseline = rt.block_on(baseline_service(single));
    let baseline10 = rt.block_on(baseline_service(batch10_sample));
    let baseline50 = rt.block_on(baseline_service(batch50_sample));

    // Each variant, one request `i` answered into `buf`.
    let answer = |variant: Variant, i: usize, buf: &mut Vec<u8>| match variant {
        Variant::Baseline => call(&rt, &baseline, request(i, None), buf),
        Variant::Flowgate => call(&rt, &flowgate, request(i, None), buf),
        Variant::FlowgateGzip => call(&rt, &flowgate, request(i, Some("gzip, deflate, br")), buf),
        Variant::Batch10 => call(&rt, &batched, batch(&batch10_bodies, i), buf),
        Variant::Batch50 => call(&rt, &batched, batch(&batch50_bodies, i), buf),
        Variant::BaselineBatch10 => call(&rt, &baseline10, batch(&batch10_bodies, i), buf),
        Variant::BaselineBatch50 => call(&rt, &baseline50, batch(&batch50_bodies, i), buf),
    };

    // Instruction counts: `HANDLER_ITERS=N HANDLER_VARIANT=<a name of Variant::ALL>`
    // answers N requests of that variant and exits, without criterion, for
    // `valgrind --tool=callgrind` (repeatable on this shared machine, where times are not).
    // Two runs of N and 2N requests give the cost of one request without the setup's.
    if let Ok(iters) = std::env::var("HANDLER_ITERS") {
        let iters: usize = iters.parse().expect("HANDLER_ITERS is a count");
        let name = std::env::var("HANDLER_VARIANT").unwrap_or_else(|_| "flowgate".into());
        let Some(&(variant, _)) = Variant::ALL.iter().find(|(_, n)| *n == name) else {
            let names: Vec<&str> = Variant::ALL.iter().map(|(_, n)| *n).collect();
            panic!("HANDLER_VARIANT {name}: one of {}", names.join(", "));
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
    /// Flowgate, a batch of the realistic placement and 9 small ones, identity response.
    Batch10,
    /// Flowgate, a batch of the realistic placement and 49 small ones, identity response.
    Batch50,
    /// The no-logic service answering flowgate's batch of 10.
    BaselineBatch10,
    /// The no-logic service answering flowgate's batch of 50.
    BaselineBatch50,
}

impl Variant {
    /// Each with the name its criterion benchmark and `HANDLER_VARIANT` use.
    const ALL: [(Variant, &'static str); 7] = [
        (Variant::Baseline, "baseline"),
        (Variant::Flowgate, "flowgate"),
        (Variant::FlowgateGzip, "flowgate_gzip"),
        (Variant::BaselineBatch10, "baseline_batch10"),
        (Variant::Batch10, "batch10"),
        (Variant::BaselineBatch50, "baseline_batch50"),
        (Variant::Batch50, "batch50"),
    ];
}

criterion_group!(benches, resolve);
criterion_main!(benches);
