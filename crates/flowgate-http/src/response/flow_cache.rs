//! The compressed `flow_schema` of each served published version, shared by every gzip
//! response that carries it.

use std::sync::{Arc, PoisonError};

use flowgate_domain::catalog::PublishedVersion;
use flowgate_domain::ids::FlowVersionId;
use flowgate_domain::Catalog;

use super::gzip::DeflatedFlow;

/// The compressed `flow_schema` of each published version, made on first use and kept while
/// the version is in a served snapshot. Entries are keyed by version id and checked against
/// the version object; a reload carries them over to the next snapshot's objects when their
/// bytes are the same ([`CompressedFlows::carry_over`]), so only new or changed versions are
/// compressed again.
#[derive(Debug, Default)]
pub struct CompressedFlows {
    entries: std::sync::RwLock<std::collections::HashMap<uuid::Uuid, Vec<DeflatedEntry>>>,
}

/// A version object a compressed schema serves (to tell snapshots apart), and it. A version id
/// has one per snapshot that served it, so two while a reload is under way.
type DeflatedEntry = (std::sync::Weak<PublishedVersion>, Arc<DeflatedFlow>);

impl CompressedFlows {
    /// The compressed schema of `version`.
    pub fn get(&self, version: &Arc<PublishedVersion>) -> Arc<DeflatedFlow> {
        let key = version.id().0;
        let current =
            |(weak, _): &&DeflatedEntry| std::ptr::eq(weak.as_ptr(), Arc::as_ptr(version));
        {
            let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(entry) = entries.get(&key).and_then(|e| e.iter().find(current)) {
                return Arc::clone(&entry.1);
            }
        }
        let deflated = Arc::new(DeflatedFlow::new(version.flow_schema().get().as_bytes()));
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        // Versions of replaced snapshots are dropped once they outnumber the live ones.
        if entries.len() >= 64 && entries.len().is_power_of_two() {
            entries.retain(|_, list| {
                list.retain(|(weak, _)| weak.strong_count() > 0);
                !list.is_empty()
            });
        }
        let list = entries.entry(key).or_default();
        list.retain(|(weak, _)| weak.strong_count() > 0);
        list.push((Arc::downgrade(version), Arc::clone(&deflated)));
        deflated
    }

    /// Called with the snapshot about to replace the served one, while the served one is
    /// still alive: every compressed version that `next` publishes with the very same
    /// `flow_schema` bytes (compared in full) serves `next`'s version object too. Without it,
    /// every reload, whatever it changed, compressed each served flow again on the request
    /// path. Returns how many were carried over.
    pub fn carry_over(&self, next: &Catalog) -> usize {
        // Compared under the read lock (requests keep reading); added under the write lock.
        let carried: Vec<(uuid::Uuid, DeflatedEntry)> = {
            let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
            entries
                .iter()
                .filter_map(|(id, list)| {
                    let new = published(next, FlowVersionId::from_uuid(*id))?;
                    let serves = |weak: &std::sync::Weak<PublishedVersion>| {
                        std::ptr::eq(weak.as_ptr(), Arc::as_ptr(&new))
                    };
                    if list.iter().any(|(weak, _)| serves(weak)) {
                        return None;
                    }
                    let same = list.iter().find_map(|(weak, deflated)| {
                        let old = weak.upgrade()?;
                        (old.flow_schema().get() == new.flow_schema().get())
                            .then(|| Arc::clone(deflated))
                    })?;
                    Some((*id, (Arc::downgrade(&new), same)))
                })
                .collect()
        };
        let n = carried.len();
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        for (id, entry) in carried {
            let list = entries.entry(id).or_default();
            list.retain(|(weak, _)| weak.strong_count() > 0);
            if !list.iter().any(|(weak, _)| weak.ptr_eq(&entry.0)) {
                list.push(entry);
            }
        }
        n
    }
}

/// The version object `catalog` publishes under `id`, if it publishes it.
fn published(catalog: &Catalog, id: FlowVersionId) -> Option<Arc<PublishedVersion>> {
    let at = catalog.flow_version(id)?;
    let version = catalog.app(at.app_id())?.flow(at.flow_id())?.published()?;
    (version.id() == id).then(|| Arc::clone(version))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::test_support::{inflate, large_schema, version};

    /// A snapshot of one app publishing `schemas` (version i of flow i, ids from 1).
    fn snapshot(schemas: &[&str]) -> Catalog {
        let id = |kind: u32, n: usize| format!("{kind:08}-0000-4000-8000-{n:012}");
        let flows: Vec<String> = schemas
            .iter()
            .enumerate()
            .map(|(i, schema)| {
                format!(
                    r#"{{"id":"{}","name":"f","published_version":1,"versions":[{{"id":"{}","version":1,"schema_version":1,"fonts":[],"flow_schema":{schema}}}]}}"#,
                    id(30_000_000, i + 1),
                    id(40_000_000, i + 1)
                )
            })
            .collect();
        let text = format!(
            r#"{{"workspaces":[{{"id":"{}","name":"w","apps":[{{"id":"{}","name":"a","media_base_url":"https://cdn.example.com/m/","icon_base_url":"https://cdn.example.com/i/","flows":[{}],"placements":[]}}]}}]}}"#,
            id(10_000_000, 1),
            id(20_000_000, 1),
            flows.join(",")
        );
        Catalog::build(serde_json::from_str(&text).unwrap()).unwrap()
    }

    fn published_at(catalog: &Catalog, n: usize) -> Arc<PublishedVersion> {
        let id = format!("40000000-0000-4000-8000-{n:012}");
        published(catalog, FlowVersionId::from_uuid(id.parse().unwrap())).unwrap()
    }

    /// A reload keeps the compressed form of every version whose bytes did not change (the
    /// same object, not compressed again), compresses a changed one afresh, and the snapshot
    /// being replaced keeps being served its own.
    #[test]
    fn a_reload_keeps_compressed_flows_whose_bytes_did_not_change() {
        let flows = CompressedFlows::default();
        let (same, old_text, new_text) = (
            large_schema("same"),
            large_schema("old"),
            large_schema("new"),
        );
        let before = snapshot(&[&same, &old_text]);
        let (same_before, changed_before) = (published_at(&before, 1), published_at(&before, 2));
        let kept = flows.get(&same_before);
        let replaced = flows.get(&changed_before);
        // The next snapshot: version 1 unchanged, version 2 republished with other bytes
        // (immutable versions make that an import mistake, but it must not serve stale bytes).
        let after = snapshot(&[&same, &new_text]);
        assert_eq!(flows.carry_over(&after), 1);
        assert_eq!(flows.carry_over(&after), 0, "already carried");
        let (same_after, changed_after) = (published_at(&after, 1), published_at(&after, 2));
        assert!(!Arc::ptr_eq(&same_before, &same_after), "a new object");
        assert!(
            Arc::ptr_eq(&flows.get(&same_after), &kept),
            "not compressed again"
        );
        let fresh = flows.get(&changed_after);
        assert!(!Arc::ptr_eq(&fresh, &replaced));
        assert_eq!(inflate(&fresh), new_text);
        // In-flight requests of the replaced snapshot still get theirs.
        assert!(Arc::ptr_eq(&flows.get(&same_before), &kept));
        assert!(Arc::ptr_eq(&flows.get(&changed_before), &replaced));
        assert_eq!(inflate(&flows.get(&changed_before)), old_text);
        // Once it is gone, the next reload carries both from the snapshot now served.
        drop((before, same_before, changed_before));
        let again = snapshot(&[&same, &new_text]);
        assert_eq!(flows.carry_over(&again), 2);
    }

    /// The same version object reuses its compressed schema; a new snapshot's version with
    /// the same id (a re-import may change it) is compressed afresh.
    #[test]
    fn deflated_flows_follow_the_served_version_object() {
        let flows = CompressedFlows::default();
        let old = version(r#"{"screens":["old"]}"#);
        let first = flows.get(&old);
        assert!(Arc::ptr_eq(&first, &flows.get(&old)), "reused");
        assert_eq!(inflate(&first), r#"{"screens":["old"]}"#);
        let new = version(r#"{"screens":["new"]}"#);
        assert_eq!(inflate(&flows.get(&new)), r#"{"screens":["new"]}"#);
    }
}
