//! Embedding the domain crate through its facade, `Engine` (D31): load a catalog file,
//! resolve and explain a placement for a few users, validate an analytics event, swap the
//! catalog, and compare two variants from their counts.
//!
//! Run it with `cargo run -p flowgate-domain --example embed`.

use std::error::Error;

use flowgate_domain::events::ValidationLimits;
use flowgate_domain::results::{compare, srm_p_value, MetricKind, VariantSums};
use flowgate_domain::{Engine, Platform, ResolveRequest};
use time::OffsetDateTime;

fn main() -> Result<(), Box<dyn Error>> {
    // 1. The engine: a catalog file validated and compiled once; share it between threads.
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/catalog.json");
    let file = std::fs::read_to_string(path)?;
    let engine = Engine::from_catalog_file(&file)?;
    let app = "9b2f3c70-0000-4000-8000-0000000000a1".parse()?;

    // 2. Resolve the paywall for a few users, each request on one snapshot: the experiment
    //    assigns each a variant, the same one any GrowthBook SDK would.
    let attributes = serde_json::json!({"country": "US"});
    let attributes = attributes.as_object().ok_or("an object")?;
    let mut served = None;
    for user in ["user-1", "user-2", "user-3", "user-4", "user-5"] {
        let snapshot = engine.snapshot();
        let request = ResolveRequest::new(user, "session-1", Platform::Ios, attributes);
        let resolution = snapshot.resolve(app, "paywall", &request)?;
        let variant = resolution.assignment().map_or("-", |a| a.variant.name());
        match resolution.version() {
            Some(version) => {
                println!("{user}: variant {variant}, flow version {}", version.id());
                served.get_or_insert((user, version.flow_id(), version.id()));
            }
            None => println!("{user}: no flow ({:?})", resolution.no_flow_reason()),
        }
    }
    let snapshot = engine.snapshot();
    let elsewhere = serde_json::Map::new();
    let request = ResolveRequest::new("user-6", "session-1", Platform::Web, &elsewhere);
    let explained = snapshot.explain(app, "paywall", &request)?;
    println!("user-6 without a country: {:?}", explained.reason);

    // 3. Validate the event an SDK sends when the first user opens the flow it was given.
    let (user, flow, version) = served.ok_or("a user was served a flow")?;
    let now = OffsetDateTime::now_utc();
    let event = serde_json::json!({
        "event_id": "0d6e4b1e-8f7a-4c39-9a57-2b1f0c3d4e5f", "app_id": app.to_string(),
        "flow_id": flow.to_string(), "flow_version_id": version.to_string(),
        "user_id": user, "session_id": "session-1", "device_platform": "ios",
        "event_type": "flow_open", "sdk_version": "1.0.0",
        "timestamp": now.format(&time::format_description::well_known::Rfc3339)?,
    });
    let limits = ValidationLimits::default();
    let stored = snapshot.validate_event(&event, app, now, &limits)?;
    println!(
        "event {} is valid: {:?} by {}",
        stored.event_id, stored.event_type, stored.user_id
    );
    let mut stale = event.clone();
    stale["timestamp"] = "2020-01-01T00:00:00Z".into();
    if let Err(error) = snapshot.validate_event(&stale, app, now, &limits) {
        println!(
            "an event from 2020 is refused: {} ({})",
            error.code.as_str(),
            error.message
        );
    }

    // A new catalog is swapped in whole; requests on the old snapshot finish on it.
    let previous = engine.swap_file(&file)?;
    println!(
        "catalog swapped; the previous one is still held by {} snapshot(s)",
        std::sync::Arc::strong_count(&previous) - 1
    );

    // 4. Which variant wins, from counts: users and conversions per variant.
    let control = VariantSums {
        users: 1000,
        sum: 100.0,
        sum_squares: 100.0,
    };
    let cheaper = VariantSums {
        users: 1010,
        sum: 131.0,
        sum_squares: 131.0,
    };
    let estimate = compare(MetricKind::Conversion, &control, &cheaper)?;
    println!(
        "cheaper vs control: lift {:+.1}% (95% CI {:+.1}% to {:+.1}%), chance to win {:.1}%",
        estimate.lift * 100.0,
        estimate.ci_low * 100.0,
        estimate.ci_high * 100.0,
        estimate.chance_to_win * 100.0
    );
    println!(
        "sample ratio check: p = {:.3}",
        srm_p_value(&[control.users, cheaper.users], &[0.5, 0.5])
    );
    Ok(())
}
