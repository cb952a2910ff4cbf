//! Sticky assignment (D23) through the domain's resolve, explain, catalog build and diff: the
//! fixture's running paywall experiment made sticky, its stored assignments handed in as
//! documents, the writes resolve asks for applied to them as an adapter would.

use flowgate_domain::catalog::{diff_catalogs, App};
use flowgate_domain::explain::{Step, StickyAssignment};
use flowgate_domain::ids::AppId;
use flowgate_domain::resolve::StickyState;
use flowgate_domain::sticky::{StickyDoc, StickyDocs};
use flowgate_domain::{Catalog, Platform, ResolveMode, ResolveRequest};
use serde_json::{json, Map, Value};

use crate::fixtures::*;

/// The fixture with the paywall experiment sticky, weighted `control`/`new`, changed by `edit`.
fn sticky_catalog(control: f64, new: f64, edit: impl FnOnce(&mut Value)) -> Value {
    let mut doc = catalog_json();
    let e = &mut doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["experiment"];
    e["sticky"] = json!(true);
    e["fallback_attribute"] = json!("device_id");
    e["variants"][0]["weight"] = json!(control);
    e["variants"][1]["weight"] = json!(new);
    edit(e);
    doc
}

fn app(c: &Catalog) -> &App {
    c.app(APP1.parse::<AppId>().unwrap()).unwrap()
}

/// The store an adapter keeps: documents merged with every write.
#[derive(Default)]
struct Store(StickyDocs);

impl Store {
    fn apply(&mut self, state: &StickyState, app: AppId) {
        for write in state.writes(app) {
            let d = write.doc;
            self.0
                .assignments_mut(&d.attribute_name, &d.attribute_value)
                .extend(d.assignments);
        }
    }

    /// Resolves the paywall for `user` with what is stored (only the documents resolve asks
    /// for), stores its writes, and returns the variant's name (`None`: not in it).
    fn resolve(
        &mut self,
        c: &Catalog,
        user: &str,
        attributes: &Map<String, Value>,
    ) -> Option<String> {
        let a = app(c);
        let request = ResolveRequest::new(user, "s", Platform::Ios, attributes);
        let ids = a.sticky_ids(["paywall"], &request);
        let read = ids
            .iter()
            .filter_map(|id| self.0.get(&id.attribute_name, &id.attribute_value).cloned())
            .collect();
        let mut state = StickyState::new(read);
        let r = a.resolve_sticky("paywall", &request, ResolveMode::Normal, &mut state);
        self.apply(&state, a.id());
        r.assignment().map(|x| x.variant.name().to_owned())
    }
}

fn no_attributes() -> &'static Map<String, Value> {
    static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
    &EMPTY
}

fn users() -> impl Iterator<Item = String> {
    (0..2_000).map(|i| format!("user-{i}"))
}

#[test]
fn a_reweight_keeps_every_assigned_user_and_new_users_follow_the_new_weights() {
    let before = build(&sticky_catalog(1.0, 1.0, |_| {}));
    let after = build(&sticky_catalog(9.0, 1.0, |_| {}));
    let mut store = Store::default();
    let first: Vec<_> = users()
        .map(|u| store.resolve(&before, &u, no_attributes()))
        .collect();
    assert!(
        first.iter().all(Option::is_some),
        "coverage 1: everyone is in"
    );
    let again: Vec<_> = users()
        .map(|u| store.resolve(&after, &u, no_attributes()))
        .collect();
    assert_eq!(first, again, "nobody with a stored assignment moves");
    // Without stored assignments the same reweight moves users (the test can fail).
    let moved = users()
        .zip(&first)
        .filter(|(u, v)| {
            app(&after)
                .resolve(
                    "paywall",
                    &ResolveRequest::new(u, "s", Platform::Ios, no_attributes()),
                    ResolveMode::Normal,
                )
                .assignment()
                .map(|a| a.variant.name().to_owned())
                != **v
        })
        .count();
    assert!(
        moved > 500,
        "a 50/50 -> 90/10 reweight moves about 40% ({moved})"
    );
    // New users: 90/10.
    let control = (0..2_000)
        .filter(|i| {
            store
                .resolve(&after, &format!("new-{i}"), no_attributes())
                .as_deref()
                == Some("control")
        })
        .count();
    assert!(
        (1_700..1_900).contains(&control),
        "about 90% control: {control}"
    );
}

#[test]
fn raising_the_bucket_version_buckets_everyone_again_and_keeps_old_assignments() {
    let before = build(&sticky_catalog(1.0, 1.0, |_| {}));
    let reweighted = build(&sticky_catalog(9.0, 1.0, |_| {}));
    let bumped = build(&sticky_catalog(9.0, 1.0, |e| {
        e["bucket_version"] = json!(1)
    }));
    let mut store = Store::default();
    for u in users() {
        store.resolve(&before, &u, no_attributes());
    }
    let mut control = 0;
    for u in users() {
        let fresh = app(&reweighted)
            .resolve(
                "paywall",
                &ResolveRequest::new(&u, "s", Platform::Ios, no_attributes()),
                ResolveMode::Normal,
            )
            .assignment()
            .map(|a| a.variant.name().to_owned());
        let got = store.resolve(&bumped, &u, no_attributes());
        assert_eq!(got, fresh, "{u}: bucketed by the new weights");
        control += usize::from(got.as_deref() == Some("control"));
    }
    assert!(control > 1_700, "90/10 for everyone: {control}");
    let doc = &store.0.get("user_id", "user-1").expect("the document");
    assert_eq!(doc.assignments.len(), 2, "both versions kept: {doc:?}");
    assert!(doc.assignments.contains_key(&format!("{EXP}__0")));
    assert!(doc.assignments.contains_key(&format!("{EXP}__1")));
}

#[test]
fn min_bucket_version_excludes_users_assigned_before_it() {
    let v0 = build(&sticky_catalog(1.0, 1.0, |_| {}));
    let v1 = build(&sticky_catalog(1.0, 1.0, |e| {
        e["bucket_version"] = json!(1);
        e["min_bucket_version"] = json!(1);
    }));
    let mut store = Store::default();
    assert!(store.resolve(&v0, "old-user", no_attributes()).is_some());
    assert_eq!(
        store.resolve(&v1, "old-user", no_attributes()),
        None,
        "excluded"
    );
    assert_eq!(
        store
            .0
            .get("user_id", "old-user")
            .expect("the document")
            .assignments
            .len(),
        1,
        "nothing recorded"
    );
    assert!(
        store.resolve(&v1, "new-user", no_attributes()).is_some(),
        "new users enter"
    );
    // The excluded user falls through to the rules after (here: no default, no flow).
    let request = ResolveRequest::new("old-user", "s", Platform::Ios, no_attributes());
    let explained =
        app(&v1).explain_sticky("paywall", &request, &StickyState::new(store.0.clone()));
    assert!(explained.trace.iter().any(|s| matches!(s, Step::Rule(r)
        if r.experiment.as_ref().and_then(|e| e.sticky.as_ref())
            .is_some_and(|s| s.assignment == StickyAssignment::Excluded))));
}

#[test]
fn a_stored_assignment_applies_whatever_the_audience_and_coverage_now_say() {
    let open = build(&sticky_catalog(1.0, 1.0, |_| {}));
    let closed = build(&sticky_catalog(1.0, 1.0, |_| {}).pipe(|mut doc| {
        let rule = &mut doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][1];
        rule["audience"] = json!({"country": "NZ"});
        rule["experiment"]["coverage"] = json!(0.0);
        doc
    }));
    let mut store = Store::default();
    let first = store.resolve(&open, "u1", no_attributes());
    assert!(first.is_some());
    assert_eq!(store.resolve(&closed, "u1", no_attributes()), first);
    assert_eq!(
        store.resolve(&closed, "u2", no_attributes()),
        None,
        "others are out"
    );
    let request = ResolveRequest::new("u1", "s", Platform::Ios, no_attributes());
    let text = app(&closed)
        .explain_sticky("paywall", &request, &StickyState::new(store.0.clone()))
        .trace
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        text.contains("a stored assignment decided the variant"),
        "{text}"
    );
    assert!(text.contains("audience not checked"), "{text}");
}

#[test]
fn the_fallback_document_decides_and_the_assignment_moves_to_the_user() {
    let c = build(&sticky_catalog(1.0, 1.0, |_| {}));
    let mut store = Store::default();
    let device: Map<String, Value> = json!({"device_id": "d-1"}).as_object().cloned().unwrap();
    // Find a variant the user would not get by hashing, and store it for the device.
    let hashed = store.resolve(&c, "signed-in", no_attributes()).unwrap();
    let other = if hashed == "control" {
        VAR_NEW
    } else {
        VAR_CONTROL
    };
    let mut docs = Store::default();
    docs.0.insert(StickyDoc {
        attribute_name: "device_id".into(),
        attribute_value: "d-1".into(),
        assignments: [(format!("{EXP}__0"), other.to_owned())].into(),
    });
    let got = docs.resolve(&c, "signed-in", &device).unwrap();
    assert_ne!(got, hashed, "the device's stored variant, not the hash's");
    assert_eq!(
        docs.0
            .get("user_id", "signed-in")
            .expect("the document")
            .assignments[&format!("{EXP}__0")],
        other,
        "recorded into the user's own document"
    );
}

#[test]
fn non_sticky_placements_read_and_write_nothing() {
    let c = build(&catalog_json());
    let a = app(&c);
    assert!(!a.placement("paywall").unwrap().is_sticky());
    let request = ResolveRequest::new("u1", "s", Platform::Ios, no_attributes());
    assert!(a.sticky_ids(["paywall", "onboarding"], &request).is_empty());
    let mut state = StickyState::new(StickyDocs::new());
    let r = a.resolve_sticky("paywall", &request, ResolveMode::Normal, &mut state);
    assert_eq!(
        r.assignment().map(|x| x.variant.id()),
        a.resolve("paywall", &request, ResolveMode::Normal)
            .assignment()
            .map(|x| x.variant.id())
    );
    assert!(state.writes(a.id()).is_empty());
}

#[test]
fn unreadable_documents_resolve_as_without_and_record_nothing() {
    let c = build(&sticky_catalog(1.0, 1.0, |_| {}));
    let a = app(&c);
    let request = ResolveRequest::new("u1", "s", Platform::Ios, no_attributes());
    assert_eq!(
        a.sticky_ids(["paywall"], &request)
            .iter()
            .map(|id| (id.attribute_name.as_str(), id.attribute_value.as_str()))
            .collect::<Vec<_>>(),
        [("user_id", "u1")],
        "no device_id in the request: only the user's document"
    );
    let mut state = StickyState::unavailable();
    let r = a.resolve_sticky("paywall", &request, ResolveMode::Normal, &mut state);
    assert_eq!(
        r.assignment().map(|x| x.variant.id()),
        a.resolve("paywall", &request, ResolveMode::Normal)
            .assignment()
            .map(|x| x.variant.id())
    );
    assert!(
        state.writes(a.id()).is_empty(),
        "a write would replace what could not be read"
    );
    let mut readable = StickyState::new(StickyDocs::new());
    a.resolve_sticky("paywall", &request, ResolveMode::Normal, &mut readable);
    assert_eq!(readable.writes(a.id()).len(), 1);
}

#[test]
fn invalid_sticky_settings_are_refused_with_the_value_quoted() {
    let cases = [
        (
            json!({"bucket_version": 1, "min_bucket_version": 2}),
            "min_bucket_version",
            "not 2",
        ),
        (
            json!({"fallback_attribute": "device id"}),
            "fallback_attribute",
            "\"device id\"",
        ),
        (
            json!({"fallback_attribute": "user_id"}),
            "fallback_attribute",
            "user_id",
        ),
        (json!({"hash_version": 3}), "hash_version", "not 3"),
    ];
    for (fields, pointer, quoted) in cases {
        let doc = sticky_catalog(1.0, 1.0, |e| {
            for (k, v) in fields.as_object().unwrap() {
                e[k] = v.clone();
            }
        });
        let error = Catalog::build(data_from(&doc))
            .expect_err("refused")
            .to_string();
        assert!(
            error.contains(pointer) && error.contains(quoted),
            "{fields}: {error}"
        );
    }
}

#[test]
fn the_dry_run_says_who_moves_for_a_sticky_experiment() {
    let base = sticky_catalog(1.0, 1.0, |_| {});
    let note = |after: &Value| {
        let diff = diff_catalogs(
            &data_from(&base),
            &data_from(after),
            &build(&base),
            &build(after),
        );
        let e = diff
            .experiments
            .iter()
            .find(|e| e.id.to_string() == EXP)
            .expect("the experiment is reported");
        (
            e.change_variant,
            e.sticky.as_ref().expect("sticky part").note.clone(),
        )
    };
    let (moved, text) = note(&sticky_catalog(7.0, 3.0, |_| {}));
    assert_eq!(moved, 0.2);
    assert!(
        text.contains("only users without a stored assignment move"),
        "{text}"
    );
    let (moved, text) = note(&sticky_catalog(1.0, 1.0, |e| {
        e["bucket_version"] = json!(1)
    }));
    assert_eq!(moved, 0.0, "same ranges");
    assert!(
        text.contains("re-randomises") && text.contains("0 -> 1"),
        "{text}"
    );
    let (_, text) = note(&sticky_catalog(1.0, 1.0, |e| {
        e["bucket_version"] = json!(2);
        e["min_bucket_version"] = json!(2);
    }));
    assert!(text.contains("below 2 are excluded"), "{text}");
}

/// `value.pipe(f)`: applies `f` (keeps the fixture edits above readable).
trait Pipe: Sized {
    fn pipe<T>(self, f: impl FnOnce(Self) -> T) -> T {
        f(self)
    }
}

impl Pipe for Value {}

#[test]
fn a_long_fallback_value_is_no_identifier() {
    let c = build(&sticky_catalog(1.0, 1.0, |_| {}));
    let ids = |value: &str| {
        let attributes: Map<String, Value> =
            json!({"device_id": value}).as_object().cloned().unwrap();
        let request = ResolveRequest::new("u1", "s", Platform::Ios, &attributes);
        app(&c)
            .sticky_ids(["paywall"], &request)
            .into_iter()
            .map(|id| id.attribute_name)
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&"d".repeat(256)), ["user_id", "device_id"]);
    assert_eq!(
        ids(&"d".repeat(257)),
        ["user_id"],
        "a client cannot make the store keep large keys"
    );
}

/// D28: a sticky experiment whose rule is off reads and writes no document; its stored
/// assignments are kept for when the rule is on again.
#[test]
fn a_sticky_experiment_whose_rule_is_off_reads_and_records_nothing() {
    let on = build(&sticky_catalog(1.0, 1.0, |_| {}));
    let mut doc = sticky_catalog(1.0, 1.0, |_| {});
    doc["workspaces"][0]["apps"][0]["placements"][1]["rules"][1]["enabled"] = json!(false);
    let off = build(&doc);
    assert!(!app(&off).placement("paywall").unwrap().is_sticky());
    let mut store = Store::default();
    let variant = store.resolve(&on, "user-1", no_attributes());
    assert!(variant.is_some());
    let request = ResolveRequest::new("user-1", "s", Platform::Ios, no_attributes());
    assert!(app(&off).sticky_ids(["paywall"], &request).is_empty());
    // Even handed its documents, resolve does not use them.
    let mut state = StickyState::new(store.0.clone());
    let r = app(&off).resolve_sticky("paywall", &request, ResolveMode::Normal, &mut state);
    assert!(r.assignment().is_none());
    assert!(state.writes(app(&off).id()).is_empty());
    // On again: the stored variant applies.
    assert_eq!(store.resolve(&on, "user-1", no_attributes()), variant);
}
