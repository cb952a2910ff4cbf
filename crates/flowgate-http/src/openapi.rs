//! The OpenAPI 3.1 description of the public API, built from the code's own tables (problem
//! codes, recognized event types, limits), served at `/openapi.json` and committed as
//! `docs/openapi.json`; a test fails when the committed file differs from [`document`].

use std::sync::OnceLock;

use actix_web::http::header;
use actix_web::HttpResponse;
use flowgate_domain::events::{EventType, FieldKind, EVENT_FIELDS};
use flowgate_domain::placement::MAX_PLACEMENT_KEY_LEN;
use flowgate_domain::resolve::MAX_BATCH_KEYS;
use serde_json::{json, Map, Value};

use crate::config::{DEFAULT_EVENTS_BODY_LIMIT, MAX_EVENTS_PER_REQUEST, MAX_EVENT_ERRORS};
use crate::problem::PROBLEM_CODES;

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn problem_response(description: &str, extra_headers: &[&str]) -> Value {
    let mut headers = Map::new();
    headers.insert(
        "X-Request-Id".into(),
        json!({"$ref": "#/components/headers/X-Request-Id"}),
    );
    for h in extra_headers {
        headers.insert(
            (*h).into(),
            json!({"$ref": format!("#/components/headers/{h}")}),
        );
    }
    json!({
        "description": description,
        "headers": headers,
        "content": {"application/problem+json": {"schema": schema_ref("Problem")}}
    })
}

fn limited_headers() -> Map<String, Value> {
    let mut headers = Map::new();
    for h in [
        "X-Request-Id",
        "RateLimit-Limit",
        "RateLimit-Remaining",
        "RateLimit-Reset",
    ] {
        headers.insert(
            h.into(),
            json!({"$ref": format!("#/components/headers/{h}")}),
        );
    }
    headers
}

/// Responses every `/v1` route shares.
fn common_errors(responses: &mut Map<String, Value>) {
    responses.insert(
        "400".into(),
        json!({"$ref": "#/components/responses/BadRequest"}),
    );
    responses.insert(
        "401".into(),
        json!({"$ref": "#/components/responses/Unauthorized"}),
    );
    responses.insert(
        "403".into(),
        json!({"$ref": "#/components/responses/Forbidden"}),
    );
    responses.insert(
        "404".into(),
        json!({"$ref": "#/components/responses/NotFound"}),
    );
    responses.insert(
        "405".into(),
        json!({"$ref": "#/components/responses/MethodNotAllowed"}),
    );
    responses.insert(
        "408".into(),
        json!({"$ref": "#/components/responses/RequestTimeout"}),
    );
    responses.insert(
        "413".into(),
        json!({"$ref": "#/components/responses/PayloadTooLarge"}),
    );
    responses.insert(
        "415".into(),
        json!({"$ref": "#/components/responses/UnsupportedMediaType"}),
    );
    responses.insert(
        "429".into(),
        json!({"$ref": "#/components/responses/RateLimited"}),
    );
}

/// One POST operation; `ok` is the success status and its response.
fn operation(
    id: &str,
    summary: &str,
    description: &str,
    params: Vec<Value>,
    body: Value,
    ok: (&str, Value),
) -> Value {
    let mut responses = Map::new();
    responses.insert(ok.0.into(), ok.1);
    common_errors(&mut responses);
    let mut op = json!({
        "operationId": id,
        "summary": summary,
        "description": description,
        "security": [{"sdkKey": []}],
        "requestBody": {"required": true, "content": {"application/json": {"schema": body}}},
        "responses": responses,
    });
    if !params.is_empty() {
        op["parameters"] = Value::Array(params);
    }
    op
}

fn deprecated(mut op: Value) -> Value {
    op["deprecated"] = json!(true);
    op
}

fn path_param(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description, "schema": schema})
}

fn app_id_param() -> Value {
    path_param(
        "appId",
        "App UUID.",
        json!({"type": "string", "format": "uuid"}),
    )
}

fn placement_param() -> Value {
    path_param(
        "placementId",
        "Human-readable placement key (D2).",
        json!({"type": "string", "minLength": 1, "maxLength": MAX_PLACEMENT_KEY_LEN, "pattern": "^[A-Za-z0-9_.:-]+$"}),
    )
}

fn ok_json(description: &str, schema: Value, deprecated: bool) -> Value {
    let mut headers = limited_headers();
    if deprecated {
        headers.insert(
            "Deprecation".into(),
            json!({"$ref": "#/components/headers/Deprecation"}),
        );
        headers.insert("Link".into(), json!({"$ref": "#/components/headers/Link"}));
    }
    json!({"description": description, "headers": headers, "content": {"application/json": {"schema": schema}}})
}

/// How an events body may be encoded. `Content-Encoding` describes the body's bytes, so it is
/// documented with the body rather than as a header parameter a client could set on its own
/// (a plain body labelled gzip is a 400).
const EVENTS_BODY_ENCODING: &str = "The events as JSON, sent as is or gzip-compressed. A compressed body is sent with `Content-Encoding: gzip` and must then be one valid gzip stream (otherwise 400 `invalid_request`); the size limit applies to the decoded body. Without `Content-Encoding`, or with `identity`, the body is read as plain JSON. Any other content coding is a 415.";

fn paths() -> Value {
    let resolve_desc = "Resolves the published flow version for a placement and a user (D3). No match is also 200 with `flow_id: null`; a `resolve_no_flow` event is then recorded (D8). `?export=true` skips audiences and experiments and serves the placement's default flow (D3.5).";
    let export = json!({"name": "export", "in": "query", "required": false, "description": "`true` serves the default flow deterministically and records nothing; any value other than true or false is a 400.", "schema": {"type": "string", "enum": ["true", "false"]}});
    let events_desc = format!(
        "Accepts one event or an array of 1 to {MAX_EVENTS_PER_REQUEST} (at most {DEFAULT_EVENTS_BODY_LIMIT} bytes, decoded when `Content-Encoding: gzip`). Each event is validated (D7); valid ones are stored, idempotent on `event_id` within the app (the same id in another app is another event, D25). The 202 is sent once every accepted event is stored (committed, or acknowledged by the event bus; D15), unless the server runs with `events.ack = \"buffered\"`, which answers once they are queued. When the buffer is full, or the events are not stored within the server's acknowledgement timeout, the whole request gets 503 with `Retry-After`: send it again (events already stored are counted as accepted and not stored twice)."
    );
    let events_ok = ok_json(
        "Accepted for storage; invalid events are counted in `rejected`.",
        schema_ref("EventsAccepted"),
        false,
    );
    let mut events_op = operation(
        "sendEvents",
        "Send analytics events",
        &events_desc,
        vec![app_id_param()],
        schema_ref("EventBody"),
        ("202", events_ok),
    );
    events_op["requestBody"]["description"] = json!(EVENTS_BODY_ENCODING);
    events_op["responses"]["503"] = json!({"$ref": "#/components/responses/Overloaded"});
    let mut legacy_events = deprecated(operation(
        "sendEventsLegacy",
        "Send analytics events (deprecated)",
        "Deprecated: use `/v1/apps/{appId}/events`. Each event's `app_id` names its app; an event whose app is not in the key's workspace is rejected.",
        vec![],
        schema_ref("EventBody"),
        ("202", ok_json("Stored (D15).", schema_ref("EventsAccepted"), true)),
    ));
    legacy_events["requestBody"]["description"] = json!(EVENTS_BODY_ENCODING);
    legacy_events["responses"]["503"] = json!({"$ref": "#/components/responses/Overloaded"});
    let stored = ok_json(
        "Stored: `stored` is `true`, or `false` for a notification stored before (a retry). Answered only once stored (D15).",
        json!({"type": "object", "required": ["stored"], "properties": {"stored": {"type": "boolean"}}}),
        false,
    );
    let mut apple_op = operation(
        "storeApple",
        "Receive an App Store Server Notification V2",
        "App Store Connect's notification URL for this app (D30). The `signedPayload` (and its `signedTransactionInfo` and `signedRenewalInfo`) must be signed by a certificate chain to a trusted root (`stores.apple_root_certificates`; Apple Root CA - G3 by default) with Apple's marker extensions, for the app's `apple_bundle_id` and one of its `apple_environments`. Stored once per `notificationUUID`. 404 `app_not_found` for an app not in the catalog; 409 `store_not_configured` for an app without `apple_bundle_id`; 401 `invalid_signature` for a signature that does not verify; 400 `store_mismatch` for another bundle or environment, `invalid_notification` for a body or field that cannot be read (a `signedPayload` that is not a compact JWS, quoted). Nothing refused is stored.",
        vec![app_id_param()],
        json!({"type": "object", "required": ["signedPayload"], "properties": {"signedPayload": {
            "type": "string", "minLength": 1, "pattern": crate::handlers::store::JWS_PATTERN,
            "description": "Apple's signed notification: a non-empty JWS in compact form, three base64url parts (header, payload, signature) joined by dots. Another shape is 400 `invalid_notification`; a JWS whose signature does not verify is 401 `invalid_signature`."}}}),
        ("200", stored.clone()),
    );
    apple_op["security"] = json!([]);
    apple_op["responses"]["409"] = problem_response(
        "The app is in the catalog but not set up for the App Store: it has no `apple_bundle_id` (`store_not_configured`). Set it in the catalog; Apple retries the notification.",
        &[],
    );
    apple_op["responses"]["503"] = json!({"$ref": "#/components/responses/Overloaded"});
    let mut revenuecat_op = operation(
        "storeRevenueCat",
        "Receive a RevenueCat webhook",
        "RevenueCat's webhook URL for this app (D30), with a webhook key of the app's workspace (`flowgate keys create --type webhook`) as the Authorization header's value, with or without `Bearer`. Stored once per `event.id`. The key is checked first, then the app: 404 `app_not_found` for an app not in the catalog, 403 `forbidden_app` for another workspace's. 400 `invalid_notification` for a body or field that cannot be read (with its JSON pointer, the value quoted); nothing refused is stored.",
        vec![app_id_param()],
        json!({"type": "object", "required": ["event"], "properties": {"api_version": {"type": "string"}, "event": {
            "type": "object", "required": ["id", "type"],
            "description": "RevenueCat's event. With a `transaction_id`, `purchased_at_ms` is required (milliseconds since the epoch, years 0 to 9999); `price` and `price_in_purchased_currency` are 0 to 1,000,000, or -1,000,000 to 1,000,000 on a refund (`CANCELLATION` with `cancel_reason` `CUSTOMER_SUPPORT`).",
            "properties": {
                "id": {"type": "string", "minLength": 1, "maxLength": 256},
                "type": {"type": "string", "minLength": 1, "maxLength": 256}}}}}),
        ("200", stored),
    );
    revenuecat_op["responses"]["503"] = json!({"$ref": "#/components/responses/Overloaded"});
    let mut paths = json!({
        "/v1/apps/{appId}/store/apple": {"post": apple_op},
        "/v1/apps/{appId}/store/revenuecat": {"post": revenuecat_op},
        "/v1/apps/{appId}/placements/{placementId}/resolve": {"post": operation(
            "resolve", "Resolve a placement", resolve_desc,
            vec![app_id_param(), placement_param(), export.clone()],
            schema_ref("ResolveRequest"), ("200", ok_json("The resolve result.", schema_ref("ResolveResult"), false)))},
        "/v1/apps/{appId}/placements/resolve-batch": {"post": operation(
            "resolveBatch", "Resolve up to 50 placements",
            "Resolves each distinct placement key (duplicates removed, at most 50 after de-duplication, D6). A placement that fails to resolve gets an `error` entry; the status stays 200. Entries may come in any order: correlate by `placement_key`.",
            vec![app_id_param()], schema_ref("BatchRequest"), ("200", ok_json("One entry per distinct key.", schema_ref("BatchResponse"), false)))},
        "/v1/apps/{appId}/events": {"post": events_op},
        "/v1/placements/{placementId}/resolve": {"post": deprecated(operation(
            "resolveLegacy", "Resolve a placement (deprecated)",
            "Deprecated: use `/v1/apps/{appId}/placements/{placementId}/resolve`. The app is the body's `app_id`. For older SDKs the server also accepts a body without `app_id` (or with `app_id: null`) when the key's workspace has exactly one app, and resolves on that app; when the workspace has several apps (or none) such a body is a 400 `validation_failed`.",
            vec![placement_param(), export],
            schema_ref("LegacyResolveRequest"), ("200", ok_json("The resolve result.", schema_ref("ResolveResult"), true))))},
        "/v1/events": {"post": legacy_events},
        "/openapi.json": {"get": {
            "operationId": "openapi", "summary": "This document", "security": [],
            "responses": {"200": {"description": "The OpenAPI document.", "content": {"application/json": {"schema": {"type": "object"}}}}}
        }}
    });
    if let Some(paths) = paths.as_object_mut() {
        paths.extend(ofrep_paths());
    }
    paths
}

/// OFREP's answer to a request it refuses (400, 404): its own body, not a problem.
fn ofrep_failure(description: &str) -> Value {
    json!({"description": description, "headers": limited_headers(),
        "content": {"application/json": {"schema": schema_ref("OfrepFailure")}}})
}

/// OpenFeature's remote evaluation protocol under the app (D32).
fn ofrep_paths() -> Map<String, Value> {
    let flag = path_param(
        "key",
        "The flag: a placement key (D2).",
        json!({"type": "string", "minLength": 1}),
    );
    let mut single = operation(
        "ofrepEvaluateFlag",
        "Evaluate a placement as an OpenFeature flag (OFREP)",
        "The placement's single-resolve result as an object flag (D32): `value` is exactly what resolve answers for the context's identity (`targetingKey` the `user_id`; `session_id` and `device_platform` as in resolve; every other member an attribute); `reason` `SPLIT` in an experiment, `TARGETING_MATCH` by a rule's audience, `DEFAULT` otherwise; `variant` the variant id, else the flow version id. Records what a single resolve records.",
        vec![app_id_param(), flag],
        schema_ref("OfrepRequest"),
        ("200", ok_json("The evaluation.", schema_ref("OfrepEvaluation"), false)),
    );
    single["responses"]["400"] = ofrep_failure(
        "`TARGETING_KEY_MISSING`, `INVALID_CONTEXT` (naming the member) or `PARSE_ERROR`.",
    );
    single["responses"]["404"] = ofrep_failure("`FLAG_NOT_FOUND`: the app has no such placement.");
    let mut bulk_ok = ok_json(
        "Every placement of the app.",
        json!({"type": "object", "required": ["flags"], "properties": {"flags": {"type": "array", "items": schema_ref("OfrepEvaluation")}}}),
        false,
    );
    bulk_ok["headers"]["ETag"] = json!({"description": "A strong tag of the catalog revision and the context.", "schema": {"type": "string"}});
    let mut bulk = operation(
        "ofrepEvaluateFlags",
        "Evaluate every placement of the app (OFREP bulk)",
        "Every placement of the app for the context, as batch resolve (D32). `If-None-Match` with the `ETag` of an earlier answer for the same context and catalog is answered 304 with no body.",
        vec![app_id_param()],
        schema_ref("OfrepRequest"),
        ("200", bulk_ok),
    );
    bulk["responses"]["304"] =
        json!({"description": "Not modified: the catalog and the context are those of the tag."});
    bulk["responses"]["400"] = ofrep_failure(
        "`TARGETING_KEY_MISSING`, `INVALID_CONTEXT` or `PARSE_ERROR` (without `key`).",
    );
    let mut configuration = operation(
        "ofrepConfiguration",
        "OFREP provider configuration",
        "Polling no faster than the catalog is refreshed, and object flags (D32).",
        vec![app_id_param()],
        json!({}),
        (
            "200",
            ok_json(
                "The configuration.",
                json!({"type": "object", "properties": {"name": {"type": "string"}, "capabilities": {"type": "object"}}}),
                false,
            ),
        ),
    );
    if let Some(op) = configuration.as_object_mut() {
        op.remove("requestBody");
    }
    let mut out = Map::new();
    out.insert(
        "/v1/apps/{appId}/ofrep/v1/evaluate/flags/{key}".into(),
        json!({"post": single}),
    );
    out.insert(
        "/v1/apps/{appId}/ofrep/v1/evaluate/flags".into(),
        json!({"post": bulk}),
    );
    out.insert(
        "/v1/apps/{appId}/ofrep/v1/configuration".into(),
        json!({"get": configuration}),
    );
    out
}

/// A string without the NUL character, which the store cannot hold: resolve refuses it in the
/// identity (its `resolve_no_flow` event would carry it).
const NO_NUL: &str = r"^[^\u0000]*$";

fn identity_properties() -> Map<String, Value> {
    let mut p = Map::new();
    p.insert("user_id".into(), json!({"type": "string", "minLength": 1, "maxLength": 256, "pattern": NO_NUL, "description": "Stable user identifier; no NUL character (U+0000)."}));
    p.insert(
        "session_id".into(),
        json!({"type": "string", "minLength": 1, "maxLength": 256, "pattern": NO_NUL, "description": "No NUL character (U+0000)."}),
    );
    p.insert(
        "device_platform".into(),
        json!({"type": "string", "enum": ["ios", "android", "web"]}),
    );
    p.insert(
        "attributes".into(),
        json!({"type": ["object", "null"], "description": "Targeting attributes for audience conditions (D4). Keys such as `country` and `app.version` are looked up literally first, then as nested paths. `user_id`, `session_id` and `device_platform` are visible to conditions too and win over attributes of the same name."}),
    );
    p
}

fn result_properties() -> Map<String, Value> {
    let mut p = Map::new();
    p.insert("flow_id".into(), json!({"type": ["string", "null"], "format": "uuid", "description": "`null` when no flow matched."}));
    p.insert(
        "flow_version_id".into(),
        json!({"type": "string", "format": "uuid"}),
    );
    p.insert(
        "flow_version".into(),
        json!({"type": "integer", "minimum": 1}),
    );
    p.insert(
        "schema_version".into(),
        json!({"type": "integer", "minimum": 1}),
    );
    p.insert(
        "flow_schema".into(),
        json!({"type": "object", "description": "The flow definition, exactly as published."}),
    );
    p.insert("media_base_url".into(), json!({"type": "string"}));
    p.insert("icon_base_url".into(), json!({"type": "string"}));
    p.insert(
        "fonts".into(),
        json!({"type": "array", "items": schema_ref("Font")}),
    );
    p.insert("cache_ttl_seconds".into(), json!({"type": "integer", "minimum": 0, "description": "Freshness period; always present (D3.9)."}));
    p.insert("renderer_mode".into(), json!({"type": "string", "const": "web", "description": "Renderer compatibility field for SDK 1.x; omitted when no flow matched."}));
    p.insert("experiment_id".into(), json!({"type": "string", "format": "uuid", "description": "Set only when an experiment decided (also for a holdout)."}));
    p.insert(
        "variant_id".into(),
        json!({"type": "string", "format": "uuid"}),
    );
    p.insert("variant_name".into(), json!({"type": "string"}));
    p
}

/// `EventInput`, from the domain's table of event members (D7).
fn event_input() -> Value {
    let types: Vec<&str> = EventType::SDK_TYPES.iter().map(|t| t.as_str()).collect();
    let mut properties = Map::new();
    for field in EVENT_FIELDS {
        let optional = !field.is_required();
        let ty = |name: &str| {
            if optional {
                json!([name, "null"])
            } else {
                json!(name)
            }
        };
        let mut schema = match field.kind() {
            FieldKind::Uuid => json!({"type": ty("string"), "format": "uuid"}),
            FieldKind::Text { min, max } => {
                let mut text = json!({"type": ty("string"), "maxLength": max});
                if min > 0 {
                    text["minLength"] = json!(min);
                }
                text
            }
            FieldKind::OneOf(values) => {
                let mut values: Vec<Value> = values.iter().map(|v| json!(v)).collect();
                if optional {
                    values.push(Value::Null);
                }
                json!({"type": ty("string"), "enum": values})
            }
            FieldKind::EventType => json!({"type": ty("string"), "enum": types}),
            FieldKind::Timestamp => json!({"type": ty("string"), "format": "date-time"}),
            FieldKind::Integer { min } => json!({"type": ty("integer"), "minimum": min}),
            FieldKind::Number { min, max } => {
                json!({"type": ty("number"), "minimum": min, "maximum": max})
            }
            FieldKind::Currency => json!({"type": ty("string"), "pattern": "^[A-Z]{3}$"}),
            FieldKind::Object { .. } => json!({"type": ty("object")}),
        };
        if !field.description().is_empty() {
            schema["description"] = json!(field.description());
        }
        properties.insert(field.name().to_owned(), schema);
    }
    let required: Vec<&str> = EVENT_FIELDS
        .iter()
        .filter(|f| f.is_required())
        .map(|f| f.name())
        .collect();
    json!({
        "type": "object",
        "description": "One analytics event (D7). Unknown members are ignored; optional members sent as null count as absent.",
        "required": required,
        "properties": properties
    })
}

fn components() -> Value {
    let codes: Vec<&str> = PROBLEM_CODES.iter().map(|(c, _, _)| *c).collect();
    let mut resolve_request = json!({"type": "object", "required": ["user_id", "session_id", "device_platform"], "properties": identity_properties()});
    let mut legacy = resolve_request.clone();
    legacy["required"] = json!(["app_id", "user_id", "session_id", "device_platform"]);
    legacy["properties"]["app_id"] = json!({"type": "string", "format": "uuid", "description": "The app, one of the key's workspace. Required: the server resolves a body without it only when the workspace has exactly one app (see the operation), and answers 400 `validation_failed` otherwise."});
    let mut batch = json!({"type": "object", "required": ["placement_keys", "user_id", "session_id", "device_platform"], "properties": identity_properties()});
    batch["properties"]["placement_keys"] = json!({
        "type": "array", "minItems": 1,
        "description": format!("Duplicates are removed; at most {MAX_BATCH_KEYS} distinct keys."),
        "items": {"type": "string", "minLength": 1, "maxLength": MAX_PLACEMENT_KEY_LEN, "pattern": "^[A-Za-z0-9_.:-]+$"}
    });
    let mut entry = json!({"type": "object", "required": ["placement_key", "flow_id", "cache_ttl_seconds"], "properties": result_properties()});
    entry["properties"]["placement_key"] = json!({"type": "string"});
    entry["properties"]["error"] = json!({"type": "string", "description": "Present only when the placement failed to resolve (e.g. `flow_unpublished`); then `flow_id` is null."});
    resolve_request["additionalProperties"] = json!(true);
    let header =
        |description: &str, schema: Value| json!({"description": description, "schema": schema});
    json!({
        "securitySchemes": {"sdkKey": {"type": "http", "scheme": "bearer", "description": "An SDK key `fg_live_…` (production) or `fg_test_…` (staging, development), D1."}},
        "headers": {
            "X-Request-Id": header("Echoes a valid incoming id, else a new UUIDv7.", json!({"type": "string"})),
            "RateLimit-Limit": header("Burst size of the limit closest to refusing (D10).", json!({"type": "integer"})),
            "RateLimit-Remaining": header("Requests left now.", json!({"type": "integer"})),
            "RateLimit-Reset": header("Seconds until the limit is fully replenished.", json!({"type": "integer"})),
            "Retry-After": header("Seconds to wait before retrying.", json!({"type": "integer"})),
            "Deprecation": header("`true` on deprecated routes.", json!({"type": "string"})),
            "Link": header("The successor route, `rel=\"successor-version\"`.", json!({"type": "string"}))
        },
        "responses": {
            "BadRequest": problem_response("Invalid path parameter, query or body (`invalid_request`, `validation_failed`, `too_many_events`, `too_many_placements`).", &["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"]),
            "Unauthorized": problem_response("Missing, invalid or revoked key; a key of another type or environment; more than one `Authorization` header (`invalid_api_key`).", &["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"]),
            "Forbidden": problem_response("The app belongs to another workspace.", &["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"]),
            "NotFound": problem_response("No such app (`app_not_found`) or route (`not_found`).", &[]),
            "MethodNotAllowed": problem_response("Only POST is allowed.", &[]),
            "RequestTimeout": problem_response("The body did not arrive within the server's `server.body_timeout_ms`, or arrived slower than `server.body_min_bytes_per_sec` after its first second (`request_timeout`, D25). The connection is closed.", &[]),
            "PayloadTooLarge": problem_response("The body exceeds the limit.", &[]),
            "UnsupportedMediaType": problem_response("The body is not application/json, or its encoding is not accepted.", &[]),
            "RateLimited": problem_response("Rate limited (D10).", &["Retry-After", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"]),
            "Overloaded": problem_response("The event buffer is full, or the events were not stored in time: nothing of the request counts as accepted (D7, D15). Send it again after `Retry-After`; events already stored are not stored twice.", &["Retry-After"])
        },
        "schemas": {
            "ResolveRequest": resolve_request,
            "LegacyResolveRequest": legacy,
            "BatchRequest": batch,
            "ResolveResult": {"type": "object", "required": ["flow_id", "cache_ttl_seconds"], "properties": result_properties()},
            "BatchEntry": entry,
            "OfrepRequest": {"type": "object", "properties": {"context": {"type": "object", "description": "`targetingKey` (the user id, required), `session_id` and `device_platform` (as in resolve), and attributes.", "additionalProperties": true}}},
            "OfrepEvaluation": {"type": "object", "required": ["key", "value", "reason"], "properties": {
                "key": {"type": "string"}, "value": schema_ref("ResolveResult"),
                "reason": {"type": "string", "enum": ["SPLIT", "TARGETING_MATCH", "DEFAULT"]},
                "variant": {"type": "string"},
                "metadata": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}}},
            "OfrepFailure": {"type": "object", "required": ["errorCode"], "properties": {
                "key": {"type": "string"},
                "errorCode": {"type": "string", "enum": ["FLAG_NOT_FOUND", "TARGETING_KEY_MISSING", "INVALID_CONTEXT", "PARSE_ERROR"]},
                "errorDetails": {"type": "string"}}},
            "BatchResponse": {"type": "object", "required": ["results"], "properties": {"results": {"type": "array", "items": schema_ref("BatchEntry")}}},
            "Font": {"type": "object", "required": ["family", "weight", "style", "url"], "properties": {
                "family": {"type": "string"}, "weight": {"type": "integer", "minimum": 100, "maximum": 900},
                "style": {"type": "string", "enum": ["normal", "italic"]}, "url": {"type": "string"}}},
            "EventInput": event_input(),
            "EventBody": {"oneOf": [
                schema_ref("EventInput"),
                {"type": "array", "minItems": 1, "maxItems": MAX_EVENTS_PER_REQUEST, "items": schema_ref("EventInput")}
            ], "description": "One EventInput or an array of them. Each event is validated on its own (D7): an event that breaks EventInput's rules does not refuse the request, it is counted in the 202's `rejected` with its error, and the valid ones are stored. Only a body that is neither an object nor an array, an empty array, or more than 100 events is refused (400)."},
            "EventsAccepted": {"type": "object", "required": ["accepted", "rejected"], "properties": {
                "accepted": {"type": "integer", "minimum": 0},
                "rejected": {"type": "integer", "minimum": 0},
                "errors": {"type": "array", "maxItems": MAX_EVENT_ERRORS, "items": schema_ref("EventError"), "description": "Present when `rejected > 0`."}}},
            "EventError": {"type": "object", "required": ["index", "code", "message"], "properties": {
                "index": {"type": "integer", "minimum": 0}, "event_id": {"type": "string"},
                "code": {"type": "string", "enum": flowgate_domain::events::EventErrorCode::ALL.iter().map(|c| c.as_str()).collect::<Vec<_>>()},
                "message": {"type": "string"}}},
            "Problem": {"type": "object", "required": ["type", "title", "status", "detail", "code", "request_id"], "properties": {
                "type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"},
                "detail": {"type": "string"}, "code": {"type": "string", "enum": codes}, "request_id": {"type": "string"},
                "errors": {"type": "array", "items": {"type": "object", "required": ["field", "message"], "properties": {"field": {"type": "string"}, "message": {"type": "string"}}}}}}
        }
    })
}

/// The OpenAPI document.
pub fn document() -> Value {
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "flowgate",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Resolves which onboarding or paywall flow an app shows and ingests analytics events. Every non-2xx response is RFC 9457 problem+json with a stable `code` (D9). Responses of 1 KiB or more are compressed (gzip, br, zstd) when asked; every response carries `X-Request-Id`."
        },
        "servers": [{"url": "/", "description": "Paths include the /v1 prefix."}],
        "paths": paths(),
        "components": components()
    })
}

/// The document as served and committed: pretty-printed, with a trailing newline.
pub fn document_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let mut s = serde_json::to_string_pretty(&document()).unwrap_or_default();
        s.push('\n');
        s
    })
}

/// `GET /openapi.json`
pub async fn serve() -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "application/json"))
        .body(document_text())
}
