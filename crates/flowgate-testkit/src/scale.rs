//! The benchmark catalog (the catalog at scale of docs/benchmarks.md): 10 workspaces, 100
//! apps, 5,000 placements and 2,000 flow versions of about 20 KB each, as D13 catalog file
//! text. `flowgate-store`'s catalog benchmark times importing and loading it; the store's
//! tests round-trip it through an export (D19). Deterministic: the same text every time.

use std::fmt::Write as _;

use flowgate_domain::keys::{ApiKey, KeyEnvironment};

/// Workspaces, each with one live SDK key.
pub const WORKSPACES: usize = 10;
/// Apps per workspace.
pub const APPS_PER_WORKSPACE: usize = 10;
/// Flows per app, each publishing its last version.
pub const FLOWS_PER_APP: usize = 10;
/// Versions per flow.
pub const VERSIONS_PER_FLOW: usize = 2;
/// Placements per app: two flow rules each, and every fifth a running experiment.
pub const PLACEMENTS_PER_APP: usize = 50;
/// About the size of each `flow_schema`, in bytes.
pub const SCHEMA_BYTES: usize = 20_000;
/// Apps in the catalog.
pub const APPS: usize = WORKSPACES * APPS_PER_WORKSPACE;
/// Placements in the catalog.
pub const PLACEMENTS: usize = APPS * PLACEMENTS_PER_APP;
/// Flow versions in the catalog.
pub const VERSIONS: usize = APPS * FLOWS_PER_APP * VERSIONS_PER_FLOW;

fn uuid(kind: u128, n: usize) -> String {
    uuid::Uuid::from_u128((kind << 96) | 0x4000_8000_0000_0000 | n as u128)
        .hyphenated()
        .to_string()
}

/// A flow definition of about `SCHEMA_BYTES`: screens of text, image and button components.
fn flow_schema(out: &mut String, seed: usize) {
    let start = out.len();
    write!(out, r##"{{"id":"flow-{seed}","theme":{{"background":"#FFFFFF","accent":"#3355FF"}},"screens":["##).unwrap();
    let mut i = 0;
    while out.len() - start < SCHEMA_BYTES {
        if i > 0 {
            out.push(',');
        }
        write!(
            out,
            r##"{{"id":"screen-{i}","type":"page","components":[{{"type":"text","text":"Welcome to step {i} of flow {seed}: everything you need, nothing you do not.","style":{{"font":"Inter","size":17,"weight":600,"color":"#1A1A1A"}}}},{{"type":"image","url":"media/hero-{seed}-{i}.webp","aspect":1.777}},{{"type":"button","label":"Continue","action":{{"type":"next"}},"style":{{"radius":12}}}}]}}"##
        )
        .unwrap();
        i += 1;
    }
    out.push_str("]}");
}

/// The catalog file, in D13's JSON shape (about 45 MB).
pub fn catalog_file() -> String {
    let mut out = String::with_capacity(45_000_000);
    out.push_str(r#"{"workspaces":["#);
    let mut app_n = 0;
    for w in 0..WORKSPACES {
        if w > 0 {
            out.push(',');
        }
        let key = ApiKey::from_random(KeyEnvironment::Live, &format!("{w:0>30}"));
        write!(
            out,
            r#"{{"id":"{}","name":"Workspace {w}","api_keys":[{{"key":"{}","type":"sdk","name":"sdk"}}],"apps":["#,
            uuid(1, w),
            key.expose()
        )
        .unwrap();
        for a in 0..APPS_PER_WORKSPACE {
            if a > 0 {
                out.push(',');
            }
            write!(
                out,
                r#"{{"id":"{}","name":"App {app_n}","media_base_url":"https://cdn.example.com/{app_n}/media/","icon_base_url":"https://cdn.example.com/{app_n}/icons/","saved_groups":{{"beta":["u-1","u-2","u-3"]}},"flows":["#,
                uuid(2, app_n)
            )
            .unwrap();
            for f in 0..FLOWS_PER_APP {
                let flow = app_n * FLOWS_PER_APP + f;
                if f > 0 {
                    out.push(',');
                }
                write!(
                    out,
                    r#"{{"id":"{}","name":"Flow {flow}","published_version":{VERSIONS_PER_FLOW},"versions":["#,
                    uuid(3, flow)
                )
                .unwrap();
                for v in 0..VERSIONS_PER_FLOW {
                    let version = flow * VERSIONS_PER_FLOW + v;
                    if v > 0 {
                        out.push(',');
                    }
                    write!(
                        out,
                        r#"{{"id":"{}","version":{},"schema_version":1,"fonts":[{{"family":"Inter","weight":400,"style":"normal","url":"https://cdn.example.com/inter.woff2"}}],"flow_schema":"#,
                        uuid(4, version),
                        v + 1
                    )
                    .unwrap();
                    flow_schema(&mut out, version);
                    out.push('}');
                }
                out.push_str("]}");
            }
            out.push_str(r#"],"placements":["#);
            for p in 0..PLACEMENTS_PER_APP {
                let placement = app_n * PLACEMENTS_PER_APP + p;
                if p > 0 {
                    out.push(',');
                }
                let flow = |k: usize| uuid(3, app_n * FLOWS_PER_APP + (p + k) % FLOWS_PER_APP);
                write!(
                    out,
                    r#"{{"key":"placement.{p}","default_flow_id":"{}","rules":[{{"audience":{{"country":{{"$in":["US","CA","GB"]}},"app.version":{{"$vgte":"2.1.0"}}}},"flow_id":"{}"}},{{"audience":{{"email":{{"$regex":"@example\\.(org|com)$"}}}},"flow_id":"{}"}}"#,
                    flow(0),
                    flow(1),
                    flow(2)
                )
                .unwrap();
                if p % 5 == 0 {
                    write!(
                        out,
                        r#",{{"audience":{{}},"experiment":{{"id":"{}","name":"test {placement}","status":"running","coverage":0.9,"variants":[{{"id":"{}","name":"control","weight":1,"flow_id":null}},{{"id":"{}","name":"new","weight":1,"flow_id":"{}"}}]}}}}"#,
                        uuid(5, placement),
                        uuid(6, placement * 2),
                        uuid(6, placement * 2 + 1),
                        flow(3)
                    )
                    .unwrap();
                }
                out.push_str("]}");
            }
            out.push_str("]}");
            app_n += 1;
        }
        out.push_str("]}");
    }
    out.push_str("]}");
    out
}

/// The experiment at scale of the results benchmark (D22, docs/benchmarks.md): one app with a
/// running two-variant paywall experiment, and the events of `users` exposed users spread over
/// `days` days, about ten per user: the flow loading and opening (the exposure), screens,
/// `flow_complete` for about 40% (44% in the new variant), `purchase_complete` for about 5%
/// (5.5%) at 4.99 or 9.99 (one in ten in EUR), and one user in 200 exposed to both variants.
/// Deterministic: the same events for the same arguments, so a benchmark's answer is known.
pub mod experiment {
    use flowgate_domain::catalog::CatalogData;
    use flowgate_domain::events::{AnalyticsEvent, EventSource, EventType};
    use flowgate_domain::ids::{AppId, EventId, FlowId, FlowVersionId};
    use flowgate_domain::Platform;
    use time::{Duration, OffsetDateTime};

    /// The app.
    pub const APP: u128 = 0xA100_0000_0000_4000_8000_0000_0000_0001;
    /// The experiment.
    pub const EXPERIMENT: u128 = 0xE100_0000_0000_4000_8000_0000_0000_0001;
    /// The variants: `control` and `new`.
    pub const VARIANTS: [u128; 2] = [
        0x7A00_0000_0000_4000_8000_0000_0000_0001,
        0x7A00_0000_0000_4000_8000_0000_0000_0002,
    ];
    const FLOW: u128 = 0xF100_0000_0000_4000_8000_0000_0000_0001;
    const VERSION: u128 = 0xF200_0000_0000_4000_8000_0000_0000_0001;

    fn id(n: u128) -> String {
        uuid::Uuid::from_u128(n).hyphenated().to_string()
    }

    /// The catalog holding the app and the experiment (no keys).
    pub fn catalog() -> CatalogData {
        let text = format!(
            r#"{{"workspaces": [{{"id": "{ws}", "name": "Scale", "apps": [{{
                "id": "{app}", "name": "Scale app",
                "media_base_url": "https://cdn.example.com/", "icon_base_url": "https://cdn.example.com/",
                "flows": [{{"id": "{flow}", "name": "Paywall", "published_version": 1, "versions": [
                    {{"id": "{version}", "version": 1, "schema_version": 1, "fonts": [], "flow_schema": {{"screens": []}}}}]}}],
                "placements": [{{"key": "paywall", "rules": [{{"experiment": {{
                    "id": "{exp}", "name": "paywall-price", "status": "running",
                    "variants": [{{"id": "{v0}", "name": "control", "weight": 1, "flow_id": "{flow}"}},
                                 {{"id": "{v1}", "name": "new", "weight": 1, "flow_id": "{flow}"}}]}}}}]}}]
            }}]}}]}}"#,
            ws = id(0xB100_0000_0000_4000_8000_0000_0000_0001),
            app = id(APP),
            flow = id(FLOW),
            version = id(VERSION),
            exp = id(EXPERIMENT),
            v0 = id(VARIANTS[0]),
            v1 = id(VARIANTS[1]),
        );
        match serde_json::from_str(&text) {
            Ok(data) => data,
            Err(e) => panic!("the scale catalog parses: {e}"),
        }
    }

    /// splitmix64: a deterministic stream of numbers per user.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        /// True with probability `p`.
        fn chance(&mut self, p: f64) -> bool {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
        }
    }

    /// The events of users `users` (of `total` users spread over `days` days from `start`).
    pub fn events(
        users: std::ops::Range<u64>,
        total: u64,
        days: u32,
        start: OffsetDateTime,
    ) -> Vec<AnalyticsEvent> {
        let mut out = Vec::with_capacity((users.end - users.start) as usize * 11);
        let span = i64::from(days) * 86_400;
        for u in users {
            let mut rng = Rng(u.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xF10E_6A7E);
            let variant = usize::from(rng.next() % 2 == 1);
            let at = start + Duration::seconds(u as i64 * span / total.max(1) as i64);
            let user = format!("user-{u}");
            let mut n = 0u128;
            let mut push = |out: &mut Vec<AnalyticsEvent>, t: EventType, dt: i64| {
                n += 1;
                let mut e = AnalyticsEvent::new(
                    EventId::from_uuid(uuid::Uuid::from_u128(
                        (0xEE00_0000_0000_4000_8000_0000_0000_0000u128 | (u128::from(u) << 8)) + n,
                    )),
                    EventSource::Sdk,
                    t,
                    AppId::from_uuid(uuid::Uuid::from_u128(APP)),
                    user.clone(),
                    format!("s-{u}"),
                    Platform::Ios,
                    at + Duration::seconds(dt),
                )
                .with_flow_id(Some(FlowId::from_uuid(uuid::Uuid::from_u128(FLOW))))
                .with_flow_version_id(Some(FlowVersionId::from_uuid(uuid::Uuid::from_u128(
                    VERSION,
                ))))
                .with_placement_key(Some("paywall".to_owned()))
                .with_sdk_version(Some("3.1.0".to_owned()));
                if t == EventType::ScreenView {
                    e.payload
                        .insert("screen_index".to_owned(), serde_json::json!(n % 5));
                }
                out.push(e);
                out.len() - 1
            };
            push(&mut out, EventType::FlowLoadStart, 0);
            push(&mut out, EventType::FlowLoadComplete, 1);
            let open = push(&mut out, EventType::FlowOpen, 2);
            out[open].experiment_id = Some(id(EXPERIMENT));
            out[open].variant_id = Some(id(VARIANTS[variant]));
            if u % 200 == 7 {
                let other = push(&mut out, EventType::FlowOpen, 3_600);
                out[other].experiment_id = Some(id(EXPERIMENT));
                out[other].variant_id = Some(id(VARIANTS[1 - variant]));
            }
            for s in 0..5 {
                push(&mut out, EventType::ScreenView, 10 + s * 15);
            }
            let lift = if variant == 1 { 1.1 } else { 1.0 };
            if rng.chance(0.40 * lift) {
                push(&mut out, EventType::FlowComplete, 120);
            }
            if rng.chance(0.05 * lift) {
                let p = push(&mut out, EventType::PurchaseComplete, 150);
                let price = if rng.chance(0.5) { 9.99 } else { 4.99 };
                let currency = if rng.chance(0.1) { "EUR" } else { "USD" };
                out[p]
                    .payload
                    .insert("revenue".to_owned(), serde_json::json!(price));
                out[p]
                    .payload
                    .insert("currency".to_owned(), serde_json::json!(currency));
            }
        }
        out
    }
}
