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
