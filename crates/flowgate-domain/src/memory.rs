//! An in-memory implementation of the storage ports: the reference the port contract suite
//! runs against beside the SQLite and PostgreSQL adapters, and a store for embedders' tests.
//! It keeps everything in a mutex; nothing is durable.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use time::OffsetDateTime;

use crate::catalog::CatalogData;
use crate::events::AnalyticsEvent;
use crate::ids::{AppId, DeadLetterId, EventId, ExperimentId, KeyId, WorkspaceId};
use crate::keys::KeyRecord;
use crate::ports::{
    AppendOutcome, BoxFuture, CatalogSource, DeadLetter, DeadLetterStore, EventStore, KeyStore,
    ResultsSource, StickyStore, StoreError,
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
