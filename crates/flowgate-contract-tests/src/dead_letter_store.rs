//! [`DeadLetterStore`] contract (D17): letters are kept byte for byte and listed in the order
//! they came, one letter per refused event however often it is refused, undecodable bus
//! messages (no event id) each kept on their own, and replays recorded or removed.

use flowgate_domain::delivery::EVENT_JSON_FORMAT;
use flowgate_domain::ids::{AppId, DeadLetterId, EventId};
use flowgate_domain::ports::{DeadLetter, DeadLetterStore, StoreError};
use time::macros::datetime;
use time::OffsetDateTime;

const T0: OffsetDateTime = datetime!(2026-11-24 10:00:00.123456 UTC);

fn at(secs: i64) -> OffsetDateTime {
    T0 + time::Duration::seconds(secs)
}

/// A letter for event `n` (or a bus message when `n` is `None`) refused at `T0 + secs`.
fn letter(n: Option<u128>, secs: i64, error: &str) -> DeadLetter {
    DeadLetter {
        id: DeadLetterId::new_v7(at(secs)),
        event_id: n.map(|n| EventId::from_uuid(uuid::Uuid::from_u128(n))),
        app_id: n.map(|_| AppId::from_uuid(uuid::Uuid::from_u128(0xA))),
        format: if n.is_some() {
            EVENT_JSON_FORMAT.to_owned()
        } else {
            "flowgate.events.v1+json".to_owned()
        },
        // Not UTF-8, and a NUL: payloads are bytes, kept as received.
        payload: vec![b'{', 0xff, 0, b'}', n.unwrap_or(0) as u8],
        error: error.to_owned(),
        first_attempt_at: at(secs),
        last_attempt_at: at(secs),
        attempts: 1,
    }
}

async fn list<S: DeadLetterStore + ?Sized>(store: &S) -> Vec<DeadLetter> {
    match store.list_dead_letters(None, 1000).await {
        Ok(letters) => letters,
        Err(e) => panic!("list_dead_letters: {e}"),
    }
}

async fn add<S: DeadLetterStore + ?Sized>(store: &S, letters: &[DeadLetter]) {
    if let Err(e) = store.add_dead_letters(letters).await {
        panic!("add_dead_letters of {} letters: {e}", letters.len());
    }
}

/// Letters read back exactly as written, in the order they came (by id), counted.
pub async fn letters_round_trip_in_order<S: DeadLetterStore + ?Sized>(store: &S) {
    let second = letter(Some(2), 2, "check violated");
    let first = letter(Some(1), 1, "value too long");
    let message = letter(None, 3, "not JSON");
    add(store, &[second.clone(), first.clone()]).await;
    add(store, std::slice::from_ref(&message)).await;
    assert_eq!(list(store).await, vec![first, second, message]);
    assert_eq!(store.count_dead_letters().await.ok(), Some(3));
}

/// A refused event refused again stays one letter: its attempts add up, the last attempt and
/// the error are the latest, the first attempt is kept.
pub async fn an_event_refused_again_stays_one_letter<S: DeadLetterStore + ?Sized>(store: &S) {
    let first = letter(Some(7), 0, "first error");
    add(store, std::slice::from_ref(&first)).await;
    add(store, &[letter(Some(7), 60, "second error")]).await;
    let letters = list(store).await;
    assert_eq!(letters.len(), 1, "{letters:?}");
    let kept = &letters[0];
    assert_eq!(kept.id, first.id);
    assert_eq!(kept.attempts, 2);
    assert_eq!(kept.first_attempt_at, at(0));
    assert_eq!(kept.last_attempt_at, at(60));
    assert_eq!(kept.error, "second error");
    // Undecodable messages have no event id: each is a letter of its own.
    add(store, &[letter(None, 1, "a"), letter(None, 2, "b")]).await;
    assert_eq!(store.count_dead_letters().await.ok(), Some(3));
}

/// The same event id refused in two apps is two letters (D25): one app's letter is never
/// merged into, or overwritten by, another's.
pub async fn the_same_event_id_in_two_apps_is_two_letters<S: DeadLetterStore + ?Sized>(store: &S) {
    let ours = letter(Some(7), 0, "ours");
    let mut theirs = letter(Some(7), 1, "theirs");
    theirs.app_id = Some(AppId::from_uuid(uuid::Uuid::from_u128(0xB)));
    theirs.payload = b"their event".to_vec();
    add(store, std::slice::from_ref(&ours)).await;
    add(store, std::slice::from_ref(&theirs)).await;
    assert_eq!(list(store).await, vec![ours.clone(), theirs.clone()]);
    // Each refused again stays its own one letter.
    add(store, &[letter(Some(7), 5, "ours again")]).await;
    let letters = list(store).await;
    assert_eq!(letters.len(), 2);
    assert_eq!(
        (letters[0].attempts, letters[0].error.as_str()),
        (2, "ours again")
    );
    assert_eq!(letters[1], theirs);
}

/// Pages: `after` continues where the last page ended.
pub async fn pages_continue_after_the_last_id<S: DeadLetterStore + ?Sized>(store: &S) {
    let all: Vec<DeadLetter> = (0..5).map(|n| letter(Some(n), n as i64, "e")).collect();
    add(store, &all).await;
    let page1 = store
        .list_dead_letters(None, 2)
        .await
        .ok()
        .unwrap_or_default();
    let page2 = store
        .list_dead_letters(page1.last().map(|l| l.id), 2)
        .await
        .ok()
        .unwrap_or_default();
    let page3 = store
        .list_dead_letters(page2.last().map(|l| l.id), 2)
        .await
        .ok()
        .unwrap_or_default();
    assert_eq!(page1, all[0..2]);
    assert_eq!(page2, all[2..4]);
    assert_eq!(page3, all[4..5]);
}

/// A replay refused again adds an attempt; a replay that stored the events removes the
/// letter; unknown ids are reported.
pub async fn replays_are_recorded_or_removed<S: DeadLetterStore + ?Sized>(store: &S) {
    let a = letter(Some(1), 0, "refused");
    let b = letter(None, 1, "undecodable");
    add(store, &[a.clone(), b.clone()]).await;
    assert!(store
        .record_dead_letter_attempt(a.id, "refused again", at(30))
        .await
        .is_ok());
    let letters = list(store).await;
    assert_eq!(
        (
            letters[0].attempts,
            letters[0].last_attempt_at,
            letters[0].error.as_str()
        ),
        (2, at(30), "refused again")
    );
    assert_eq!(store.remove_dead_letter(b.id).await.ok(), Some(true));
    assert_eq!(store.remove_dead_letter(b.id).await.ok(), Some(false));
    assert_eq!(list(store).await.len(), 1);
    let unknown = DeadLetterId::new_v7(at(99));
    assert!(matches!(
        store.record_dead_letter_attempt(unknown, "x", at(99)).await,
        Err(StoreError::NotFound { .. })
    ));
}
