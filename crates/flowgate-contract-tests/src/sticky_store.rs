//! [`StickyStore`] contract (D23): GrowthBook's assignment documents kept per app and
//! identifier, read back exactly, merged on write (an assignment key already stored takes the
//! new variant, other keys are kept), one app never seeing another's documents; entries that
//! are not assignments (what a later version of the documents may add, D26) skipped by reads.
//!
//! Each case takes a fresh, empty store; the runner calls every case once per adapter.

use std::collections::BTreeMap;

use flowgate_domain::ids::AppId;
use flowgate_domain::ports::StickyStore;
use flowgate_domain::sticky::{StickyDoc, StickyDocs, StickyId, StickyWrite};

fn app(n: u128) -> AppId {
    AppId::from_uuid(uuid::Uuid::from_u128(0xA000 + n))
}

fn id(name: &str, value: &str) -> StickyId {
    StickyId {
        attribute_name: name.to_owned(),
        attribute_value: value.to_owned(),
    }
}

fn doc(name: &str, value: &str, assignments: &[(&str, &str)]) -> StickyDoc {
    StickyDoc {
        attribute_name: name.to_owned(),
        attribute_value: value.to_owned(),
        assignments: assignments
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

fn write(app_id: AppId, doc: StickyDoc) -> StickyWrite {
    StickyWrite { app_id, doc }
}

async fn read<S: StickyStore + ?Sized>(store: &S, app: AppId, ids: &[StickyId]) -> StickyDocs {
    match store.read_sticky(app, ids).await {
        Ok(docs) => docs,
        Err(e) => panic!("read_sticky of {} identifiers: {e}", ids.len()),
    }
}

async fn put<S: StickyStore + ?Sized>(store: &S, writes: &[StickyWrite]) {
    if let Err(e) = store.write_sticky(writes).await {
        panic!("write_sticky of {} documents: {e}", writes.len());
    }
}

fn docs(list: &[StickyDoc]) -> StickyDocs {
    list.iter().cloned().collect()
}

/// Nothing stored: every identifier is absent, and an empty read is empty.
pub async fn unknown_identifiers_are_absent<S: StickyStore + ?Sized>(store: &S) {
    assert_eq!(
        read(store, app(1), &[id("user_id", "u1"), id("device_id", "d1")]).await,
        StickyDocs::new()
    );
    assert_eq!(read(store, app(1), &[]).await, StickyDocs::new());
    put(store, &[]).await;
}

/// Documents are read back exactly as written, and only those asked for.
pub async fn documents_round_trip<S: StickyStore + ?Sized>(store: &S) {
    let user = doc(
        "user_id",
        "u1",
        &[
            ("0192e3c4-0000-7000-8000-000000000001__0", "v-control"),
            ("0192e3c4-0000-7000-8000-000000000002__3", "v-trial"),
        ],
    );
    let device = doc("device_id", "d1", &[("exp__1", "b")]);
    let other = doc("user_id", "u2", &[("exp__0", "a")]);
    put(
        store,
        &[
            write(app(1), user.clone()),
            write(app(1), device.clone()),
            write(app(1), other),
        ],
    )
    .await;
    assert_eq!(
        read(
            store,
            app(1),
            &[
                id("user_id", "u1"),
                id("device_id", "d1"),
                id("user_id", "u9")
            ]
        )
        .await,
        docs(&[user, device])
    );
}

/// A write merges into the stored document: a stored key takes the new variant, other keys
/// are kept; within one batch the later write of a key wins.
pub async fn writes_merge_into_stored_documents<S: StickyStore + ?Sized>(store: &S) {
    put(
        store,
        &[write(
            app(1),
            doc("user_id", "u1", &[("a__0", "control"), ("b__0", "x")]),
        )],
    )
    .await;
    put(
        store,
        &[
            write(app(1), doc("user_id", "u1", &[("a__0", "trial")])),
            write(app(1), doc("user_id", "u1", &[("c__2", "y")])),
            write(app(1), doc("user_id", "u1", &[("c__2", "z")])),
        ],
    )
    .await;
    assert_eq!(
        read(store, app(1), &[id("user_id", "u1")]).await,
        docs(&[doc(
            "user_id",
            "u1",
            &[("a__0", "trial"), ("b__0", "x"), ("c__2", "z")]
        )])
    );
}

/// Apps share nothing: the same identifier in two apps has two documents, and an app reads
/// only its own.
pub async fn apps_are_isolated<S: StickyStore + ?Sized>(store: &S) {
    put(
        store,
        &[
            write(app(1), doc("user_id", "u1", &[("a__0", "control")])),
            write(app(2), doc("user_id", "u1", &[("a__0", "trial")])),
        ],
    )
    .await;
    assert_eq!(
        read(store, app(1), &[id("user_id", "u1")]).await,
        docs(&[doc("user_id", "u1", &[("a__0", "control")])])
    );
    assert_eq!(
        read(store, app(2), &[id("user_id", "u1")]).await,
        docs(&[doc("user_id", "u1", &[("a__0", "trial")])])
    );
    assert_eq!(
        read(store, app(3), &[id("user_id", "u1")]).await,
        StickyDocs::new()
    );
}

/// A combined read answers each of its reads as a read of its own would: one answer per read,
/// in order, each with only its own app's documents, whatever the others ask for (the same
/// identifier in another app, the same read twice, an empty read).
pub async fn combined_reads_keep_apps_apart<S: StickyStore + ?Sized>(store: &S) {
    put(
        store,
        &[
            write(app(1), doc("user_id", "u1", &[("a__0", "control")])),
            write(app(1), doc("user_id", "u2", &[("a__0", "trial")])),
            write(app(2), doc("user_id", "u1", &[("a__0", "trial")])),
            write(app(2), doc("device_id", "d1", &[("b__1", "x")])),
        ],
    )
    .await;
    let (u1, u2, u3, d1) = (
        id("user_id", "u1"),
        id("user_id", "u2"),
        id("user_id", "u3"),
        id("device_id", "d1"),
    );
    let first = [u1.clone(), u3.clone()];
    let second = [u1.clone(), d1.clone()];
    let third = [u2.clone(), u1.clone()];
    let reads: [(AppId, &[StickyId]); 5] = [
        (app(1), &first),
        (app(2), &second),
        (app(3), &second),
        (app(1), &[]),
        (app(1), &third),
    ];
    let answers = match store.read_sticky_many(&reads).await {
        Ok(answers) => answers,
        Err(e) => panic!("read_sticky_many of {} reads: {e}", reads.len()),
    };
    assert_eq!(
        answers,
        [
            docs(&[doc("user_id", "u1", &[("a__0", "control")])]),
            docs(&[
                doc("user_id", "u1", &[("a__0", "trial")]),
                doc("device_id", "d1", &[("b__1", "x")]),
            ]),
            StickyDocs::new(),
            StickyDocs::new(),
            docs(&[
                doc("user_id", "u1", &[("a__0", "control")]),
                doc("user_id", "u2", &[("a__0", "trial")]),
            ]),
        ]
    );
    for (i, (app, ids)) in reads.iter().enumerate() {
        assert_eq!(answers[i], read(store, *app, ids).await, "read {i} alone");
    }
    assert_eq!(
        store.read_sticky_many(&[]).await.ok(),
        Some(Vec::new()),
        "no reads, no answers"
    );
}

/// Identifiers are opaque: names and values that share a prefix, separators of the store's
/// own keys (`:`, `||`), quotes, non-ASCII and long values are distinct documents, read back
/// byte for byte.
pub async fn identifiers_are_opaque<S: StickyStore + ?Sized>(store: &S) {
    let long = "é".repeat(512);
    let list = [
        doc("user_id", "a||b", &[("e__0", "1")]),
        doc("user_id", "a", &[("e__0", "2")]),
        doc("user_id", "a:b", &[("e__0", "3")]),
        doc("device_id", "a", &[("e__0", "4")]),
        doc("user_id", "quote'\"\\%_*", &[("e__0", "5")]),
        doc("user_id", &long, &[("e__0", "6")]),
        doc("user_id", "", &[("e__0", "7")]),
    ];
    let writes: Vec<StickyWrite> = list.iter().cloned().map(|d| write(app(1), d)).collect();
    put(store, &writes).await;
    let ids: Vec<StickyId> = list
        .iter()
        .map(|d| id(&d.attribute_name, &d.attribute_value))
        .collect();
    assert_eq!(read(store, app(1), &ids).await, docs(&list));
    assert_eq!(
        read(store, app(1), &[id("user_id", "a|")]).await,
        StickyDocs::new()
    );
}

/// Many identifiers in one read and many documents in one write (a batch of the writer behind
/// resolve).
pub async fn large_batches<S: StickyStore + ?Sized>(store: &S) {
    let list: Vec<StickyDoc> = (0..500)
        .map(|i| {
            let assignments: BTreeMap<String, String> = (0..3)
                .map(|e| (format!("exp{e}__{i}"), format!("v{}", (i + e) % 4)))
                .collect();
            StickyDoc {
                attribute_name: "user_id".to_owned(),
                attribute_value: format!("user-{i}"),
                assignments,
            }
        })
        .collect();
    let writes: Vec<StickyWrite> = list.iter().cloned().map(|d| write(app(1), d)).collect();
    put(store, &writes).await;
    let ids: Vec<StickyId> = list
        .iter()
        .map(|d| id(&d.attribute_name, &d.attribute_value))
        .collect();
    assert_eq!(read(store, app(1), &ids).await, docs(&list));
}

/// Version 1 of the documents (D26, the Versions section of `flowgate_domain::sticky`): an entry
/// that is not an assignment `<key>__<non-negative integer>` → non-empty variant key, such as
/// the metadata a later version may keep beside the assignments, is skipped by a read instead
/// of failing it; the document's assignments read as before and merge as before, and a
/// document of such entries only reads as no document.
pub async fn entries_that_are_not_assignments_are_skipped<S: StickyStore + ?Sized>(store: &S) {
    put(
        store,
        &[
            write(
                app(1),
                doc(
                    "user_id",
                    "u1",
                    &[
                        ("a__0", "control"),
                        ("_meta", r#"{"written_at": "2027-01-01T00:00:00Z"}"#),
                        ("a__x", "trial"),
                        ("a__-1", "trial"),
                        ("__0", "trial"),
                        ("b__1", ""),
                    ],
                ),
            ),
            write(app(1), doc("user_id", "u2", &[("written_at", "2027")])),
        ],
    )
    .await;
    let ids = [id("user_id", "u1"), id("user_id", "u2")];
    assert_eq!(
        read(store, app(1), &ids).await,
        docs(&[doc("user_id", "u1", &[("a__0", "control")])])
    );
    put(
        store,
        &[write(app(1), doc("user_id", "u1", &[("b__1", "x")]))],
    )
    .await;
    assert_eq!(
        read(store, app(1), &ids).await,
        docs(&[doc("user_id", "u1", &[("a__0", "control"), ("b__1", "x")])])
    );
    let reads: [(AppId, &[StickyId]); 1] = [(app(1), &ids)];
    assert_eq!(
        store.read_sticky_many(&reads).await.ok(),
        Some(vec![docs(&[doc(
            "user_id",
            "u1",
            &[("a__0", "control"), ("b__1", "x")]
        )])]),
        "a combined read skips them too"
    );
}
