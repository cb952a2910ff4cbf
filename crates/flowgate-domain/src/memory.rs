//! An in-memory implementation of the storage ports: the reference the port contract suite
//! runs against beside the SQLite and PostgreSQL adapters, and a store for embedders' tests.
//! It keeps everything in a mutex; nothing is durable.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use time::OffsetDateTime;

use crate::catalog::CatalogData;
use crate::events::AnalyticsEvent;
use crate::ids::{
    AppId, ChangeId, DeadLetterId, EventId, ExperimentId, KeyId, PersonId, WorkspaceId,
};
use crate::keys::KeyRecord;
use crate::people::{
    normalize_email, AuditAction, AuditEntry, AuditQuery, ChangeDecision, ChangeRecord,
    ChangeState, NewAuditEntry, Person, PersonUpdate, SessionRecord, SignInLink,
};
use crate::ports::{
    AppendOutcome, AuditLog, BoxFuture, CatalogSource, ChangeStore, DeadLetter, DeadLetterStore,
    EventStore, KeyStore, PeopleStore, ResultsSource, StickyStore, StoreError,
};
use crate::results::{ResultsData, ResultsQuery};
use crate::sticky::{StickyDoc, StickyDocs, StickyId, StickyWrite};

#[derive(Debug, Default)]
struct State {
    revision: u64,
    catalog: CatalogData,
    keys: Vec<KeyRecord>,
    events: Vec<AnalyticsEvent>,
    /// Event ids are unique per app (D25).
    event_ids: HashSet<(AppId, EventId)>,
    /// In id order (ids are UUIDv7: the order they came).
    dead_letters: Vec<DeadLetter>,
    /// Sticky assignment documents (D23) by app and identifier.
    sticky: BTreeMap<(AppId, StickyId), BTreeMap<String, String>>,
    /// Store notifications (D30), in the order they came.
    notifications: Vec<crate::store_notifications::StoreNotification>,
    /// The console's people (D28) by id.
    people: BTreeMap<PersonId, Person>,
    /// Sign-in links by token hash.
    sign_in_links: BTreeMap<String, SignInLink>,
    /// Console sessions by id hash.
    sessions: BTreeMap<String, SessionRecord>,
    /// The console's signing key, once stored.
    console_secret: Option<[u8; 32]>,
    /// The audit log, in id order.
    audit: Vec<AuditEntry>,
    /// The id of the last audit entry appended (ids are never used twice).
    last_audit_id: i64,
    /// Proposed catalog changes by id.
    changes: BTreeMap<ChangeId, ChangeRecord>,
    /// Rollouts (D29) by id.
    rollouts: BTreeMap<crate::ids::RolloutId, crate::rollouts::Rollout>,
    /// Leases: holder and expiry by name.
    leases: BTreeMap<String, (String, OffsetDateTime)>,
    /// The catalog writes' history, oldest first.
    history: Vec<crate::ports::ImportRecord>,
}

/// In-memory catalog, key and event storage.
#[derive(Debug, Default)]
pub struct InMemoryStore {
    state: Mutex<State>,
}

impl InMemoryStore {
    /// An empty store at revision 0.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent data (every update is one
        // assignment), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces the catalog (workspaces and apps; keys are managed through [`KeyStore`]) and
    /// bumps the revision.
    pub fn set_catalog(&self, mut data: CatalogData) {
        let mut state = self.lock();
        data.api_keys.clear();
        state.catalog = data;
        state.revision += 1;
    }

    /// Every stored event, in insertion order.
    pub fn events(&self) -> Vec<AnalyticsEvent> {
        self.lock().events.clone()
    }

    /// Every dead letter, oldest first.
    pub fn dead_letters(&self) -> Vec<DeadLetter> {
        self.lock().dead_letters.clone()
    }
}

impl CatalogSource for InMemoryStore {
    fn load_catalog(&self) -> BoxFuture<'_, Result<CatalogData, StoreError>> {
        let state = self.lock();
        let mut data = state.catalog.clone();
        data.revision = state.revision;
        data.api_keys = state.keys.clone();
        Box::pin(std::future::ready(Ok(data)))
    }

    fn revision(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        let revision = self.lock().revision;
        Box::pin(std::future::ready(Ok(revision)))
    }

    /// Resolves at once with the current revision: without a timer there is nothing to wait
    /// with, which the port allows (callers pace their own polling).
    fn wait_for_change(
        &self,
        _known: u64,
        _max_wait: Duration,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.revision()
    }
}

/// The in-memory catalog write, the database store's upsert on values: workspaces, apps, flows
/// and versions by id and placements by key are added or updated, a placement's rules replaced,
/// nothing absent from the write removed; new keys are added and stored ones kept.
impl crate::ports::CatalogWriter for InMemoryStore {
    fn write_catalog(
        &self,
        base: u64,
        data: CatalogData,
        record: crate::ports::CatalogRecord,
    ) -> BoxFuture<'_, Result<u64, crate::ports::CatalogWriteError>> {
        use crate::ports::CatalogWriteError;
        let mut state = self.lock();
        if state.revision != base {
            let current = state.revision;
            return ready(Err(CatalogWriteError::Stale { base, current }));
        }
        let after = base + 1;
        if let Some(moved) = state.record_refused(&record) {
            return ready(Err(moved));
        }
        for workspace in data.workspaces {
            match state
                .catalog
                .workspaces
                .iter_mut()
                .find(|w| w.id == workspace.id)
            {
                Some(stored) => upsert_workspace(stored, workspace),
                None => state.catalog.workspaces.push(workspace),
            }
        }
        for key in data.api_keys {
            if !state.keys.iter().any(|k| k.id == key.id) {
                state.keys.push(key);
            }
        }
        state.revision = after;
        state.keep_record(record, base, after);
        ready(Ok(after))
    }

    fn catalog_history(
        &self,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<crate::ports::ImportRecord>, StoreError>> {
        let history = self
            .lock()
            .history
            .iter()
            .rev()
            .take(limit)
            .cloned()
            .collect();
        ready(Ok(history))
    }
}

/// `new` written over `stored` (same id): its name, and each of its apps upserted.
fn upsert_workspace(
    stored: &mut crate::catalog::WorkspaceData,
    new: crate::catalog::WorkspaceData,
) {
    stored.name = new.name;
    for app in new.apps {
        match stored.apps.iter_mut().find(|a| a.id == app.id) {
            Some(old) => upsert_app(old, app),
            None => stored.apps.push(app),
        }
    }
}

/// `new` written over `stored` (same id): its settings, its flows upserted by id, its
/// placements by key (each given placement whole: its rules replaced).
fn upsert_app(stored: &mut crate::catalog::AppData, mut new: crate::catalog::AppData) {
    let flows = std::mem::replace(&mut new.flows, std::mem::take(&mut stored.flows));
    let placements = std::mem::replace(&mut new.placements, std::mem::take(&mut stored.placements));
    *stored = new;
    for mut flow in flows {
        match stored.flows.iter_mut().find(|f| f.id == flow.id) {
            Some(old) => {
                let versions =
                    std::mem::replace(&mut flow.versions, std::mem::take(&mut old.versions));
                *old = flow;
                for version in versions {
                    match old.versions.iter_mut().find(|v| v.id == version.id) {
                        Some(v) => *v = version,
                        None => old.versions.push(version),
                    }
                }
            }
            None => stored.flows.push(flow),
        }
    }
    for placement in placements {
        match stored
            .placements
            .iter_mut()
            .find(|p| p.key == placement.key)
        {
            Some(old) => *old = placement,
            None => stored.placements.push(placement),
        }
    }
}

impl State {
    /// Whether step `index` of rollout `id` may be recorded: not recorded yet, and the rollout
    /// in the state `change` moves it from.
    fn can_step(
        &self,
        id: crate::ids::RolloutId,
        index: u32,
        change: Option<&crate::ports::StateChange>,
    ) -> bool {
        self.rollouts.get(&id).is_some_and(|r| {
            !r.applied.iter().any(|s| s.index == index)
                && change.is_none_or(|(from, _, _)| r.state == *from)
        })
    }

    /// Records `step` of rollout `id` and its change of state, when [`State::can_step`].
    fn step_rollout(
        &mut self,
        id: crate::ids::RolloutId,
        step: crate::rollouts::AppliedStep,
        change: Option<crate::ports::StateChange>,
    ) -> bool {
        if !self.can_step(id, step.index, change.as_ref()) {
            return false;
        }
        let Some(r) = self.rollouts.get_mut(&id) else {
            return false;
        };
        if let Some((_, to, reason)) = change {
            r.state = to;
            r.reason = reason;
            r.updated_at = step.applied_at;
        }
        r.applied.push(step);
        r.applied.sort_by_key(|s| s.index);
        true
    }

    /// Whether rollout `id` is in state `from`.
    fn can_set_state(
        &self,
        id: crate::ids::RolloutId,
        from: crate::rollouts::RolloutState,
    ) -> bool {
        self.rollouts.get(&id).is_some_and(|r| r.state == from)
    }

    /// Moves rollout `id` from `change.0` to `change.1` at `at`, when it is in `change.0`.
    fn set_rollout_state(
        &mut self,
        id: crate::ids::RolloutId,
        (from, to, reason): crate::ports::StateChange,
        at: OffsetDateTime,
    ) -> bool {
        match self.rollouts.get_mut(&id) {
            Some(r) if r.state == from => {
                r.state = to;
                r.reason = reason;
                r.updated_at = at;
                true
            }
            _ => false,
        }
    }

    /// Why `record` cannot be kept (its change decided, its rollout moved), checked before
    /// anything is written.
    fn record_refused(
        &self,
        record: &crate::ports::CatalogRecord,
    ) -> Option<crate::ports::CatalogWriteError> {
        use crate::ports::{CatalogWriteError, RolloutWrite};
        if let Some((id, _)) = &record.decision {
            if self
                .changes
                .get(id)
                .is_none_or(|c| c.state != ChangeState::Pending)
            {
                return Some(CatalogWriteError::Decided(*id));
            }
        }
        match &record.rollout {
            Some(RolloutWrite::Start(r)) if self.rollouts.contains_key(&r.id) => Some(
                CatalogWriteError::RolloutMoved(format!("rollout {} exists", r.id)),
            ),
            Some(RolloutWrite::Step { id, step, change })
                if !self.can_step(*id, step.index, change.as_ref()) =>
            {
                Some(CatalogWriteError::step_taken(*id, step.index))
            }
            Some(RolloutWrite::State { id, change }) if !self.can_set_state(*id, change.0) => {
                Some(CatalogWriteError::state_moved(*id, change.0))
            }
            _ => None,
        }
    }

    /// Keeps what a write from `before` to `after` records ([`State::record_refused`] said
    /// it can be kept).
    fn keep_record(&mut self, record: crate::ports::CatalogRecord, before: u64, after: u64) {
        use crate::ports::RolloutWrite;
        self.history.push(crate::ports::ImportRecord {
            revision: after,
            imported_at: record.at,
            sha256: record.sha256.clone(),
            file: record.file.clone(),
            summary: record.summary,
        });
        if let Some(mut audit) = record.audit {
            audit.revision_before = Some(before);
            audit.revision_after = Some(after);
            self.last_audit_id += 1;
            let entry = AuditEntry::new(self.last_audit_id, audit);
            self.audit.push(entry);
        }
        if let Some((id, mut decision)) = record.decision {
            decision.applied_revision = Some(after);
            if let Some(change) = self.changes.get_mut(&id) {
                *change = change.clone().decided(decision);
            }
        }
        match record.rollout {
            Some(RolloutWrite::Start(mut rollout)) => {
                for step in &mut rollout.applied {
                    step.revision = after;
                }
                self.rollouts.insert(rollout.id, *rollout);
            }
            Some(RolloutWrite::Step {
                id,
                mut step,
                change,
            }) => {
                step.revision = after;
                self.step_rollout(id, step, change);
            }
            Some(RolloutWrite::State { id, change }) => {
                self.set_rollout_state(id, change, record.at);
            }
            None => {}
        }
    }
}

impl KeyStore for InMemoryStore {
    fn insert_key(&self, record: KeyRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        let mut state = self.lock();
        let result = if state
            .keys
            .iter()
            .any(|k| k.digest == record.digest || k.id == record.id)
        {
            Err(StoreError::Conflict {
                detail: format!("key {} already exists", record.id),
            })
        } else {
            state.keys.push(record);
            state.revision += 1;
            Ok(())
        };
        Box::pin(std::future::ready(result))
    }

    fn revoke_key(
        &self,
        id: KeyId,
        at: OffsetDateTime,
    ) -> BoxFuture<'_, Result<KeyRecord, StoreError>> {
        let mut state = self.lock();
        let mut changed = false;
        let result = match state.keys.iter_mut().find(|k| k.id == id) {
            Some(key) => {
                if key.revoked_at.is_none() {
                    key.revoked_at = Some(at);
                    changed = true;
                }
                Ok(key.clone())
            }
            None => Err(StoreError::NotFound {
                entity: "API key",
                which: id.to_string(),
            }),
        };
        // Like the SQL stores: only a write that changes something moves the revision.
        if changed {
            state.revision += 1;
        }
        Box::pin(std::future::ready(result))
    }

    fn list_keys(
        &self,
        workspace: WorkspaceId,
    ) -> BoxFuture<'_, Result<Vec<KeyRecord>, StoreError>> {
        let mut keys: Vec<KeyRecord> = self
            .lock()
            .keys
            .iter()
            .filter(|k| k.workspace_id == workspace)
            .cloned()
            .collect();
        keys.sort_by_key(|k| k.created_at);
        Box::pin(std::future::ready(Ok(keys)))
    }
}

impl EventStore for InMemoryStore {
    fn append_events<'a>(
        &'a self,
        events: &'a [AnalyticsEvent],
    ) -> BoxFuture<'a, Result<AppendOutcome, StoreError>> {
        let mut state = self.lock();
        let mut outcome = AppendOutcome::default();
        for event in events {
            if state.event_ids.insert((event.app_id, event.event_id)) {
                state.events.push(event.clone());
                outcome.inserted += 1;
            } else {
                outcome.duplicates += 1;
            }
        }
        Box::pin(std::future::ready(Ok(outcome)))
    }
}

impl ResultsSource for InMemoryStore {
    fn experiment_results<'a>(
        &'a self,
        query: &'a ResultsQuery,
    ) -> BoxFuture<'a, Result<ResultsData, StoreError>> {
        let state = self.lock();
        let data = match query.store_horizon_days {
            Some(_) => {
                let transactions: Vec<_> = state
                    .notifications
                    .iter()
                    .filter(|n| n.app_id == query.app_id)
                    .filter_map(|n| n.transaction.clone())
                    .collect();
                crate::results::aggregate_with(query, state.events.iter(), &transactions)
            }
            None => crate::results::aggregate(query, state.events.iter()),
        };
        Box::pin(std::future::ready(Ok(data)))
    }

    fn exposure_counts<'a>(
        &'a self,
        query: &'a crate::results::ExposureCountQuery,
    ) -> BoxFuture<'a, Result<std::collections::BTreeMap<ExperimentId, u64>, StoreError>> {
        let counts = crate::results::exposure_counts(query, self.lock().events.iter());
        Box::pin(std::future::ready(Ok(counts)))
    }
}

impl DeadLetterStore for InMemoryStore {
    fn add_dead_letters<'a>(
        &'a self,
        letters: &'a [DeadLetter],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut state = self.lock();
        for letter in letters {
            let same_event = letter.event_id.and_then(|id| {
                state
                    .dead_letters
                    .iter_mut()
                    .find(|l| l.event_id == Some(id) && l.app_id == letter.app_id)
            });
            match same_event {
                Some(kept) => {
                    kept.attempts = kept.attempts.saturating_add(letter.attempts);
                    kept.last_attempt_at = letter.last_attempt_at;
                    kept.error.clone_from(&letter.error);
                }
                None => {
                    let at = state.dead_letters.partition_point(|l| l.id < letter.id);
                    state.dead_letters.insert(at, letter.clone());
                }
            }
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn list_dead_letters(
        &self,
        after: Option<DeadLetterId>,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<DeadLetter>, StoreError>> {
        let state = self.lock();
        let page = state
            .dead_letters
            .iter()
            .filter(|l| after.is_none_or(|after| l.id > after))
            .take(limit)
            .cloned()
            .collect();
        Box::pin(std::future::ready(Ok(page)))
    }

    fn record_dead_letter_attempt<'a>(
        &'a self,
        id: DeadLetterId,
        error: &'a str,
        at: OffsetDateTime,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut state = self.lock();
        let result = match state.dead_letters.iter_mut().find(|l| l.id == id) {
            Some(letter) => {
                letter.attempts = letter.attempts.saturating_add(1);
                letter.last_attempt_at = at;
                error.clone_into(&mut letter.error);
                Ok(())
            }
            None => Err(StoreError::NotFound {
                entity: "dead letter",
                which: id.to_string(),
            }),
        };
        Box::pin(std::future::ready(result))
    }

    fn remove_dead_letter(&self, id: DeadLetterId) -> BoxFuture<'_, Result<bool, StoreError>> {
        let mut state = self.lock();
        let before = state.dead_letters.len();
        state.dead_letters.retain(|l| l.id != id);
        let removed = state.dead_letters.len() < before;
        Box::pin(std::future::ready(Ok(removed)))
    }

    fn count_dead_letters(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        let count = self.lock().dead_letters.len() as u64;
        Box::pin(std::future::ready(Ok(count)))
    }
}

impl StickyStore for InMemoryStore {
    fn read_sticky<'a>(
        &'a self,
        app: AppId,
        ids: &'a [StickyId],
    ) -> BoxFuture<'a, Result<StickyDocs, StoreError>> {
        let state = self.lock();
        let docs = ids
            .iter()
            .filter_map(|id| {
                // As the stores read (D26): entries that are not assignments are skipped.
                let assignments: BTreeMap<String, String> = state
                    .sticky
                    .get(&(app, id.clone()))?
                    .iter()
                    .filter(|(k, v)| crate::sticky::is_assignment(k, v))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                (!assignments.is_empty()).then(|| StickyDoc {
                    attribute_name: id.attribute_name.clone(),
                    attribute_value: id.attribute_value.clone(),
                    assignments,
                })
            })
            .collect();
        Box::pin(std::future::ready(Ok(docs)))
    }

    fn write_sticky<'a>(
        &'a self,
        writes: &'a [StickyWrite],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut state = self.lock();
        for write in writes {
            let id = StickyId {
                attribute_name: write.doc.attribute_name.clone(),
                attribute_value: write.doc.attribute_value.clone(),
            };
            state
                .sticky
                .entry((write.app_id, id))
                .or_default()
                .extend(write.doc.assignments.clone());
        }
        Box::pin(std::future::ready(Ok(())))
    }
}

impl crate::ports::NotificationStore for InMemoryStore {
    fn record_notification<'a>(
        &'a self,
        notification: &'a crate::store_notifications::StoreNotification,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let mut state = self.lock();
        let stored = state.notifications.iter().any(|n| {
            (n.app_id, n.source, &n.notification_id)
                == (
                    notification.app_id,
                    notification.source,
                    &notification.notification_id,
                )
        });
        if !stored {
            state.notifications.push(notification.clone());
        }
        Box::pin(std::future::ready(Ok(!stored)))
    }
}

/// A finished future: every in-memory operation completes under the lock.
fn ready<'a, T: Send + 'a>(value: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

/// Newest first, as the port lists sessions.
fn newest_sessions_first(sessions: &mut [SessionRecord]) {
    sessions.sort_by(|a, b| (b.created_at, &b.id_hash).cmp(&(a.created_at, &a.id_hash)));
}

/// `session` as the port reads it (issue 65): gone when its person is gone or disabled, and
/// acting with the person's role now rather than the one it was opened with.
fn as_read(people: &BTreeMap<PersonId, Person>, session: &SessionRecord) -> Option<SessionRecord> {
    let mut read = session.clone();
    if let Some(id) = session.person_id {
        let person = people.get(&id).filter(|p| !p.disabled)?;
        read.role = person.role;
    }
    Some(read)
}

impl PeopleStore for InMemoryStore {
    fn add_person(&self, mut person: Person) -> BoxFuture<'_, Result<(), StoreError>> {
        let mut state = self.lock();
        let result = match normalize_email(&person.email) {
            Err(e) => Err(StoreError::Unstorable {
                detail: e.to_string(),
            }),
            Ok(email) if state.people.values().any(|p| p.email == email) => {
                Err(StoreError::Conflict {
                    detail: format!("a person with the email `{email}` exists"),
                })
            }
            Ok(_) if state.people.contains_key(&person.id) => Err(StoreError::Conflict {
                detail: format!("person {} exists", person.id),
            }),
            Ok(email) => {
                person.email = email;
                state.people.insert(person.id, person);
                Ok(())
            }
        };
        ready(result)
    }

    fn person(&self, id: PersonId) -> BoxFuture<'_, Result<Option<Person>, StoreError>> {
        ready(Ok(self.lock().people.get(&id).cloned()))
    }

    fn person_by_email<'a>(
        &'a self,
        email: &'a str,
    ) -> BoxFuture<'a, Result<Option<Person>, StoreError>> {
        let found = normalize_email(email).ok().and_then(|email| {
            self.lock()
                .people
                .values()
                .find(|p| p.email == email)
                .cloned()
        });
        ready(Ok(found))
    }

    fn list_people(&self) -> BoxFuture<'_, Result<Vec<Person>, StoreError>> {
        let mut people: Vec<Person> = self.lock().people.values().cloned().collect();
        people.sort_by(|a, b| a.email.cmp(&b.email));
        ready(Ok(people))
    }

    fn update_person(
        &self,
        id: PersonId,
        update: PersonUpdate,
        at: OffsetDateTime,
    ) -> BoxFuture<'_, Result<Option<Person>, StoreError>> {
        let mut state = self.lock();
        let Some(person) = state.people.get_mut(&id) else {
            return ready(Ok(None));
        };
        let ends_sessions =
            update.disabled == Some(true) || update.role.is_some_and(|role| role != person.role);
        if let Some(role) = update.role {
            person.role = role;
        }
        if let Some(disabled) = update.disabled {
            person.disabled = disabled;
        }
        if let Some(hash) = update.password_hash {
            person.password_hash = Some(hash);
        }
        person.updated_at = at;
        let person = person.clone();
        if ends_sessions {
            state.sessions.retain(|_, s| s.person_id != Some(id));
        }
        ready(Ok(Some(person)))
    }

    fn create_sign_in_link(&self, link: SignInLink) -> BoxFuture<'_, Result<(), StoreError>> {
        let mut state = self.lock();
        let result = if !state.people.contains_key(&link.person_id) {
            Err(StoreError::NotFound {
                entity: "person",
                which: link.person_id.to_string(),
            })
        } else if state.sign_in_links.contains_key(&link.token_hash) {
            Err(StoreError::Conflict {
                detail: "the sign-in link exists".to_owned(),
            })
        } else {
            state.sign_in_links.insert(link.token_hash.clone(), link);
            Ok(())
        };
        ready(result)
    }

    fn sign_in_link<'a>(
        &'a self,
        token_hash: &'a str,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<PersonId>, StoreError>> {
        let found = self
            .lock()
            .sign_in_links
            .get(token_hash)
            .filter(|link| link.expires_at > now)
            .map(|link| link.person_id);
        ready(Ok(found))
    }

    fn take_sign_in_link<'a>(
        &'a self,
        token_hash: &'a str,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<PersonId>, StoreError>> {
        let taken = self.lock().sign_in_links.remove(token_hash);
        ready(Ok(taken
            .filter(|link| link.expires_at > now)
            .map(|link| link.person_id)))
    }

    fn create_session(&self, session: SessionRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        let mut state = self.lock();
        let person = session.person_id.map(|id| (id, state.people.get(&id)));
        let result = match person {
            Some((id, None)) => Err(StoreError::NotFound {
                entity: "person",
                which: id.to_string(),
            }),
            Some((id, Some(p))) if p.disabled => Err(StoreError::Conflict {
                detail: format!("person {id} is disabled"),
            }),
            _ if state.sessions.contains_key(&session.id_hash) => Err(StoreError::Conflict {
                detail: "the session exists".to_owned(),
            }),
            _ => {
                state.sessions.insert(session.id_hash.clone(), session);
                Ok(())
            }
        };
        ready(result)
    }

    fn session<'a>(
        &'a self,
        id_hash: &'a str,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Option<SessionRecord>, StoreError>> {
        let state = self.lock();
        let found = state
            .sessions
            .get(id_hash)
            .filter(|s| s.expires_at > now)
            .and_then(|s| as_read(&state.people, s));
        ready(Ok(found))
    }

    fn sessions_of(
        &self,
        person: PersonId,
        now: OffsetDateTime,
    ) -> BoxFuture<'_, Result<Vec<SessionRecord>, StoreError>> {
        let state = self.lock();
        let mut sessions: Vec<SessionRecord> = state
            .sessions
            .values()
            .filter(|s| s.person_id == Some(person) && s.expires_at > now)
            .filter_map(|s| as_read(&state.people, s))
            .collect();
        newest_sessions_first(&mut sessions);
        ready(Ok(sessions))
    }

    fn all_sessions(
        &self,
        now: OffsetDateTime,
    ) -> BoxFuture<'_, Result<Vec<SessionRecord>, StoreError>> {
        let state = self.lock();
        let mut sessions: Vec<SessionRecord> = state
            .sessions
            .values()
            .filter(|s| s.expires_at > now)
            .filter_map(|s| as_read(&state.people, s))
            .collect();
        newest_sessions_first(&mut sessions);
        ready(Ok(sessions))
    }

    fn delete_session<'a>(&'a self, id_hash: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        ready(Ok(self.lock().sessions.remove(id_hash).is_some()))
    }

    fn delete_sessions_of(&self, person: PersonId) -> BoxFuture<'_, Result<u64, StoreError>> {
        let mut state = self.lock();
        let before = state.sessions.len();
        state.sessions.retain(|_, s| s.person_id != Some(person));
        ready(Ok((before - state.sessions.len()) as u64))
    }

    fn delete_expired_sessions(
        &self,
        now: OffsetDateTime,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        let mut state = self.lock();
        let before = state.sessions.len();
        state.sessions.retain(|_, s| s.expires_at > now);
        let deleted = (before - state.sessions.len()) as u64;
        state.sign_in_links.retain(|_, l| l.expires_at > now);
        ready(Ok(deleted))
    }

    fn console_secret(&self, candidate: [u8; 32]) -> BoxFuture<'_, Result<[u8; 32], StoreError>> {
        let secret = *self.lock().console_secret.get_or_insert(candidate);
        ready(Ok(secret))
    }
}

impl AuditLog for InMemoryStore {
    fn append_audit(&self, entry: NewAuditEntry) -> BoxFuture<'_, Result<AuditEntry, StoreError>> {
        let mut state = self.lock();
        state.last_audit_id += 1;
        let entry = AuditEntry::new(state.last_audit_id, entry);
        state.audit.push(entry.clone());
        ready(Ok(entry))
    }

    fn list_audit<'a>(
        &'a self,
        query: &'a AuditQuery,
    ) -> BoxFuture<'a, Result<Vec<AuditEntry>, StoreError>> {
        let entries = self
            .lock()
            .audit
            .iter()
            .rev()
            .filter(|e| query.matches(e))
            .take(query.limit)
            .cloned()
            .collect();
        ready(Ok(entries))
    }

    fn count_audit<'a>(
        &'a self,
        action: AuditAction,
        target: &'a str,
        since: OffsetDateTime,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        let count = self
            .lock()
            .audit
            .iter()
            .filter(|e| e.action == action && e.target.as_deref() == Some(target) && e.at >= since)
            .count();
        ready(Ok(count as u64))
    }

    fn delete_audit_before(
        &self,
        cutoff: OffsetDateTime,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        let mut state = self.lock();
        let before = state.audit.len();
        state.audit.retain(|e| e.at >= cutoff);
        ready(Ok((before - state.audit.len()) as u64))
    }
}

impl ChangeStore for InMemoryStore {
    fn insert_change(&self, change: ChangeRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        let mut state = self.lock();
        let id = change.id;
        let result = match state.changes.entry(id) {
            std::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert(change);
                Ok(())
            }
            std::collections::btree_map::Entry::Occupied(_) => Err(StoreError::Conflict {
                detail: format!("change {id} exists"),
            }),
        };
        ready(result)
    }

    fn change(&self, id: ChangeId) -> BoxFuture<'_, Result<Option<ChangeRecord>, StoreError>> {
        ready(Ok(self.lock().changes.get(&id).cloned()))
    }

    fn list_changes(
        &self,
        state: Option<ChangeState>,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<ChangeRecord>, StoreError>> {
        let mut changes: Vec<ChangeRecord> = self
            .lock()
            .changes
            .values()
            .filter(|c| state.is_none_or(|state| c.state == state))
            .cloned()
            .collect();
        changes.sort_by_key(|c| std::cmp::Reverse((c.created_at, c.id)));
        changes.truncate(limit);
        ready(Ok(changes))
    }

    fn due_changes(
        &self,
        now: OffsetDateTime,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<ChangeRecord>, StoreError>> {
        let mut due: Vec<(OffsetDateTime, ChangeRecord)> = self
            .lock()
            .changes
            .values()
            .filter(|c| c.state == ChangeState::Pending)
            .filter_map(|c| c.apply_at.filter(|at| *at <= now).map(|at| (at, c.clone())))
            .collect();
        due.sort_by_key(|(at, c)| (*at, c.id));
        due.truncate(limit);
        ready(Ok(due.into_iter().map(|(_, c)| c).collect()))
    }

    fn decide_change(
        &self,
        id: ChangeId,
        decision: ChangeDecision,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        if decision.state == ChangeState::Pending {
            return ready(Err(StoreError::Unstorable {
                detail: format!("change {id} cannot be decided to be pending"),
            }));
        }
        let mut state = self.lock();
        let decided = match state.changes.get_mut(&id) {
            Some(change) if change.state == ChangeState::Pending => {
                *change = change.clone().decided(decision);
                true
            }
            _ => false,
        };
        ready(Ok(decided))
    }
}

impl crate::ports::RolloutStore for InMemoryStore {
    fn insert_rollout(
        &self,
        rollout: crate::rollouts::Rollout,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        let mut state = self.lock();
        let result = match state.rollouts.entry(rollout.id) {
            std::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert(rollout);
                Ok(())
            }
            std::collections::btree_map::Entry::Occupied(_) => Err(StoreError::Conflict {
                detail: format!("rollout {} exists", rollout.id),
            }),
        };
        Box::pin(std::future::ready(result))
    }

    fn rollout(
        &self,
        id: crate::ids::RolloutId,
    ) -> BoxFuture<'_, Result<Option<crate::rollouts::Rollout>, StoreError>> {
        let found = self.lock().rollouts.get(&id).cloned();
        Box::pin(std::future::ready(Ok(found)))
    }

    fn list_rollouts(
        &self,
        state: Option<crate::rollouts::RolloutState>,
    ) -> BoxFuture<'_, Result<Vec<crate::rollouts::Rollout>, StoreError>> {
        let mut listed: Vec<crate::rollouts::Rollout> = self
            .lock()
            .rollouts
            .values()
            .filter(|r| state.is_none_or(|s| r.state == s))
            .cloned()
            .collect();
        listed.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| b.id.cmp(&a.id))
        });
        Box::pin(std::future::ready(Ok(listed)))
    }

    fn apply_step(
        &self,
        id: crate::ids::RolloutId,
        step: crate::rollouts::AppliedStep,
        change: Option<crate::ports::StateChange>,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        let applied = self.lock().step_rollout(id, step, change);
        Box::pin(std::future::ready(Ok(applied)))
    }

    fn set_rollout_state(
        &self,
        id: crate::ids::RolloutId,
        change: crate::ports::StateChange,
        at: OffsetDateTime,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        let changed = self.lock().set_rollout_state(id, change, at);
        Box::pin(std::future::ready(Ok(changed)))
    }

    fn take_lease<'a>(
        &'a self,
        name: &'a str,
        holder: &'a str,
        now: OffsetDateTime,
        ttl: std::time::Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let mut state = self.lock();
        let until = now + ttl;
        let taken = match state.leases.get(name) {
            Some((other, expires)) if other != holder && *expires > now => false,
            _ => {
                state
                    .leases
                    .insert(name.to_owned(), (holder.to_owned(), until));
                true
            }
        };
        Box::pin(std::future::ready(Ok(taken)))
    }

    fn release_lease<'a>(
        &'a self,
        name: &'a str,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut state = self.lock();
        if state.leases.get(name).is_some_and(|(h, _)| h == holder) {
            state.leases.remove(name);
        }
        Box::pin(std::future::ready(Ok(())))
    }
}
