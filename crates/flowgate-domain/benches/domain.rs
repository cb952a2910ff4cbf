//! Criterion benchmarks of the domain's hot path (docs/benchmarks.md): one resolve of a realistic
//! placement, condition evaluations (saved groups of 200 and 20,000 members among them), one
//! bucketing. Run with `make bench-domain`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use flowgate_domain::bucketing::{bucket_ranges, choose_variation, hash_v2};
use flowgate_domain::conditions::{Condition, SavedGroups};
use flowgate_domain::ids::AppId;
use flowgate_domain::{Platform, ResolveMode, ResolveRequest};
use serde_json::json;

use flowgate_contract_tests::fixtures::catalogs as fixtures;

fn resolve(c: &mut Criterion) {
    let doc = fixtures::realistic_catalog_json();
    let catalog = fixtures::build(&doc);
    let app = catalog
        .app(fixtures::APP1.parse::<AppId>().unwrap())
        .unwrap();
    let attrs = fixtures::realistic_attributes();
    let rule_count = app
        .placement("onboarding")
        .map(|p| p.rules().len())
        .unwrap_or(0);
    assert_eq!(rule_count, 11, "10 audience rules and the experiment");
    let users: Vec<String> = (0..1024).map(|i| format!("user-{i:05}")).collect();
    // Sanity: the typical request walks every rule and reaches the experiment.
    let probe = app.resolve(
        "onboarding",
        &ResolveRequest::new(&users[0], "s", Platform::Ios, &attrs),
        ResolveMode::Normal,
    );
    let size = probe
        .version()
        .map(|v| v.flow_schema().get().len())
        .unwrap_or(0);
    let assigned = users
        .iter()
        .filter(|u| {
            let req = ResolveRequest::new(u, "s", Platform::Ios, &attrs);
            app.resolve("onboarding", &req, ResolveMode::Normal)
                .assignment()
                .is_some()
        })
        .count();
    // Coverage is 0.9: about 90% reach a variant after all 10 audiences failed.
    assert!(
        (850..=990).contains(&assigned),
        "{assigned} of 1024 assigned"
    );
    eprintln!(
        "realistic placement: flow_schema {size} bytes, {assigned}/1024 users assigned a variant"
    );

    let mut i = 0usize;
    c.bench_function("resolve/realistic_placement", |b| {
        b.iter(|| {
            i = (i + 1) & 1023;
            let request = ResolveRequest::new(&users[i], "session-1", Platform::Ios, &attrs);
            let r = app.resolve(black_box("onboarding"), &request, ResolveMode::Normal);
            black_box(r.version().map(|v| v.id()));
        })
    });
    c.bench_function("resolve/export", |b| {
        b.iter(|| {
            let request = ResolveRequest::new("u", "s", Platform::Ios, &attrs);
            black_box(
                app.resolve(black_box("onboarding"), &request, ResolveMode::Export)
                    .version()
                    .map(|v| v.id()),
            );
        })
    });
}

fn condition(c: &mut Criterion) {
    let cond = Condition::compile(
        &json!({"country": {"$in": ["US", "CA"]}, "app.version": {"$vgte": "2.1.0"}}),
    )
    .unwrap();
    let attrs = fixtures::realistic_attributes();
    let groups = SavedGroups::empty();
    assert!(cond.eval(&attrs, &groups));
    c.bench_function("condition/in_and_version", |b| {
        b.iter(|| black_box(cond.eval(black_box(&attrs), &groups)))
    });
    let regex =
        Condition::compile(&json!({"email": {"$regexi": "@example\\.(org|com)$"}})).unwrap();
    c.bench_function("condition/regexi", |b| {
        b.iter(|| black_box(regex.eval(black_box(&attrs), &groups)))
    });
    // Saved groups of user ids: 200 members (the typical placement's vip group) and 20,000.
    // 4,096 users drawn pseudo-randomly from twice the group's ids, so about half are members
    // and neither the branch predictor nor the caches learn one path.
    let in_group = Condition::compile(&json!({"user_id": {"$inGroup": "vip"}})).unwrap();
    for members in [200_u64, 20_000] {
        let groups = SavedGroups::new([(
            "vip".to_owned(),
            (0..members).map(|i| json!(format!("user-{i}"))).collect(),
        )]);
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let users: Vec<_> = (0..4096)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                json!({"user_id": format!("user-{}", state % (2 * members))})
            })
            .collect();
        let mut next = 0;
        c.bench_function(&format!("condition/in_group_{members}"), |b| {
            b.iter(|| {
                next = (next + 1) & (users.len() - 1);
                black_box(in_group.eval(black_box(&users[next]), &groups))
            })
        });
    }
}

fn bucketing(c: &mut Criterion) {
    let ranges = bucket_ranges(3, 0.9, Some(&[0.5, 0.25, 0.25]));
    c.bench_function("bucketing/hash_and_choose", |b| {
        b.iter(|| {
            black_box(choose_variation(
                hash_v2(
                    black_box("72000000-0000-4000-8000-000000000001"),
                    black_box("user-00042"),
                ),
                &ranges,
            ))
        })
    });
}

criterion_group!(benches, resolve, condition, bucketing);
criterion_main!(benches);
