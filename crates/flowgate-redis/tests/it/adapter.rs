//! What the Redis adapter adds to the contract: passwords never shown, a bounded failure when
//! Redis is unreachable, replicas sharing documents, recovery after Redis restarts, and a read
//! that meets a key flowgate did not write.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowgate_domain::ports::{Outage, StickyStore, StoreError};
use flowgate_redis::{RedisStickyOptions, RedisStickyStore};

use crate::support::{
    app, closed_port, connect, id, options, redis_url, write, Fixture, Prefix, RedisServer,
};

/// How long a call may take to report that Redis is unreachable.
const BOUND: Duration = Duration::from_secs(5);

/// Runs `call`, asserts it failed as [`StoreError::Unavailable`] within [`BOUND`], and returns
/// the error and the time it took.
async fn unavailable<T: std::fmt::Debug>(
    what: &str,
    call: impl Future<Output = Result<T, StoreError>>,
) -> (StoreError, Duration) {
    let started = Instant::now();
    let outcome = tokio::time::timeout(BOUND, call).await;
    let took = started.elapsed();
    let error = match outcome {
        Err(_) => panic!("{what}: no answer within {BOUND:?}"),
        Ok(Ok(value)) => panic!("{what}: succeeded without Redis: {value:?}"),
        Ok(Err(e)) => e,
    };
    assert!(
        matches!(error, StoreError::Unavailable { .. }),
        "{what}: {error:?}"
    );
    eprintln!("{what}: {error} after {took:?}");
    (error, took)
}

#[tokio::test]
async fn a_password_in_the_url_never_appears_in_an_error() {
    let secret = "s3cr3t-pw%21";
    let decoded = "s3cr3t-pw!";
    let shown = |e: &StoreError| {
        let text = format!("{e} {e:?}");
        assert!(!text.contains("s3cr3t"), "the password shows in: {text}");
        text
    };

    // Unreachable: the error names the redacted URL.
    let url = format!("redis://flowgate:{secret}@127.0.0.1:{}", closed_port());
    let e = RedisStickyStore::connect(&url, RedisStickyOptions::default())
        .await
        .unwrap_err();
    assert!(shown(&e).contains("redis://flowgate:***@127.0.0.1"), "{e}");

    // The same through a store that connects on first use, and its Debug.
    let lazy = RedisStickyStore::connect_lazy(&url, RedisStickyOptions::default())
        .await
        .unwrap();
    assert!(!format!("{lazy:?}").contains("s3cr3t"), "{lazy:?}");
    assert_eq!(lazy.redacted_url(), url.replace(secret, "***"));
    shown(
        &lazy
            .read_sticky(app(1), &[id("user_id", "u1")])
            .await
            .unwrap_err(),
    );
    shown(
        &lazy
            .write_sticky(&[write(app(1), "user_id", "u1", &[("e__0", "a")])])
            .await
            .unwrap_err(),
    );

    // Refused by a running Redis (no such user, or no password set): not an outage.
    let reachable = redis_url().replacen("://", &format!("://flowgate:{secret}@"), 1);
    if !redis_url().contains('@') {
        let e = RedisStickyStore::connect(&reachable, RedisStickyOptions::default())
            .await
            .unwrap_err();
        assert!(!matches!(e, StoreError::Unavailable { .. }), "{e:?}");
        shown(&e);
    }

    // Malformed: a configuration error, nothing tried.
    for bad in [
        format!("redis://flowgate:{secret}@[::1"),
        format!("redis://flowgate:{decoded}@host/not-a-db"),
        format!("http://flowgate:{secret}@host"),
    ] {
        let e = RedisStickyStore::connect(&bad, RedisStickyOptions::default())
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Config { .. }), "{e:?}");
        shown(&e);
    }
}

#[tokio::test]
async fn an_unreachable_redis_fails_fast_as_unavailable() {
    let url = format!("redis://127.0.0.1:{}", closed_port());
    let (e, _) = unavailable(
        "connect",
        RedisStickyStore::connect(&url, RedisStickyOptions::default()),
    )
    .await;
    assert!(
        matches!(
            e,
            StoreError::Unavailable {
                reason: Outage::Connection,
                ..
            }
        ),
        "{e:?}"
    );

    let store = RedisStickyStore::connect_lazy(&url, RedisStickyOptions::default())
        .await
        .expect("a lazy store checks only the URL");
    let ids = [id("user_id", "u1"), id("device_id", "d1")];
    let writes = [write(app(1), "user_id", "u1", &[("e__0", "a")])];
    // Twice each: the first call meets the initial attempt, the next ones a fresh reconnection.
    for round in 1..=2 {
        unavailable(&format!("read #{round}"), store.read_sticky(app(1), &ids)).await;
        unavailable(&format!("write #{round}"), store.write_sticky(&writes)).await;
    }
    // Many callers at once wait on the one reconnection instead of piling up.
    let store = Arc::new(store);
    let started = Instant::now();
    let calls: Vec<_> = (0..50)
        .map(|_| {
            let store = Arc::clone(&store);
            let ids = ids.clone();
            tokio::spawn(async move { store.read_sticky(app(1), &ids).await })
        })
        .collect();
    for call in calls {
        let outcome = call.await.unwrap();
        assert!(
            matches!(outcome, Err(StoreError::Unavailable { .. })),
            "{outcome:?}"
        );
    }
    let took = started.elapsed();
    eprintln!("50 concurrent reads: all unavailable after {took:?}");
    assert!(took < BOUND, "50 concurrent reads took {took:?}");
}

#[tokio::test]
async fn replicas_on_the_same_prefix_share_documents() {
    let fixture = Fixture::new().await;
    let other = connect(&redis_url(), &fixture.prefix.prefix).await;
    let replicas: [&dyn StickyStore; 2] = [&fixture.store, &other];

    replicas[0]
        .write_sticky(&[write(app(1), "user_id", "u1", &[("a__0", "control")])])
        .await
        .unwrap();
    replicas[1]
        .write_sticky(&[write(app(1), "user_id", "u1", &[("b__0", "trial")])])
        .await
        .unwrap();
    for replica in replicas {
        let docs = replica
            .read_sticky(app(1), &[id("user_id", "u1")])
            .await
            .unwrap();
        let assignments = &docs
            .get("user_id", "u1")
            .expect("u1's document")
            .assignments;
        assert_eq!(assignments.len(), 2, "{assignments:?}");
        assert_eq!(assignments["a__0"], "control");
        assert_eq!(assignments["b__0"], "trial");
    }

    // Another prefix shares nothing.
    let elsewhere = Prefix::new();
    let isolated = connect(&redis_url(), &elsewhere.prefix).await;
    assert!(isolated
        .read_sticky(app(1), &[id("user_id", "u1")])
        .await
        .unwrap()
        .is_empty());

    // The layout the module documents, and the clean-up the tests rely on.
    let key = format!("{}:{}:user_id:u1", fixture.prefix.prefix, app(1));
    assert_eq!(fixture.prefix.keys(), vec![key]);
    fixture.prefix.clean();
    assert!(fixture.prefix.keys().is_empty());
}

/// What Redis holds at a document's key but flowgate did not write there: a key of another type
/// is Redis's own error (`WRONGTYPE`), in the call's error and in no document; a read of
/// several identifiers fails whole, as the port says, rather than handing back the others
/// without the broken one. Fields of a hash that are not assignments (a value that is not
/// UTF-8, a field of another form: what a later version of the documents may add, D26) are
/// skipped, and the hash's assignments read.
#[tokio::test]
async fn a_document_key_holding_something_else_fails_the_read() {
    let fixture = Fixture::new().await;
    let client = redis::Client::open(redis_url()).expect("the test Redis URL");
    let mut conn = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .expect("the test Redis");
    let key = |value: &str| format!("{}:{}:user_id:{value}", fixture.prefix.prefix, app(1));
    let _: () = redis::cmd("SET")
        .arg(key("s"))
        .arg("a string")
        .query(&mut conn)
        .expect("SET");
    let _: () = redis::cmd("HSET")
        .arg(key("bytes"))
        .arg("a__0")
        .arg(&[0xff_u8, 0xfe][..])
        .arg(&[b'c', 0xff, b'_', b'_', b'0'][..])
        .arg("x")
        .arg("_meta")
        .arg("{\"written_at\": 1}")
        .arg("b__1")
        .arg("trial")
        .query(&mut conn)
        .expect("HSET");
    let _: () = redis::cmd("HSET")
        .arg(key("only-bytes"))
        .arg("a__0")
        .arg(&[0xff_u8][..])
        .query(&mut conn)
        .expect("HSET");
    fixture
        .store
        .write_sticky(&[write(app(1), "user_id", "ok", &[("a__0", "control")])])
        .await
        .unwrap();

    let e = fixture
        .store
        .read_sticky(app(1), &[id("user_id", "ok"), id("user_id", "s")])
        .await
        .unwrap_err();
    assert!(
        matches!(&e, StoreError::Other { detail } if detail.contains("WRONGTYPE")
            && detail.contains("reading 2 sticky documents")),
        "{e:?}"
    );
    let docs = fixture
        .store
        .read_sticky(
            app(1),
            &[id("user_id", "bytes"), id("user_id", "only-bytes")],
        )
        .await
        .unwrap();
    assert_eq!(
        docs.len(),
        1,
        "a hash without an assignment is no document: {docs:?}"
    );
    let assignments = &docs.get("user_id", "bytes").unwrap().assignments;
    assert_eq!(
        assignments.iter().collect::<Vec<_>>(),
        [(&"b__1".to_owned(), &"trial".to_owned())]
    );
    // The document flowgate wrote reads as before.
    let docs = fixture
        .store
        .read_sticky(app(1), &[id("user_id", "ok")])
        .await
        .unwrap();
    assert_eq!(
        docs.get("user_id", "ok").unwrap().assignments["a__0"],
        "control"
    );
}

#[tokio::test]
async fn a_restarted_redis_is_used_again_by_the_same_store() {
    let mut server = RedisServer::start();
    let store = RedisStickyStore::connect(&server.url(), options("flowgate:sticky"))
        .await
        .expect("the test's own Redis");
    let ids = [id("user_id", "u1")];
    store
        .write_sticky(&[write(app(1), "user_id", "u1", &[("e__0", "a")])])
        .await
        .unwrap();
    assert_eq!(store.read_sticky(app(1), &ids).await.unwrap().len(), 1);

    server.kill();
    unavailable("read while Redis is down", store.read_sticky(app(1), &ids)).await;
    unavailable(
        "write while Redis is down",
        store.write_sticky(&[write(app(1), "user_id", "u1", &[("e__0", "b")])]),
    )
    .await;
    unavailable(
        "second read while Redis is down",
        store.read_sticky(app(1), &ids),
    )
    .await;

    // Redis stays away longer than a reconnection takes to give up, so the store's last
    // reconnection has failed when Redis is back: the first call must not report that stale
    // failure.
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.restart();
    // Nothing was persisted: the restarted Redis is empty, and the very first call succeeds.
    assert!(store.read_sticky(app(1), &ids).await.unwrap().is_empty());
    store
        .write_sticky(&[write(app(1), "user_id", "u1", &[("e__1", "c")])])
        .await
        .unwrap();
    let docs = store.read_sticky(app(1), &ids).await.unwrap();
    assert_eq!(
        docs.get("user_id", "u1")
            .expect("u1's document")
            .assignments["e__1"],
        "c"
    );
}

#[tokio::test]
async fn a_redis_that_does_not_answer_times_out_and_is_used_again() {
    let server = RedisServer::start();
    let store = RedisStickyStore::connect(&server.url(), options("flowgate:sticky"))
        .await
        .expect("the test's own Redis");
    let ids = [id("user_id", "u1")];
    store
        .write_sticky(&[write(app(1), "user_id", "u1", &[("e__0", "a")])])
        .await
        .unwrap();

    // Stopped, not killed: the connection stays open and nothing answers on it.
    server.signal("STOP");
    let (e, took) = unavailable(
        "read while Redis is stopped",
        store.read_sticky(app(1), &ids),
    )
    .await;
    server.signal("CONT");
    assert!(
        matches!(
            e,
            StoreError::Unavailable {
                reason: Outage::Timeout,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        took >= RedisStickyOptions::default().response_timeout,
        "timed out after {took:?}"
    );

    let docs = store.read_sticky(app(1), &ids).await.unwrap();
    assert_eq!(
        docs.get("user_id", "u1")
            .expect("u1's document")
            .assignments["e__0"],
        "a"
    );
}

/// `formats/flowgate.sticky/v1/redis-hashes.txt`: its `HSET` lines, each as the key and the
/// field and value pairs.
fn v1_sample() -> Vec<(String, Vec<(String, String)>)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../formats/flowgate.sticky/v1/redis-hashes.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            assert!(
                words.len() >= 4 && words[0] == "HSET" && words.len().is_multiple_of(2),
                "{line}"
            );
            let pairs = words[2..]
                .chunks(2)
                .map(|p| (p[0].to_owned(), p[1].to_owned()))
                .collect();
            (words[1].to_owned(), pairs)
        })
        .collect()
}

/// Version 1 of the documents (the Versions section of `flowgate_domain::sticky`): the golden
/// sample's hashes, as a release wrote them, are read by this one as the documents they hold,
/// and what this release writes for those documents is the sample's hashes exactly.
#[tokio::test]
async fn the_v1_samples_hashes_read_and_are_what_this_release_writes() {
    let fixture = Fixture::new().await;
    let client = redis::Client::open(redis_url()).expect("the test Redis URL");
    let mut conn = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .expect("the test Redis");
    let sample = v1_sample();
    assert_eq!(sample.len(), 2);
    let default_prefix = format!("{}:", flowgate_redis::DEFAULT_KEY_PREFIX);
    // Each key's app, attribute name and value (the name ends at the first `:`).
    let mut expected: Vec<(
        flowgate_domain::ids::AppId,
        flowgate_domain::sticky::StickyDoc,
    )> = Vec::new();
    for (key, pairs) in &sample {
        let rest = key
            .strip_prefix(&default_prefix)
            .expect("the default prefix");
        let (app_id, identifier) = rest.split_at(36);
        let (name, value) = identifier[1..].split_once(':').expect("name:value");
        let app_id: flowgate_domain::ids::AppId = app_id.parse().expect("an app id");
        let doc = flowgate_domain::sticky::StickyDoc {
            attribute_name: name.to_owned(),
            attribute_value: value.to_owned(),
            assignments: pairs.iter().cloned().collect(),
        };
        expected.push((app_id, doc));
        // Stored as that release stored it, under this test's prefix.
        let mut hset = redis::cmd("HSET");
        hset.arg(format!("{}:{rest}", fixture.prefix.prefix));
        for (field, value) in pairs {
            hset.arg(field).arg(value);
        }
        let _: () = hset.query(&mut conn).expect("HSET");
    }
    for (app_id, doc) in &expected {
        let docs = fixture
            .store
            .read_sticky(*app_id, &[id(&doc.attribute_name, &doc.attribute_value)])
            .await
            .unwrap();
        assert_eq!(
            docs.get(&doc.attribute_name, &doc.attribute_value),
            Some(doc)
        );
    }

    // What this release writes, under a fresh prefix.
    let other = Fixture::new().await;
    let writes: Vec<flowgate_domain::sticky::StickyWrite> = expected
        .iter()
        .map(|(app_id, doc)| flowgate_domain::sticky::StickyWrite {
            app_id: *app_id,
            doc: doc.clone(),
        })
        .collect();
    other.store.write_sticky(&writes).await.unwrap();
    let mut keys = other.prefix.keys();
    keys.sort();
    let mut sample_keys: Vec<String> = sample
        .iter()
        .map(|(k, _)| k.replacen(&default_prefix, &format!("{}:", other.prefix.prefix), 1))
        .collect();
    sample_keys.sort();
    assert_eq!(
        keys, sample_keys,
        "one hash per document, at the sample's keys"
    );
    for (key, pairs) in &sample {
        let written: std::collections::BTreeMap<String, String> = redis::cmd("HGETALL")
            .arg(key.replacen(&default_prefix, &format!("{}:", other.prefix.prefix), 1))
            .query(&mut conn)
            .expect("HGETALL");
        let pairs: std::collections::BTreeMap<String, String> = pairs.iter().cloned().collect();
        assert_eq!(written, pairs, "{key}");
    }
}
