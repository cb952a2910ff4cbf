//! [`PeopleStore`] contract (D28): people unique by normalised email, updates that end a
//! person's sessions when it is disabled or changes role, one-time sign-in links (taken once,
//! only before they expire, one winner among concurrent takes), sessions that expire, listed
//! per person and deleted, and one console secret for every caller.
//!
//! Each case takes a fresh, empty store; the runner calls every case once per adapter.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;

use flowgate_domain::ids::PersonId;
use flowgate_domain::people::{
    Person, PersonUpdate, Role, SessionRecord, SignInLink, ADMIN_TOKEN_ACTOR,
};
use flowgate_domain::ports::{PeopleStore, StoreError};
use time::OffsetDateTime;

use crate::fixtures::at;

/// The value of an operation that must succeed.
pub(crate) fn ok<T>(result: Result<T, StoreError>, what: &str) -> T {
    result.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Runs two futures at once (polled in turn in one task, so both are in flight together) and
/// returns both outputs.
pub(crate) async fn both<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (pin!(a), pin!(b));
    let (mut out_a, mut out_b) = (None, None);
    std::future::poll_fn(|cx| {
        if out_a.is_none() {
            if let Poll::Ready(v) = a.as_mut().poll(cx) {
                out_a = Some(v);
            }
        }
        if out_b.is_none() {
            if let Poll::Ready(v) = b.as_mut().poll(cx) {
                out_b = Some(v);
            }
        }
        if out_a.is_some() && out_b.is_some() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    match (out_a, out_b) {
        (Some(a), Some(b)) => (a, b),
        _ => unreachable!("both futures finished"),
    }
}

fn person_id(n: u128) -> PersonId {
    PersonId::from_uuid(uuid::Uuid::from_u128(
        0x5000_0000_0000_4000_8000_0000_0000_0000 + n,
    ))
}

/// Person `n` with `email` as given (not normalised), added at `at(n)`.
fn person(n: u128, email: &str, role: Role) -> Person {
    Person {
        id: person_id(n),
        email: email.to_owned(),
        role,
        disabled: false,
        password_hash: None,
        created_at: at(n as i64),
        updated_at: at(n as i64),
    }
}

async fn add<S: PeopleStore + ?Sized>(store: &S, person: &Person) {
    ok(store.add_person(person.clone()).await, "add_person");
}

async fn people<S: PeopleStore + ?Sized>(store: &S) -> Vec<Person> {
    ok(store.list_people().await, "list_people")
}

fn session(hash: &str, person: Option<PersonId>, created: i64, expires: i64) -> SessionRecord {
    SessionRecord {
        id_hash: hash.to_owned(),
        person_id: person,
        actor: match person {
            Some(id) => format!("{id}@example.com"),
            None => ADMIN_TOKEN_ACTOR.to_owned(),
        },
        role: if person.is_some() {
            Role::Editor
        } else {
            Role::Admin
        },
        csrf: format!("csrf-{hash}"),
        created_at: at(created),
        expires_at: at(expires),
        address: person.map(|_| "192.0.2.7".to_owned()),
    }
}

async fn start<S: PeopleStore + ?Sized>(store: &S, session: &SessionRecord) {
    ok(
        store.create_session(session.clone()).await,
        "create_session",
    );
}

async fn all<S: PeopleStore + ?Sized>(store: &S, now: OffsetDateTime) -> Vec<SessionRecord> {
    ok(store.all_sessions(now).await, "all_sessions")
}

fn link(hash: &str, person: PersonId, expires: i64) -> SignInLink {
    SignInLink {
        token_hash: hash.to_owned(),
        person_id: person,
        created_at: at(0),
        expires_at: at(expires),
    }
}

/// A second person with an email another has, in any case or with surrounding whitespace, is
/// [`StoreError::Conflict`] and is not stored; so is a second person with a taken id.
pub async fn duplicate_email_is_conflict<S: PeopleStore + ?Sized>(store: &S) {
    let ann = person(1, "ann@example.com", Role::Editor);
    add(store, &ann).await;
    let again = store
        .add_person(person(2, " ANN@Example.com ", Role::Viewer))
        .await;
    assert!(
        matches!(again, Err(StoreError::Conflict { .. })),
        "{again:?}"
    );
    let same_id = store
        .add_person(person(1, "other@example.com", Role::Viewer))
        .await;
    assert!(
        matches!(same_id, Err(StoreError::Conflict { .. })),
        "{same_id:?}"
    );
    assert_eq!(people(store).await, [ann]);
}

/// Emails are stored normalised (trimmed, lower-case) and found in any case; a list is by
/// email; an email that does not normalise is refused when added and finds nobody.
pub async fn emails_are_normalised<S: PeopleStore + ?Sized>(store: &S) {
    let mut ann = person(1, "  Ann.Lee@Example.COM\t", Role::Admin);
    ann.password_hash = Some("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".to_owned());
    add(store, &ann).await;
    add(store, &person(2, "carl@example.com", Role::Viewer)).await;
    add(store, &person(3, "bob@example.com", Role::Editor)).await;

    let stored = Person {
        email: "ann.lee@example.com".to_owned(),
        ..ann.clone()
    };
    assert_eq!(
        ok(store.person(ann.id).await, "person"),
        Some(stored.clone())
    );
    for spelling in ["ann.lee@example.com", " ANN.LEE@example.com "] {
        assert_eq!(
            ok(store.person_by_email(spelling).await, "person_by_email"),
            Some(stored.clone()),
            "{spelling:?}"
        );
    }
    for nobody in ["nobody@example.com", "not an email", ""] {
        assert_eq!(
            ok(store.person_by_email(nobody).await, "person_by_email"),
            None,
            "{nobody:?}"
        );
    }
    assert_eq!(ok(store.person(person_id(9)).await, "person"), None);
    let emails: Vec<String> = people(store).await.into_iter().map(|p| p.email).collect();
    assert_eq!(
        emails,
        ["ann.lee@example.com", "bob@example.com", "carl@example.com"]
    );

    let invalid = store
        .add_person(person(4, "ann@lee@example.com", Role::Viewer))
        .await;
    assert!(
        matches!(invalid, Err(StoreError::Unstorable { .. })),
        "{invalid:?}"
    );
    assert_eq!(people(store).await.len(), 3);
}

/// An update sets the fields it gives and the update time; a new password keeps the sessions,
/// a change of role or disabling ends the person's sessions (only that person's), and an
/// unknown person is `None`.
pub async fn updates_end_sessions_on_role_change_and_disable<S: PeopleStore + ?Sized>(store: &S) {
    let ann = person(1, "ann@example.com", Role::Editor);
    let bob = person(2, "bob@example.com", Role::Editor);
    add(store, &ann).await;
    add(store, &bob).await;
    let a1 = session("a1", Some(ann.id), 1, 100);
    let a2 = session("a2", Some(ann.id), 2, 100);
    let b1 = session("b1", Some(bob.id), 3, 100);
    let admin = session("t1", None, 4, 100);
    for s in [&a1, &a2, &b1, &admin] {
        start(store, s).await;
    }

    let password = PersonUpdate {
        password_hash: Some("$argon2id$new".to_owned()),
        ..PersonUpdate::default()
    };
    let expected = Person {
        password_hash: Some("$argon2id$new".to_owned()),
        updated_at: at(10),
        ..ann.clone()
    };
    assert_eq!(
        ok(
            store.update_person(ann.id, password, at(10)).await,
            "update"
        ),
        Some(expected.clone())
    );
    let same_role = PersonUpdate {
        role: Some(Role::Editor),
        ..PersonUpdate::default()
    };
    let expected = Person {
        updated_at: at(11),
        ..expected
    };
    assert_eq!(
        ok(
            store.update_person(ann.id, same_role, at(11)).await,
            "update"
        ),
        Some(expected.clone())
    );
    assert_eq!(
        ok(store.sessions_of(ann.id, at(20)).await, "sessions_of"),
        [a2.clone(), a1.clone()],
        "a new password or the same role keeps the sessions"
    );

    let promote = PersonUpdate {
        role: Some(Role::Admin),
        ..PersonUpdate::default()
    };
    let expected = Person {
        role: Role::Admin,
        updated_at: at(12),
        ..expected
    };
    assert_eq!(
        ok(store.update_person(ann.id, promote, at(12)).await, "update"),
        Some(expected.clone())
    );
    assert_eq!(
        all(store, at(20)).await,
        [admin.clone(), b1.clone()],
        "a new role ends the person's sessions, only theirs"
    );

    let a3 = session("a3", Some(ann.id), 13, 100);
    start(store, &a3).await;
    let disable = PersonUpdate {
        disabled: Some(true),
        ..PersonUpdate::default()
    };
    let expected = Person {
        disabled: true,
        updated_at: at(14),
        ..expected
    };
    assert_eq!(
        ok(store.update_person(ann.id, disable, at(14)).await, "update"),
        Some(expected.clone())
    );
    assert_eq!(
        ok(store.sessions_of(ann.id, at(20)).await, "sessions_of"),
        []
    );
    assert_eq!(all(store, at(20)).await, [admin, b1]);
    assert_eq!(
        ok(store.person(ann.id).await, "person"),
        Some(expected.clone())
    );

    let enable = PersonUpdate {
        disabled: Some(false),
        ..PersonUpdate::default()
    };
    let enabled = ok(store.update_person(ann.id, enable, at(15)).await, "update");
    assert_eq!(
        enabled,
        Some(Person {
            disabled: false,
            updated_at: at(15),
            ..expected
        })
    );
    let unknown = ok(
        store
            .update_person(person_id(9), PersonUpdate::default(), at(16))
            .await,
        "update",
    );
    assert_eq!(unknown, None);
    assert_eq!(people(store).await.len(), 2);
}

/// A link signs its person in once, only before it expires (at `expires_at` it is gone); a
/// taken or expired link is gone for good; a taken hash is a conflict and an unknown person
/// not found.
pub async fn sign_in_links_work_once_before_expiry<S: PeopleStore + ?Sized>(store: &S) {
    let ann = person(1, "ann@example.com", Role::Viewer);
    add(store, &ann).await;
    ok(
        store.create_sign_in_link(link("h1", ann.id, 60)).await,
        "create_sign_in_link",
    );
    ok(
        store.create_sign_in_link(link("h2", ann.id, 10)).await,
        "create_sign_in_link",
    );
    let again = store.create_sign_in_link(link("h1", ann.id, 90)).await;
    assert!(
        matches!(again, Err(StoreError::Conflict { .. })),
        "{again:?}"
    );
    let nobody = store
        .create_sign_in_link(link("h3", person_id(9), 60))
        .await;
    assert!(
        matches!(nobody, Err(StoreError::NotFound { .. })),
        "{nobody:?}"
    );

    let take = |hash, now| store.take_sign_in_link(hash, now);
    assert_eq!(ok(take("h1", at(59)).await, "take"), Some(ann.id));
    assert_eq!(ok(take("h1", at(1)).await, "take"), None, "taken twice");
    assert_eq!(ok(take("h2", at(10)).await, "take"), None, "expired");
    assert_eq!(
        ok(take("h2", at(1)).await, "take"),
        None,
        "an expired link is gone when tried"
    );
    assert_eq!(ok(take("h3", at(1)).await, "take"), None, "unknown");
}

/// Of two takes of one link at the same time, exactly one gets the person.
pub async fn concurrent_takes_of_a_link_have_one_winner<S: PeopleStore + ?Sized>(store: &S) {
    let ann = person(1, "ann@example.com", Role::Viewer);
    add(store, &ann).await;
    for round in 0..10 {
        let hash = format!("race-{round}");
        ok(
            store.create_sign_in_link(link(&hash, ann.id, 60)).await,
            "create_sign_in_link",
        );
        let (a, b) = both(
            store.take_sign_in_link(&hash, at(1)),
            store.take_sign_in_link(&hash, at(1)),
        )
        .await;
        let mut winners = [ok(a, "take"), ok(b, "take")];
        winners.sort();
        assert_eq!(winners, [None, Some(ann.id)], "round {round}");
    }
}

/// Sessions are found until they expire, listed per person and all (newest first, the admin
/// token's with the others), deleted one by one, per person, or once expired.
pub async fn sessions_expire_are_listed_and_deleted<S: PeopleStore + ?Sized>(store: &S) {
    let ann = person(1, "ann@example.com", Role::Editor);
    let bob = person(2, "bob@example.com", Role::Editor);
    add(store, &ann).await;
    add(store, &bob).await;
    let s1 = session("s1", Some(ann.id), 1, 100);
    let s2 = session("s2", Some(ann.id), 2, 50);
    let s3 = session("s3", Some(bob.id), 3, 100);
    let s4 = session("s4", None, 4, 100);
    for s in [&s1, &s2, &s3, &s4] {
        start(store, s).await;
    }
    let again = store
        .create_session(session("s1", Some(bob.id), 5, 100))
        .await;
    assert!(
        matches!(again, Err(StoreError::Conflict { .. })),
        "{again:?}"
    );
    let nobody = store
        .create_session(session("s5", Some(person_id(9)), 5, 100))
        .await;
    assert!(
        matches!(nobody, Err(StoreError::NotFound { .. })),
        "{nobody:?}"
    );

    let find = |hash, now| store.session(hash, now);
    assert_eq!(ok(find("s1", at(10)).await, "session"), Some(s1.clone()));
    assert_eq!(ok(find("s2", at(49)).await, "session"), Some(s2.clone()));
    assert_eq!(ok(find("s2", at(50)).await, "session"), None, "expired");
    assert_eq!(ok(find("s4", at(10)).await, "session"), Some(s4.clone()));
    assert_eq!(ok(find("nope", at(10)).await, "session"), None);

    let of = |id, now| store.sessions_of(id, now);
    assert_eq!(
        ok(of(ann.id, at(10)).await, "sessions_of"),
        [s2.clone(), s1.clone()]
    );
    assert_eq!(
        ok(of(ann.id, at(60)).await, "sessions_of"),
        std::slice::from_ref(&s1)
    );
    assert_eq!(
        all(store, at(10)).await,
        [s4.clone(), s3.clone(), s2.clone(), s1.clone()]
    );
    assert_eq!(
        all(store, at(60)).await,
        [s4.clone(), s3.clone(), s1.clone()]
    );

    assert_eq!(
        ok(
            store.delete_expired_sessions(at(60)).await,
            "delete_expired"
        ),
        1
    );
    assert_eq!(
        ok(find("s2", at(0)).await, "session"),
        None,
        "an expired session is deleted"
    );
    assert!(ok(store.delete_session("s3").await, "delete_session"));
    assert!(!ok(store.delete_session("s3").await, "delete_session"));
    assert_eq!(
        ok(store.delete_sessions_of(ann.id).await, "delete_sessions_of"),
        1
    );
    assert_eq!(
        ok(store.delete_sessions_of(ann.id).await, "delete_sessions_of"),
        0
    );
    assert_eq!(all(store, at(10)).await, [s4]);
}

/// The first candidate is the console secret for every later caller.
pub async fn console_secret_is_the_first_candidate<S: PeopleStore + ?Sized>(store: &S) {
    assert_eq!(ok(store.console_secret([1; 32]).await, "secret"), [1; 32]);
    assert_eq!(ok(store.console_secret([2; 32]).await, "secret"), [1; 32]);
    assert_eq!(ok(store.console_secret([3; 32]).await, "secret"), [1; 32]);
}

/// Two first callers at the same time get the same secret, one of their candidates, and so
/// does every caller after them.
pub async fn concurrent_first_console_secrets_agree<S: PeopleStore + ?Sized>(store: &S) {
    let (a, b) = both(store.console_secret([4; 32]), store.console_secret([5; 32])).await;
    let (a, b) = (ok(a, "secret"), ok(b, "secret"));
    assert_eq!(a, b);
    assert!(a == [4; 32] || a == [5; 32], "{a:?}");
    assert_eq!(ok(store.console_secret([6; 32]).await, "secret"), a);
}

/// Issue 65: a session is read as its person is now. A session written with a role the person
/// no longer has (a sign-in that raced a demotion) acts with the person's current role, in
/// every look-up and list; a session cannot be written for a disabled person (a sign-in that
/// raced a disable), and nothing is stored then.
pub async fn sessions_follow_the_person_now<S: PeopleStore + ?Sized>(store: &S) {
    let ann = person(1, "ann@example.com", Role::Admin);
    add(store, &ann).await;
    let demote = PersonUpdate {
        role: Some(Role::Viewer),
        ..PersonUpdate::default()
    };
    ok(store.update_person(ann.id, demote, at(2)).await, "update");
    // The racing sign-in read ann as an admin before the demotion and writes now.
    let stale = SessionRecord {
        role: Role::Admin,
        ..session("a1", Some(ann.id), 3, 100)
    };
    start(store, &stale).await;
    let as_now = SessionRecord {
        role: Role::Viewer,
        ..stale.clone()
    };
    assert_eq!(
        ok(store.session("a1", at(10)).await, "session"),
        Some(as_now.clone()),
        "the session acts with the role ann has now"
    );
    assert_eq!(
        ok(store.sessions_of(ann.id, at(10)).await, "sessions_of"),
        std::slice::from_ref(&as_now)
    );
    assert_eq!(all(store, at(10)).await, std::slice::from_ref(&as_now));

    let disable = PersonUpdate {
        disabled: Some(true),
        ..PersonUpdate::default()
    };
    ok(store.update_person(ann.id, disable, at(11)).await, "update");
    let late = store
        .create_session(session("a2", Some(ann.id), 12, 100))
        .await;
    assert!(
        matches!(late, Err(StoreError::Conflict { .. })),
        "a disabled person gets no session: {late:?}"
    );
    assert_eq!(ok(store.session("a2", at(20)).await, "session"), None);
    assert_eq!(
        ok(store.sessions_of(ann.id, at(20)).await, "sessions_of"),
        []
    );
    assert_eq!(all(store, at(20)).await, []);
    // The admin token's session has no person and is read as written.
    let token = session("t1", None, 13, 100);
    start(store, &token).await;
    assert_eq!(
        ok(store.session("t1", at(20)).await, "session"),
        Some(token)
    );
}

/// Issue 65: a link can be looked at without taking it: its person before it expires, nobody
/// at or after `expires_at` or for an unknown hash, and the link still works once after.
pub async fn sign_in_links_are_read_without_taking_them<S: PeopleStore + ?Sized>(store: &S) {
    let ann = person(1, "ann@example.com", Role::Viewer);
    add(store, &ann).await;
    ok(
        store.create_sign_in_link(link("h1", ann.id, 60)).await,
        "create_sign_in_link",
    );
    let read = |hash, now| store.sign_in_link(hash, now);
    assert_eq!(ok(read("h1", at(59)).await, "read"), Some(ann.id));
    assert_eq!(
        ok(read("h1", at(59)).await, "read"),
        Some(ann.id),
        "not taken"
    );
    assert_eq!(ok(read("h1", at(60)).await, "read"), None, "expired");
    assert_eq!(ok(read("nope", at(1)).await, "read"), None, "unknown");
    assert_eq!(
        ok(store.take_sign_in_link("h1", at(59)).await, "take"),
        Some(ann.id)
    );
    assert_eq!(ok(read("h1", at(1)).await, "read"), None, "taken");
}
