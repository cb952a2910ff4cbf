//! Another team's actix-web service embedding flowgate's engine (D31): it answers
//! `GET /paywall?user=U&country=C` itself, from an `Engine` shared by every worker, with no
//! flowgate server in between, and takes a new catalog file on `PUT /catalog`, swapped whole
//! (a request in flight finishes on the catalog it started with; a bad file changes nothing).
//!
//! `cargo run -p flowgate-http --example engine_service` serves on 127.0.0.1:8090.
//! `cargo run -p flowgate-http --example engine_service -- --check` serves on a free port,
//! asks it as a client would, checks each answer against the engine itself, and exits
//! (`make test` runs it).

use std::net::{SocketAddr, TcpListener};

use actix_web::{web, App, HttpResponse, HttpServer};
use flowgate_domain::ids::AppId;
use flowgate_domain::{Engine, Platform, ResolveRequest};
use serde::Deserialize;
use serde_json::{json, Value};

/// The app of the example catalog, and the catalog file (D13).
const APP: &str = "9b2f3c70-0000-4000-8000-0000000000a1";
const CATALOG: &str = include_str!("../../flowgate-domain/examples/catalog.json");

/// Who asks: the service's own query parameters, mapped onto flowgate's request.
#[derive(Deserialize)]
struct Who {
    user: String,
    country: Option<String>,
}

/// The service's state: the engine and the app it serves.
struct Paywalls {
    engine: Engine,
    app: AppId,
}

/// `GET /paywall`: the variant and flow this user gets, or why none.
async fn paywall(state: web::Data<Paywalls>, who: web::Query<Who>) -> HttpResponse {
    let mut attributes = serde_json::Map::new();
    if let Some(country) = &who.country {
        attributes.insert("country".to_owned(), Value::from(country.as_str()));
    }
    let request = ResolveRequest::new(&who.user, "session", Platform::Ios, &attributes);
    // One snapshot per request: a swap meanwhile does not change this answer.
    let snapshot = state.engine.snapshot();
    match snapshot.resolve(state.app, "paywall", &request) {
        Ok(resolution) => match resolution.version() {
            Some(version) => HttpResponse::Ok().json(json!({
                "variant": resolution.assignment().map(|a| a.variant.name()),
                "flow_version_id": version.id(),
                // The flow exactly as published, not parsed again.
                "flow": serde_json::from_str::<Value>(version.flow_schema().get())
                    .unwrap_or(Value::Null),
            })),
            None => HttpResponse::Ok().json(json!({"no_flow": resolution.no_flow_reason()})),
        },
        Err(error) => HttpResponse::InternalServerError().body(error.to_string()),
    }
}

/// `PUT /catalog`: a new catalog file, validated whole and swapped in; 400 keeps the old one.
async fn put_catalog(state: web::Data<Paywalls>, body: String) -> HttpResponse {
    match state.engine.swap_file(&body) {
        Ok(_) => HttpResponse::NoContent().finish(),
        Err(error) => HttpResponse::BadRequest().body(error.to_string()),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let check = std::env::args().any(|a| a == "--check");
    let state = web::Data::new(Paywalls {
        engine: Engine::from_catalog_file(CATALOG)?,
        app: APP.parse()?,
    });
    let listener = TcpListener::bind(if check {
        "127.0.0.1:0"
    } else {
        "127.0.0.1:8090"
    })?;
    let addr = listener.local_addr()?;
    let served = state.clone();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(served.clone())
            .route("/paywall", web::get().to(paywall))
            .route("/catalog", web::put().to(put_catalog))
    })
    .workers(2)
    .listen(listener)?
    .run();
    actix_web::rt::System::new().block_on(async move {
        if !check {
            println!("serving http://{addr}/paywall?user=user-1&country=US");
            return server.await.map_err(Into::into);
        }
        let handle = server.handle();
        let running = actix_web::rt::spawn(server);
        let checked = self_check(addr, &state).await;
        handle.stop(true).await;
        running.await??;
        checked
    })
}

/// Asks the service as a client would and holds each answer to the engine's own.
async fn self_check(addr: SocketAddr, state: &Paywalls) -> Result<(), Box<dyn std::error::Error>> {
    let client = awc::Client::default();
    let get = |query: &str| {
        let url = format!("http://{addr}/paywall?{query}");
        let client = client.clone();
        async move {
            let mut answer = client.get(url).send().await?;
            let body: Value = answer.json().await?;
            Ok::<_, Box<dyn std::error::Error>>((answer.status().as_u16(), body))
        }
    };
    let expected = |user: &str, country: &str| {
        let mut attributes = serde_json::Map::new();
        attributes.insert("country".to_owned(), Value::from(country));
        let request = ResolveRequest::new(user, "session", Platform::Ios, &attributes);
        let snapshot = state.engine.snapshot();
        let resolution = snapshot.resolve(state.app, "paywall", &request).ok()?;
        resolution.assignment().map(|a| a.variant.name().to_owned())
    };

    // Users in the audience get the experiment's variants, as the engine assigns them.
    let mut variants = std::collections::BTreeSet::new();
    for n in 1..=20 {
        let user = format!("user-{n}");
        let (status, body) = get(&format!("user={user}&country=US")).await?;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["variant"].as_str(), expected(&user, "US").as_deref());
        // Each variant shows its own flow of the catalog file.
        let price = match body["variant"].as_str() {
            Some("control") => "29.99",
            Some("cheaper") => "24.99",
            other => panic!("no such variant {other:?}: {body}"),
        };
        assert_eq!(body["flow"]["screens"][0]["price"], price, "{body}");
        variants.insert(body["variant"].as_str().unwrap_or_default().to_owned());
    }
    assert_eq!(
        variants.len(),
        2,
        "20 users see both variants: {variants:?}"
    );
    // Outside the audience: no flow, with flowgate's reason.
    let (_, body) = get("user=user-1&country=DE").await?;
    assert_eq!(body, json!({"no_flow": "no_rule_matched"}));

    // A new catalog (the audience now includes DE) is swapped in; a bad one changes nothing.
    let widened = CATALOG.replace(r#"["US", "CA"]"#, r#"["US", "CA", "DE"]"#);
    let put = |body: String| {
        let client = client.clone();
        async move {
            let mut answer = client
                .put(format!("http://{addr}/catalog"))
                .send_body(body)
                .await?;
            let text = String::from_utf8_lossy(&answer.body().await?).into_owned();
            Ok::<_, Box<dyn std::error::Error>>((answer.status().as_u16(), text))
        }
    };
    assert_eq!(put(widened).await?.0, 204);
    let (_, body) = get("user=user-1&country=DE").await?;
    assert_eq!(
        body["variant"].as_str(),
        expected("user-1", "DE").as_deref()
    );
    assert!(body["variant"].is_string(), "{body}");
    let (status, text) = put(CATALOG.replace("\"weight\": 1", "\"weight\": -1")).await?;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("weight"), "{text}");
    let (_, body) = get("user=user-1&country=DE").await?;
    assert!(
        body["variant"].is_string(),
        "the widened catalog still serves: {body}"
    );
    println!("engine_service: every answer matched the engine's");
    Ok(())
}
