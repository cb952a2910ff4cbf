//! Request bodies through the whole HTTP stack, in process: `flowgate_http::api_app` (routing,
//! middleware, authentication, body reading with content type, gzip and size checks, JSON
//! parsing into identities and events, resolve, batch de-duplication, rendering) driven by
//! `actix_web::test` over the fixture catalog, with a sink that accepts everything.
//!
//! Input: byte 0 picks the route, byte 1 the headers (key, content type, encoding, export
//! mode, another workspace's app), the rest is the body. Invariants: no 5xx, every response
//! body is JSON, and every non-2xx is problem+json carrying its own status.
#![no_main]

use std::cell::RefCell;
use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use actix_web::http::header;
use actix_web::test::{call_service, init_service, TestRequest};
use actix_web::web;
use arc_swap::ArcSwap;
use flowgate_domain::events::AnalyticsEvent;
use flowgate_domain::keys::KeyEnvironment;
use flowgate_domain::ports::{EventSink, ManualClock, Overloaded};
use flowgate_http::{api_app, ApiState, HttpConfig, HttpMetrics, RateLimitConfig};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

struct AcceptAll;

impl EventSink for AcceptAll {
    fn try_enqueue(&self, _events: Vec<AnalyticsEvent>) -> Result<(), Overloaded> {
        Ok(())
    }
}

type Outcome = (u16, Option<String>, actix_web::web::Bytes);
type Call = Rc<dyn Fn(actix_http::Request) -> Pin<Box<dyn Future<Output = Outcome>>>>;

struct Harness {
    system: actix_rt::SystemRunner,
    call: Call,
}

fn harness() -> Harness {
    let system = actix_rt::System::new();
    let config = HttpConfig {
        key_environment: KeyEnvironment::Test,
        rate_limit: RateLimitConfig {
            per_key_rps: 1_000_000_000,
            per_key_burst: 1_000_000_000,
            per_ip_rps: 1_000_000_000,
            per_ip_burst: 1_000_000_000,
            ..RateLimitConfig::default()
        },
        ..HttpConfig::default()
    };
    let state = web::Data::new(ApiState::new(
        config,
        Arc::new(ArcSwap::from_pointee(flowgate_fuzz::catalog())),
        Arc::new(AcceptAll),
        Arc::new(ManualClock::new(flowgate_fuzz::now())),
        HttpMetrics::default(),
    ));
    let service = Rc::new(system.block_on(init_service(api_app(state))));
    let call: Call = Rc::new(move |req| {
        let service = service.clone();
        Box::pin(async move {
            let resp = call_service(&*service, req).await;
            let status = resp.status().as_u16();
            let content_type = resp
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let body = actix_web::body::to_bytes(resp.into_body())
                .await
                .unwrap_or_default();
            (status, content_type, body)
        })
    });
    Harness { system, call }
}

thread_local! {
    static HARNESS: RefCell<Option<Harness>> = const { RefCell::new(None) };
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = enc.write_all(data);
    enc.finish().unwrap_or_default()
}

fuzz_target!(|data: &[u8]| {
    let [route, flags, body @ ..] = data else {
        return;
    };
    let app = if flags & 0x40 != 0 {
        flowgate_fuzz::OTHER_APP
    } else {
        flowgate_fuzz::APP
    };
    let mut path = match route % 6 {
        0 => format!("/v1/apps/{app}/placements/onboarding/resolve"),
        1 => format!("/v1/apps/{app}/placements/resolve-batch"),
        2 => format!("/v1/apps/{app}/events"),
        3 => "/v1/placements/paywall/resolve".to_owned(),
        4 => "/v1/events".to_owned(),
        _ => format!("/v1/apps/{app}/placements/paywall/resolve"),
    };
    if flags & 0x80 != 0 {
        path.push_str("?export=true");
    }
    let mut req = TestRequest::post()
        .uri(&path)
        .peer_addr("127.0.0.1:40000".parse().expect("address"));
    match flags & 0x03 {
        0 => {}
        1 => req = req.insert_header((header::AUTHORIZATION, "Bearer fg_test_garbage")),
        _ => {
            req = req.insert_header((
                header::AUTHORIZATION,
                format!("Bearer {}", flowgate_fuzz::sdk_key()),
            ))
        }
    }
    match (flags >> 2) & 0x03 {
        0 => req = req.insert_header((header::CONTENT_TYPE, "application/json")),
        1 => req = req.insert_header((header::CONTENT_TYPE, "application/json; charset=utf-8")),
        2 => req = req.insert_header((header::CONTENT_TYPE, "text/plain")),
        _ => {}
    }
    let body = if flags & 0x20 != 0 {
        req = req.insert_header((header::CONTENT_ENCODING, "gzip"));
        gzip(body)
    } else {
        if flags & 0x10 != 0 {
            req = req.insert_header((header::CONTENT_ENCODING, "gzip"));
        }
        body.to_vec()
    };
    let request = req.set_payload(body).to_request();

    let (status, content_type, bytes) = HARNESS.with(|cell| {
        let mut slot = cell.borrow_mut();
        let h = slot.get_or_insert_with(harness);
        h.system.block_on((h.call)(request))
    });
    assert!(status < 500, "{status} for {path}: {bytes:?}");
    let json: Value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{status} for {path}: body is not JSON ({e}): {bytes:?}"));
    if !(200..300).contains(&status) {
        assert_eq!(
            content_type.as_deref(),
            Some("application/problem+json"),
            "{status} for {path}"
        );
        assert_eq!(
            json.get("status").and_then(Value::as_u64),
            Some(u64::from(status))
        );
        assert!(json.get("code").and_then(Value::as_str).is_some());
    }
});
