//! HTTP conventions (D9, D10, D11): unknown routes, wrong methods, request ids, CORS,
//! compression, rate limits.

use std::io::Read;

use awc::http::Method;
use flowgate_http::{HttpConfig, RateLimitConfig};
use serde_json::json;

use crate::fixtures::*;
use crate::support::{on_sqlite, server, Backend, Reply, TestServer};

on_sqlite!(
    routes_and_methods,
    percent_encoded_paths,
    request_ids,
    cors,
    compressed_responses,
    rate_limits_with_headers,
    rate_limit_by_forwarded_address,
);

async fn routes_and_methods(backend: Backend) {
    let s = server!(backend);
    s.request(Method::GET, "/nope", &[])
        .await
        .problem(404, "not_found");
    s.request(Method::POST, "/v1/apps", &[])
        .await
        .problem(404, "not_found");
    let r = s
        .request(Method::GET, &format!("/v1/apps/{APP1}/events"), &[])
        .await;
    r.problem(405, "method_not_allowed");
    assert_eq!(r.header("allow"), Some("POST"));
    s.request(
        Method::PUT,
        &format!("/v1/apps/{APP1}/placements/x/resolve"),
        &[],
    )
    .await
    .problem(405, "method_not_allowed");
    s.request(Method::DELETE, "/v1/events", &[])
        .await
        .problem(405, "method_not_allowed");
    let r = s.request(Method::POST, "/openapi.json", &[]).await;
    r.problem(405, "method_not_allowed");
    assert_eq!(r.header("allow"), Some("GET"));
    // A parameter is one non-empty segment; no trailing-slash or case folding.
    for path in [
        format!("/v1/apps/{APP1}/placements/onboarding/resolve/"),
        format!("/v1/apps/{APP1}/placements//resolve"),
        format!("/v1/apps/{APP1}/Events"),
        "/v1/apps//events".to_owned(),
        "/v1".to_owned(),
        "/v1x/events".to_owned(),
    ] {
        s.request(Method::POST, &path, &[])
            .await
            .problem(404, "not_found");
    }
}

/// The path is routed as actix routes it: percent-encoded unreserved characters are decoded,
/// an encoded `/` stays inside its segment (and is then not a valid placement key).
async fn percent_encoded_paths(backend: Backend) {
    let s = server!(backend);
    let body = json!({"user_id": "u", "session_id": "s", "device_platform": "ios", "attributes": {"country": "US"}});
    let plain = s
        .post(
            &format!("/v1/apps/{APP1}/placements/onboarding/resolve"),
            &body,
        )
        .await;
    assert_eq!(plain.status, 200);
    let encoded = s
        .post(
            &format!("/v1/apps/{APP1}/placements/onboard%69ng/resolve"),
            &body,
        )
        .await;
    assert_eq!(encoded.status, 200);
    assert_eq!(encoded.json()["flow_id"], plain.json()["flow_id"]);
    s.post(
        &format!("/v1/apps/{APP1}/placements/onboarding%2Fx/resolve"),
        &body,
    )
    .await
    .problem(400, "invalid_request");
}

async fn request_ids(backend: Backend) {
    let s = server!(backend);
    let body = json!({"user_id": "u", "session_id": "s", "device_platform": "ios"})
        .to_string()
        .into_bytes();
    let path = format!("/v1/apps/{APP1}/placements/onboarding/resolve");
    let r = s
        .post_with(
            &path,
            Some(&s.keys.sdk),
            body.clone(),
            &[("x-request-id", "trace-42.a_b")],
        )
        .await;
    assert_eq!(r.header("x-request-id"), Some("trace-42.a_b"));
    let r = s
        .post_with(
            &path,
            Some(&s.keys.sdk),
            body,
            &[("x-request-id", "bad id with spaces")],
        )
        .await;
    let id = r.header("x-request-id").unwrap();
    assert_eq!(uuid::Uuid::parse_str(id).unwrap().get_version_num(), 7);
    let p = s
        .post_with(&path, None, Vec::new(), &[("x-request-id", "err-1")])
        .await
        .problem(401, "missing_api_key");
    assert_eq!(p["request_id"], "err-1");
}

async fn cors(backend: Backend) {
    let s = server!(backend);
    let path = format!("/v1/apps/{APP1}/events");
    let r = s
        .request(
            Method::OPTIONS,
            &path,
            &[
                ("origin", "https://app.example"),
                ("access-control-request-method", "POST"),
                (
                    "access-control-request-headers",
                    "authorization, content-type",
                ),
            ],
        )
        .await;
    assert_eq!(r.status, 204);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert_eq!(r.header("access-control-allow-methods"), Some("GET, POST"));
    let allowed = r
        .header("access-control-allow-headers")
        .unwrap()
        .to_ascii_lowercase();
    // If-None-Match: OFREP's bulk evaluation answers 304 to a tag it gave (D32).
    for h in [
        "authorization",
        "content-type",
        "content-encoding",
        "if-none-match",
    ] {
        assert!(allowed.contains(h), "{allowed}");
    }
    assert_eq!(r.header("access-control-max-age"), Some("86400"));
    // Actual requests from a browser get the origin header and can read ours.
    let r = s
        .post_with(
            &path,
            Some(&s.keys.sdk),
            b"[]".to_vec(),
            &[("origin", "https://app.example")],
        )
        .await;
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    let exposed = r.header("access-control-expose-headers").unwrap();
    assert!(exposed.contains("X-Request-Id"), "{exposed}");
    assert!(
        exposed.contains("ETag"),
        "OFREP's bulk tag is readable: {exposed}"
    );
}

async fn compressed_responses(backend: Backend) {
    let s = server!(backend);
    // No attributes: the default flow, whose body (4 KB) is worth compressing.
    let body =
        json!({"user_id": "u", "session_id": "s", "device_platform": "ios", "attributes": {}})
            .to_string()
            .into_bytes();
    let path = format!("/v1/apps/{APP1}/placements/onboarding/resolve");
    let plain = s
        .post_with(
            &path,
            Some(&s.keys.sdk),
            body.clone(),
            &[("accept-encoding", "identity")],
        )
        .await;
    assert!(plain.header("content-encoding").is_none());
    for encoding in ["gzip", "br", "zstd"] {
        let r = s.post_accepting(&path, &body, encoding).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-encoding"), Some(encoding));
        if encoding == "gzip" {
            let mut decoded = Vec::new();
            flate2::read::GzDecoder::new(r.body.as_slice())
                .read_to_end(&mut decoded)
                .unwrap();
            assert_eq!(decoded, plain.body, "same bytes once decoded");
        }
    }
    // Clients accepting gzip and brotli get gzip (actix's brotli costs 2.4 ms per response);
    // brotli stays for clients that refuse gzip.
    // gzip whenever it is accepted (the flows are kept compressed for it); otherwise the
    // client's best by q-value.
    for (accept, expected) in [
        ("gzip, deflate, br", "gzip"),
        ("br;q=1.0, gzip;q=0.8", "gzip"),
        ("zstd;q=1.0, gzip;q=0.5", "gzip"),
        ("*", "gzip"),
        ("br, gzip;q=0", "br"),
        ("br, deflate", "br"),
        ("deflate;q=0.5, zstd", "zstd"),
        ("BR", "br"),
        ("identity, deflate", "deflate"),
        ("identity;q=0.1, br;q=0.5", "br"),
        ("identity;q=0.001, br;q=0.002", "br"),
        ("identity;q=0.2, br;Q=0.5", "br"),
    ] {
        let r = s.post_accepting(&path, &body, accept).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-encoding"), Some(expected), "{accept}");
    }
    // Identity when nothing else we have is acceptable (refused, unknown) or the client prefers it.
    for accept in [
        "identity",
        "identity;q=1.0",
        "br;q=0, identity",
        "*;q=0, identity",
        "compress, identity",
        "identity;q=0.5, br;q=0.1",
        "",
    ] {
        let r = s.post_accepting(&path, &body, accept).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-encoding"), None, "{accept}");
        assert_eq!(r.body, plain.body, "{accept}");
    }
    // Every Accept-Encoding line counts, not only the first.
    for (lines, expected) in [
        (["identity", "br"], Some("br")),
        (["br", "gzip"], Some("gzip")),
        (["br;q=0", "identity"], None),
    ] {
        let mut req = s
            .client
            .post(s.url(&path))
            .no_decompress()
            .insert_header(("content-type", "application/json"))
            .insert_header(("authorization", TestServer::bearer(&s.keys.sdk)));
        for line in lines {
            req = req.append_header(("accept-encoding", line));
        }
        let r = Reply::from(req.send_body(body.clone()).await.expect("request sent")).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-encoding"), expected, "{lines:?}");
    }
    assert!(plain.body.len() > 4096, "{} bytes", plain.body.len());
    // Bodies under 1 KiB go out as they are, whatever is accepted: resolves of a small flow or
    // of none, a problem. `Vary` still says the representation depends on Accept-Encoding.
    let small = [
        format!("/v1/apps/{APP1}/placements/paywall/resolve"),
        format!("/v1/apps/{APP1}/placements/empty/resolve"),
        format!("/v1/apps/{APP1}/placements/no-such-placement/resolve"),
        "/v1/apps/20000000-0000-4000-8000-0000000000ff/placements/onboarding/resolve".to_owned(),
    ];
    for path in &small {
        let plain = s.post_accepting(path, &body, "identity").await;
        assert!(
            plain.body.len() < 1024,
            "{path}: {} bytes",
            plain.body.len()
        );
        for accept in ["gzip", "gzip, deflate, br", "br", "zstd"] {
            let r = s.post_accepting(path, &body, accept).await;
            assert_eq!(r.status, plain.status, "{path} {accept}");
            assert!(r.header("content-encoding").is_none(), "{path} {accept}");
            assert_eq!(r.header("vary"), Some("accept-encoding"), "{path} {accept}");
            assert_eq!(
                r.json()["flow_id"],
                plain.json()["flow_id"],
                "{path} {accept}"
            );
        }
    }
    // Nothing acceptable that we have: the response goes out uncompressed (RFC 9110 §12.5.3),
    // never a 406 without a problem body.
    for accept in ["compress", "identity;q=0, *;q=0", "gzip;q=0"] {
        let r = s.post_accepting(&path, &body, accept).await;
        assert_eq!(r.status, 200, "{accept}");
        assert!(r.header("content-encoding").is_none(), "{accept}");
        assert_eq!(r.body, plain.body, "{accept}");
    }
}

async fn rate_limits_with_headers(backend: Backend) {
    let config = HttpConfig {
        rate_limit: RateLimitConfig {
            per_ip_rps: 1,
            per_ip_burst: 3,
            ..RateLimitConfig::default()
        },
        ..HttpConfig::default()
    };
    let s = server!(backend, config);
    let path = format!("/v1/apps/{APP1}/placements/onboarding/resolve");
    let body = json!({"user_id": "u", "session_id": "s", "device_platform": "ios"});
    let first = s.post(&path, &body).await;
    assert_eq!(first.status, 200);
    assert_eq!(
        (
            first.header("ratelimit-limit"),
            first.header("ratelimit-remaining")
        ),
        (Some("3"), Some("2"))
    );
    assert!(first.header("ratelimit-reset").is_some());
    s.post(&path, &body).await;
    // An unknown key counts against the client IP too (D10), and its 401 says so.
    let unknown = s.post_with(&path, None, Vec::new(), &[]).await;
    assert_eq!(
        (
            unknown.header("ratelimit-limit"),
            unknown.header("ratelimit-remaining")
        ),
        (Some("3"), Some("0"))
    );
    unknown.problem(401, "missing_api_key");
    let limited = s.post(&path, &body).await;
    limited.problem(429, "rate_limited");
    let retry: u32 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry), "{retry}");
    assert_eq!(limited.header("ratelimit-remaining"), Some("0"));

    // The headers report the limit closest to refusing: here the key's, then its refusal.
    let config = HttpConfig {
        rate_limit: RateLimitConfig {
            per_ip_rps: 1,
            per_ip_burst: 50,
            per_key_rps: 1,
            per_key_burst: 2,
            ..RateLimitConfig::default()
        },
        ..HttpConfig::default()
    };
    let s = server!(backend, config);
    let limits = |r: &Reply| {
        (
            r.header("ratelimit-limit").map(str::to_owned),
            r.header("ratelimit-remaining").map(str::to_owned),
        )
    };
    let first = s.post(&path, &body).await;
    assert_eq!(limits(&first), (Some("2".into()), Some("1".into())));
    s.post(&path, &body).await;
    let refused = s.post(&path, &body).await;
    assert_eq!(limits(&refused), (Some("2".into()), Some("0".into())));
    refused.problem(429, "rate_limited");
}

async fn rate_limit_by_forwarded_address(backend: Backend) {
    let config = HttpConfig {
        rate_limit: RateLimitConfig {
            per_ip_rps: 1,
            per_ip_burst: 1,
            trusted_proxies: vec!["127.0.0.1/32".parse().unwrap()],
            ..RateLimitConfig::default()
        },
        ..HttpConfig::default()
    };
    let s = server!(backend, config);
    let path = format!("/v1/apps/{APP1}/placements/onboarding/resolve");
    let body = json!({"user_id": "u", "session_id": "s", "device_platform": "ios"})
        .to_string()
        .into_bytes();
    let as_client = |ip: &'static str| vec![("x-forwarded-for", ip)];
    assert_eq!(
        s.post_with(
            &path,
            Some(&s.keys.sdk),
            body.clone(),
            &as_client("198.51.100.1")
        )
        .await
        .status,
        200
    );
    s.post_with(
        &path,
        Some(&s.keys.sdk),
        body.clone(),
        &as_client("198.51.100.1"),
    )
    .await
    .problem(429, "rate_limited");
    // Behind the trusted proxy, another device is another client.
    assert_eq!(
        s.post_with(&path, Some(&s.keys.sdk), body, &as_client("198.51.100.2"))
            .await
            .status,
        200
    );
}
