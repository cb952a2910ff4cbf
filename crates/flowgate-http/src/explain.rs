//! Explain (D18) for the admin listener and the command line: for a resolve request body, the
//! body resolve answers, byte for byte, with the domain's trace and reason
//! ([`flowgate_domain::explain`]). Explain records no event.

use actix_web::web::Bytes;
use flowgate_domain::explain::{Reason, Step};
use flowgate_domain::ports::StickyStore;
use flowgate_domain::resolve::StickyState;
use flowgate_domain::Catalog;

use crate::guard;
use crate::handlers::identity::identity;
use crate::problem::ApiError;
use crate::request_body;
use crate::resolve_body::Parsed;
use crate::response::{write_result, BodyWriter};

/// An explained resolve.
#[derive(Debug)]
pub struct Explained {
    result: Bytes,
    reason: Reason,
    trace: Vec<Step>,
}

impl Explained {
    /// The body resolve answers for the same request (its exact bytes).
    pub fn result(&self) -> &[u8] {
        &self.result
    }

    /// Why the outcome is what it is.
    pub fn reason(&self) -> Reason {
        self.reason
    }

    /// The evaluation's steps, in order.
    pub fn trace(&self) -> &[Step] {
        &self.trace
    }

    /// `{"result": ..., "trace": [...], "reason": "..."}`, with the result's bytes unchanged.
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.result.len() + 1024);
        out.extend_from_slice(b"{\"result\":");
        out.extend_from_slice(&self.result);
        out.extend_from_slice(b",\"trace\":");
        // Serialising owned trace types into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out, &self.trace);
        out.extend_from_slice(b",\"reason\":\"");
        out.extend_from_slice(self.reason.as_str().as_bytes());
        out.extend_from_slice(b"\"}");
        out
    }
}

/// Explains resolving placement `key` of app `app_id` (both as written in a URL) for a resolve
/// request `body`, on `catalog`; `default_ttl` is the configured `cache_ttl_seconds` for apps
/// without their own. The same checks as resolve, in the same order (D9), except that no key
/// is involved: any app of the catalog may be explained.
///
/// With `sticky`, the user's stored assignments are read as resolve reads them (D23), and the
/// trace says for each sticky experiment whether one decided; a read that fails is reported as
/// not read. Without it, sticky experiments are explained as bucketed without them.
pub async fn explain(
    catalog: &Catalog,
    app_id: &str,
    key: &str,
    body: &[u8],
    default_ttl: u32,
    sticky: Option<&dyn StickyStore>,
) -> Result<Explained, ApiError> {
    let app_id = guard::app_id_param(app_id)?;
    let key = guard::placement_param(key)?;
    let app = catalog.app(app_id).ok_or_else(ApiError::app_not_found)?;
    let mut body = match Parsed::from_slice(body).map_err(request_body::not_json)? {
        Parsed::Object(body) => body,
        Parsed::NotObject => {
            return Err(ApiError::invalid_request("the body must be a JSON object"))
        }
    };
    let mut errors = Vec::new();
    let id = identity(&mut body, &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    let request = id.request();
    let ids = app.sticky_ids([key], &request);
    let explanation = match sticky {
        Some(store) if !ids.is_empty() => {
            let state = match store.read_sticky(app.id(), &ids).await {
                Ok(docs) => StickyState::new(docs),
                Err(error) => {
                    tracing::warn!(%error, "explain: stored assignments not read");
                    StickyState::unavailable()
                }
            };
            app.explain_sticky(key, &request, &state)
        }
        _ => app.explain(key, &request),
    };
    let mut result = BodyWriter::contiguous(512);
    write_result(
        &mut result,
        app,
        &explanation.resolution,
        default_ttl,
        None,
        None,
    );
    Ok(Explained {
        result: result.finish_joined(),
        reason: explanation.reason,
        trace: explanation.trace,
    })
}

#[cfg(test)]
mod tests {
    use flowgate_domain::catalog::{
        AppData, CatalogData, ExperimentData, ExperimentStatus, FlowData, FlowVersionData,
        PlacementData, RuleData, VariantData, WorkspaceData,
    };
    use flowgate_domain::ids::{
        AppId, ExperimentId, FlowId, FlowVersionId, VariantId, WorkspaceId,
    };
    use flowgate_domain::{ResolveMode, ResolveRequest};
    use proptest::prelude::*;
    use serde_json::{json, Value};
    use uuid::Uuid;

    use super::*;

    const APP: u128 = 0xa1;

    /// Audiences over every kind of clause: field tests, dotted keys (literal and nested),
    /// identity fields, saved groups, logical operators, arrays.
    fn audiences() -> Vec<Value> {
        vec![
            json!({}),
            json!({"country": {"$in": ["US", "CA"]}}),
            json!({"country": "DE"}),
            json!({"app.version": {"$vgte": "2.1.0"}}),
            json!({"age": {"$gt": 30}}),
            json!({"$or": [{"country": "FR"}, {"age": {"$lt": 18}}]}),
            json!({"$not": {"country": "US"}}),
            json!({"user_id": {"$in": ["u1", "u2"]}}),
            json!({"device_platform": "ios"}),
            json!({"user_id": {"$inGroup": "beta"}}),
            json!({"tags": {"$elemMatch": {"$eq": "vip"}}}),
            json!({"country": {"$exists": true}, "age": {"$gte": 21}}),
            json!({"profile.plan": "pro"}),
            json!({"session_id": {"$regex": "^s-1"}}),
        ]
    }

    fn flow_id(i: usize) -> FlowId {
        FlowId(Uuid::from_u128(0xf0 + i as u128))
    }

    fn experiment(
        id: usize,
        status: u8,
        coverage: u8,
        namespace: Option<(u8, u8)>,
        variants: &[(u8, Option<usize>)],
    ) -> ExperimentData {
        ExperimentData {
            id: ExperimentId(Uuid::from_u128(0xe000 + id as u128)),
            name: format!("exp-{id}"),
            status: [
                ExperimentStatus::Running,
                ExperimentStatus::Running,
                ExperimentStatus::Paused,
                ExperimentStatus::Draft,
                ExperimentStatus::Concluded,
            ][usize::from(status) % 5],
            seed: id.is_multiple_of(2).then(|| format!("seed-{id}")),
            coverage: Some([1.0, 0.5, 0.3, 0.0][usize::from(coverage) % 4]),
            namespace: namespace.map(|(a, b)| {
                let (a, b) = (f64::from(a.min(b)) / 10.0, f64::from(a.max(b)) / 10.0);
                ("ns".to_owned(), a, b)
            }),
            hash_version: None,
            sticky: false,
            bucket_version: 0,
            min_bucket_version: 0,
            fallback_attribute: None,
            analysis: None,
            starts_at: None,
            ends_at: None,
            variants: variants
                .iter()
                .enumerate()
                .map(|(i, (weight, flow))| VariantData {
                    id: VariantId(Uuid::from_u128(0x1_0000 * (id as u128 + 1) + i as u128)),
                    name: format!("v{i}"),
                    weight: f64::from(*weight),
                    flow_id: flow.map(flow_id),
                    flow_version: None,
                })
                .collect(),
        }
    }

    type RuleShape = (
        usize,
        Option<(u8, u8, Option<(u8, u8)>, Vec<(u8, Option<usize>)>)>,
        usize,
    );

    fn catalog(rules: &[RuleShape], default: Option<usize>) -> Catalog {
        let flows = (0..3)
            .map(|i| FlowData {
                id: flow_id(i),
                name: format!("flow-{i}"),
                // Flow 2 publishes nothing (D3.4).
                published_version: (i < 2).then_some(1),
                versions: vec![FlowVersionData {
                    id: FlowVersionId(Uuid::from_u128(0xfe0 + i as u128)),
                    version: 1,
                    schema_version: 1,
                    fonts: Vec::new(),
                    flow_schema: serde_json::value::RawValue::from_string(format!(
                        r#"{{"screens": [{{"id": "s{i}"}}]}}"#
                    ))
                    .unwrap(),
                }],
            })
            .collect();
        let audiences = audiences();
        let rules = rules
            .iter()
            .enumerate()
            .map(|(i, (audience, target, flow))| RuleData {
                audience: Some(audiences[audience % audiences.len()].clone()),
                flow_id: target.is_none().then(|| flow_id(flow % 3)),
                experiment: target.as_ref().map(|(status, coverage, ns, variants)| {
                    experiment(i, *status, *coverage, *ns, variants)
                }),
                enabled: true,
            })
            .collect();
        let data = CatalogData {
            revision: 1,
            workspaces: vec![WorkspaceData {
                id: WorkspaceId(Uuid::from_u128(1)),
                name: "w".into(),
                apps: vec![AppData {
                    id: AppId(Uuid::from_u128(APP)),
                    name: "app".into(),
                    media_base_url: "https://cdn.example.com/m/".into(),
                    icon_base_url: "https://cdn.example.com/i/".into(),
                    cache_ttl_seconds: None,
                    apple_bundle_id: None,
                    apple_environments: Vec::new(),
                    saved_groups: [("beta".to_owned(), vec![json!("u2"), json!("u7")])]
                        .into_iter()
                        .collect(),
                    flows,
                    placements: vec![PlacementData {
                        key: "home".into(),
                        default_flow_id: default.map(|f| flow_id(f % 3)),
                        rules,
                    }],
                }],
            }],
            api_keys: Vec::new(),
        };
        Catalog::build(data).expect("the generated catalog is valid")
    }

    fn rule() -> impl Strategy<Value = RuleShape> {
        let variants = prop::collection::vec((1u8..4, prop::option::of(0usize..3)), 1..4);
        let experiment = prop::option::of((
            0u8..5,
            0u8..4,
            prop::option::of((0u8..11, 0u8..11)),
            variants,
        ));
        (0usize..20, experiment, 0usize..3)
    }

    fn body() -> impl Strategy<Value = Value> {
        let user = prop_oneof![
            Just("u1".to_owned()),
            Just("u2".to_owned()),
            Just("u7".to_owned()),
            "[a-z0-9]{1,12}",
        ];
        let country = prop::option::of(prop_oneof![
            Just(json!("US")),
            Just(json!("DE")),
            Just(json!("FR")),
            Just(json!(null)),
            Just(json!(7)),
        ]);
        let version = prop::option::of(prop_oneof![Just("2.3.0"), Just("1.9"), Just("2.1.0")]);
        let age = prop::option::of(prop_oneof![
            Just(json!(17)),
            Just(json!(40)),
            Just(json!("25"))
        ]);
        let extras = (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>());
        let platform = prop_oneof![Just("ios"), Just("android"), Just("web")];
        (
            user,
            "s-[0-9]{1,2}",
            platform,
            country,
            version,
            age,
            extras,
        )
            .prop_map(
                |(user, session, platform, country, version, age, (nested, spoof, tags, pro))| {
                    let mut attributes = serde_json::Map::new();
                    if let Some(c) = country {
                        attributes.insert("country".into(), c);
                    }
                    if let Some(v) = version {
                        // D4: the literal dotted key, or the nested path.
                        if nested {
                            attributes.insert("app".into(), json!({"version": v}));
                        } else {
                            attributes.insert("app.version".into(), json!(v));
                        }
                    }
                    if let Some(a) = age {
                        attributes.insert("age".into(), a);
                    }
                    if spoof {
                        // D3.6: the identity field wins over an attribute of the same name.
                        attributes.insert("user_id".into(), json!("u1"));
                    }
                    if tags {
                        attributes.insert("tags".into(), json!(["new", "vip"]));
                    }
                    attributes.insert(
                        "profile".into(),
                        json!({"plan": if pro { "pro" } else { "free" }}),
                    );
                    json!({
                        "user_id": user, "session_id": session, "device_platform": platform,
                        "attributes": attributes,
                    })
                },
            )
    }

    /// Resolve's bytes for `body`, as the single resolve handler renders them.
    fn resolved(catalog: &Catalog, body: &[u8]) -> Vec<u8> {
        let app = catalog.app(AppId(Uuid::from_u128(APP))).unwrap();
        let mut body = match Parsed::from_slice(body).unwrap() {
            Parsed::Object(body) => body,
            Parsed::NotObject => panic!("an object"),
        };
        let mut errors = Vec::new();
        let id = identity(&mut body, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        let request: ResolveRequest<'_> = id.request();
        let resolution = app.resolve("home", &request, ResolveMode::Normal);
        let mut out = BodyWriter::contiguous(512);
        write_result(&mut out, app, &resolution, 300, None, None);
        out.finish_joined().to_vec()
    }

    /// The output of a future that completes without waiting (explain without stored
    /// assignments awaits nothing).
    fn ready<F: std::future::Future>(future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match future.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(output) => output,
            std::task::Poll::Pending => panic!("explain waited without stored assignments"),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// D18: explain never differs from resolve.
        #[test]
        fn explain_answers_what_resolve_answers(
            rules in prop::collection::vec(rule(), 0..5),
            default in prop::option::of(0usize..3),
            bodies in prop::collection::vec(body(), 1..8),
        ) {
            let catalog = catalog(&rules, default);
            let app = Uuid::from_u128(APP).to_string();
            for body in bodies {
                let bytes = serde_json::to_vec(&body).unwrap();
                let explained = ready(explain(&catalog, &app, "home", &bytes, 300, None)).unwrap();
                let expected = resolved(&catalog, &bytes);
                prop_assert_eq!(
                    String::from_utf8_lossy(explained.result()),
                    String::from_utf8_lossy(&expected)
                );
                // The trace ends where the outcome was decided.
                let decided = explained.trace().iter().filter(|s| matches!(s, Step::Rule(r) if r.decided)).count();
                let defaulted = matches!(explained.trace().last(), Some(Step::Default { .. }));
                prop_assert_eq!(decided + usize::from(defaulted), 1, "{:?}", explained.trace());
            }
        }
    }
}
