//! Flows and versions for the response modules' tests.

use std::io::Read as _;
use std::sync::Arc;

use flowgate_domain::catalog::{Catalog, CatalogData, PublishedVersion};
use flowgate_domain::ids::{AppId, FlowId};

use super::gzip::{stored_blocks, DeflatedFlow};

pub(crate) fn version(schema: &str) -> Arc<PublishedVersion> {
    version_with_id(schema, 0)
}

/// The published version `id` of a one-flow catalog whose flow is `schema`, as
/// `Catalog::build` makes it (the only way to make one).
pub(crate) fn version_with_id(schema: &str, id: u128) -> Arc<PublishedVersion> {
    // Ids unique across the catalog, whatever `id` is.
    let workspace = uuid::Uuid::from_u128(u128::MAX - 2);
    let app = AppId(uuid::Uuid::from_u128(u128::MAX - 1));
    let flow = FlowId(uuid::Uuid::from_u128(u128::MAX));
    let text = format!(
        r#"{{"workspaces": [{{"id": "{workspace}", "name": "w", "apps": [{{"id": "{app}", "name": "a",
            "media_base_url": "https://media.example", "icon_base_url": "https://icons.example",
            "flows": [{{"id": "{flow}", "name": "f", "published_version": 1, "versions": [
                {{"id": "{version}", "version": 1, "schema_version": 1, "flow_schema": {schema}}}]}}]}}]}}]}}"#,
        version = uuid::Uuid::from_u128(id),
    );
    let data: CatalogData = serde_json::from_str(&text).expect("a catalog of one flow");
    let catalog = Catalog::build(data).expect("the catalog builds");
    let published = catalog.app(app).and_then(|a| a.flow(flow)?.published());
    Arc::clone(published.expect("the flow is published"))
}

pub(crate) fn inflate(deflated: &DeflatedFlow) -> String {
    let mut stream = deflated.data.to_vec();
    stored_blocks(&mut stream, &[], true);
    let mut text = String::new();
    flate2::read::DeflateDecoder::new(stream.as_slice())
        .read_to_string(&mut text)
        .unwrap();
    text
}

/// `len` characters that compress to about three quarters (a copy of a flow must cost
/// visibly less than compressing it again).
pub(crate) fn noise(seed: &str, len: usize) -> String {
    const ALPHABET: &[u8; 64] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
    let mut state = seed
        .bytes()
        .fold(0x9e37_79b9_u32, |h, b| h.rotate_left(5) ^ u32::from(b));
    (0..len)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            char::from(ALPHABET[(state >> 26) as usize])
        })
        .collect()
}

/// A flow of about 2.4 KB.
pub(crate) fn large_schema(tag: &str) -> String {
    format!(r#"{{"tag":"{tag}","text":"{}"}}"#, noise(tag, 2400))
}
