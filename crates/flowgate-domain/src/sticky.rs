//! Sticky assignment (D23): GrowthBook's sticky bucketing, the decision part. A user's stored
//! assignments are kept per identifier, as GrowthBook's assignment documents
//! (`{attributeName, attributeValue, assignments: {"<experiment key>__<bucket version>":
//! "<variant key>"}}`), and looked up before an experiment buckets anyone:
//!
//! - an assignment of the experiment's current bucket version whose variant still exists keeps
//!   the user in that variant, whatever the weights, coverage or audience now say;
//! - any assignment of a version below the experiment's `min_bucket_version` excludes the user
//!   (the operator stopped enrolment of earlier participants);
//! - assignments of other versions are ignored: the user is bucketed again and the new
//!   assignment is added beside them.
//!
//! The document of the hash attribute's value wins over the fallback attribute's on the same
//! key; a new assignment is always recorded in the document of the attribute that was hashed.
//! Reading and writing the documents is the adapters' (a port); this module only decides, on
//! the documents it is given, so resolve stays a pure function of its inputs.
//!
//! # Versions
//!
//! The stored documents outlive every process (D26). Their layout, the same in every adapter,
//! is version [`STICKY_FORMAT`]; each adapter's module documentation says how it lays a
//! document out (Redis: one hash, `flowgate_redis::store`; SQL: rows of `sticky_assignments`,
//! `flowgate_store::sticky`), and golden samples are in `formats/flowgate.sticky/v<N>/`.
//!
//! | version | written by | what changed |
//! |---|---|---|
//! | 1 | 0.1.0 and later | the first: per (app, attribute name, value), entries assignment key `<experiment key>__<bucket version>` → variant key |
//!
//! A reader keeps only the entries of the form it knows ([`is_assignment`]: a key
//! `<experiment key>__<non-negative integer>`, a non-empty variant key) and skips any other
//! entry of a document instead of failing the read, so a later version may add entries of
//! another form (metadata such as a write time) beside the assignments without a new version:
//! this release keeps reading the assignments and writes only assignments. Changing the
//! assignment key, the variant key or the document's identity is a new version, and must keep
//! the stored assignments readable: losing them would bucket every user again on upgrade.

use std::collections::BTreeMap;

use crate::ids::AppId;

/// One identifier's stored assignments: GrowthBook's assignment document.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StickyDoc {
    /// The attribute the identifier is a value of (`user_id`, or a fallback attribute).
    pub attribute_name: String,
    /// Its value.
    pub attribute_value: String,
    /// `"<experiment key>__<bucket version>"` to the variant's key.
    pub assignments: BTreeMap<String, String>,
}

/// The documents known for one request, at most one per identifier (attribute name and value),
/// in identifier order.
///
/// A request has one or two (the hash attribute's and a fallback attribute's), so they are kept
/// in a sorted vector: a B-tree map's node of these 72-byte documents is 1,072 bytes, more than
/// the allocator serves from its per-thread cache (P26 in the project's decisions), and resolve
/// builds one for every sticky request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StickyDocs {
    docs: Vec<StickyDoc>,
}

impl StickyDocs {
    /// No documents.
    pub const fn new() -> Self {
        Self { docs: Vec::new() }
    }

    /// The document of `attribute_name` = `attribute_value`, if known.
    pub fn get(&self, attribute_name: &str, attribute_value: &str) -> Option<&StickyDoc> {
        self.position(attribute_name, attribute_value)
            .ok()
            .map(|i| &self.docs[i])
    }

    /// Adds `doc`, replacing the document of the same identifier (returned).
    pub fn insert(&mut self, doc: StickyDoc) -> Option<StickyDoc> {
        match self.position(&doc.attribute_name, &doc.attribute_value) {
            Ok(i) => Some(std::mem::replace(&mut self.docs[i], doc)),
            Err(i) => {
                self.docs.insert(i, doc);
                None
            }
        }
    }

    /// The assignments of the document of `attribute_name` = `attribute_value`, the document
    /// added without assignments when missing: for building documents an assignment at a
    /// time. Only the assignments are handed out, so the documents stay in identifier order.
    pub fn assignments_mut(
        &mut self,
        attribute_name: &str,
        attribute_value: &str,
    ) -> &mut BTreeMap<String, String> {
        let i = match self.position(attribute_name, attribute_value) {
            Ok(i) => i,
            Err(i) => {
                self.docs.insert(
                    i,
                    StickyDoc {
                        attribute_name: attribute_name.to_owned(),
                        attribute_value: attribute_value.to_owned(),
                        assignments: BTreeMap::new(),
                    },
                );
                i
            }
        };
        &mut self.docs[i].assignments
    }

    /// The documents, in identifier order.
    pub fn iter(&self) -> std::slice::Iter<'_, StickyDoc> {
        self.docs.iter()
    }

    /// How many documents.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Where the document of the identifier is (`Ok`) or would go (`Err`).
    fn position(&self, attribute_name: &str, attribute_value: &str) -> Result<usize, usize> {
        self.docs.binary_search_by(|d| {
            (d.attribute_name.as_str(), d.attribute_value.as_str())
                .cmp(&(attribute_name, attribute_value))
        })
    }
}

impl FromIterator<StickyDoc> for StickyDocs {
    /// The documents; of two with the same identifier, the later is kept.
    fn from_iter<I: IntoIterator<Item = StickyDoc>>(iter: I) -> Self {
        let mut docs = Self::new();
        for doc in iter {
            docs.insert(doc);
        }
        docs
    }
}

impl IntoIterator for StickyDocs {
    type Item = StickyDoc;
    type IntoIter = std::vec::IntoIter<StickyDoc>;

    fn into_iter(self) -> Self::IntoIter {
        self.docs.into_iter()
    }
}

impl<'a> IntoIterator for &'a StickyDocs {
    type Item = &'a StickyDoc;
    type IntoIter = std::slice::Iter<'a, StickyDoc>;

    fn into_iter(self) -> Self::IntoIter {
        self.docs.iter()
    }
}

/// One identifier whose document a resolve reads: an attribute's name and the request's value
/// of it (owned: it crosses the port).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StickyId {
    /// The attribute (`user_id`, or an experiment's `fallback_attribute`).
    pub attribute_name: String,
    /// The request's value of it.
    pub attribute_value: String,
}

/// A document to store for an app: its assignments are merged into what is stored (an
/// assignment key already stored takes the new variant, other stored keys are kept), so
/// replicas writing the same user's documents never erase each other's assignments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StickyWrite {
    /// The app whose experiments the assignments are of (documents are kept per app).
    pub app_id: AppId,
    /// The document.
    pub doc: StickyDoc,
}

/// The version of the stored assignment documents this release writes and reads (see the
/// module's Versions).
pub const STICKY_FORMAT: u32 = 1;

/// Whether a stored entry `key` → `variant` is an assignment of version [`STICKY_FORMAT`]: `key`
/// is `<experiment key>__<bucket version>` (a non-empty experiment key, the version decimal
/// digits of a `u32`) and `variant` a non-empty variant key. Adapters skip any other entry of
/// a stored document when they read it (D26: what a later version added is left alone).
pub fn is_assignment(key: &str, variant: &str) -> bool {
    let Some((experiment, version)) = key.rsplit_once("__") else {
        return false;
    };
    !experiment.is_empty()
        && !variant.is_empty()
        && !version.is_empty()
        && version.bytes().all(|b| b.is_ascii_digit())
        && version.parse::<u32>().is_ok()
}

/// The key of an experiment's assignment in a document: `key__version`.
pub fn assignment_key(experiment_key: &str, bucket_version: u32) -> String {
    format!("{experiment_key}__{bucket_version}")
}

/// An identifier: an attribute's name and the request's value of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identifier<'a> {
    /// The attribute.
    pub name: &'a str,
    /// Its value.
    pub value: &'a str,
}

/// What sticky bucketing needs to know of an experiment.
#[derive(Clone, Copy, Debug)]
pub struct StickyExperiment<'a> {
    /// The experiment's key in the documents.
    pub key: &'a str,
    /// The current bucket version: raising it buckets everyone again.
    pub bucket_version: u32,
    /// Assignments of versions below it exclude their users.
    pub min_bucket_version: u32,
    /// The variants' keys, in order.
    pub variant_keys: &'a [String],
}

/// What the stored assignments say about a user and an experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StickyLookup {
    /// Nothing applies: bucket the user as without sticky bucketing.
    None,
    /// The user keeps the variant at this index.
    Variant(usize),
    /// The user has an assignment of a version below `min_bucket_version`: not in the
    /// experiment.
    Blocked,
}

/// The version of `assignment_key` if it is an assignment of `experiment_key`
/// (`<experiment_key>__<version>`, the version in canonical decimal as GrowthBook writes it).
fn assignment_version(assignment_key: &str, experiment_key: &str) -> Option<u32> {
    let digits = assignment_key
        .strip_prefix(experiment_key)?
        .strip_prefix("__")?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    canonical.then(|| digits.parse().ok()).flatten()
}

/// The document of `id` among `docs`.
fn find<'d>(docs: &'d StickyDocs, id: Identifier<'_>) -> Option<&'d StickyDoc> {
    docs.get(id.name, id.value)
}

/// The variant key `doc` stores for `experiment`'s current bucket version, and whether it has
/// an assignment of a version below `min_bucket_version`.
fn scan<'d>(
    doc: Option<&'d StickyDoc>,
    experiment: &StickyExperiment<'_>,
) -> (Option<&'d str>, bool) {
    let mut current = None;
    let mut blocked = false;
    for (key, variant) in doc.into_iter().flat_map(|d| &d.assignments) {
        match assignment_version(key, experiment.key) {
            Some(v) if v == experiment.bucket_version => current = Some(variant.as_str()),
            Some(v) if v < experiment.min_bucket_version => blocked = true,
            _ => {}
        }
    }
    (current, blocked)
}

/// Looks `experiment` up in `docs` for the user whose hash attribute is `primary` (its value
/// may be empty: then only the fallback can match) and whose fallback attribute is `fallback`
/// (when the experiment has one and the request a value). The hash attribute's document wins
/// over the fallback's on the same assignment. Allocates nothing: the documents' assignments
/// are scanned for the experiment's keys.
pub fn lookup(
    docs: &StickyDocs,
    primary: Identifier<'_>,
    fallback: Option<Identifier<'_>>,
    experiment: &StickyExperiment<'_>,
) -> StickyLookup {
    let (own, own_blocked) = scan(find(docs, primary), experiment);
    let (other, other_blocked) = scan(fallback.and_then(|f| find(docs, f)), experiment);
    if own_blocked || other_blocked {
        return StickyLookup::Blocked;
    }
    match own.or(other) {
        Some(variant) => experiment
            .variant_keys
            .iter()
            .position(|k| k == variant)
            .map_or(StickyLookup::None, StickyLookup::Variant),
        None => StickyLookup::None,
    }
}

/// Whether the document of `id` already records `variant_key` for `experiment`'s current
/// bucket version (then [`record`] would change nothing). Allocates nothing.
pub fn records(
    docs: &StickyDocs,
    id: Identifier<'_>,
    experiment: &StickyExperiment<'_>,
    variant_key: &str,
) -> bool {
    scan(find(docs, id), experiment).0 == Some(variant_key)
}

/// Records that the user identified by `hashed` (the attribute that was hashed) is in the
/// variant `variant_key` of `experiment`, keeping every other assignment of the document.
/// Returns the document as it now is when it changed, `None` when it already said so.
pub fn record<'d>(
    docs: &'d mut StickyDocs,
    hashed: Identifier<'_>,
    experiment: &StickyExperiment<'_>,
    variant_key: &str,
) -> Option<&'d StickyDoc> {
    if records(docs, hashed, experiment, variant_key) {
        return None;
    }
    docs.assignments_mut(hashed.name, hashed.value).insert(
        assignment_key(experiment.key, experiment.bucket_version),
        variant_key.to_owned(),
    );
    docs.get(hashed.name, hashed.value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(name: &str, value: &str, variant: &str) -> StickyDoc {
        StickyDoc {
            attribute_name: name.to_owned(),
            attribute_value: value.to_owned(),
            assignments: [("e__0".to_owned(), variant.to_owned())].into(),
        }
    }

    #[test]
    fn a_request_keeps_one_document_per_identifier_in_identifier_order() {
        let mut docs: StickyDocs = [
            doc("user_id", "u2", "a"),
            doc("device_id", "d1", "b"),
            doc("user_id", "u1", "c"),
            doc("user_id", "u2", "d"),
        ]
        .into_iter()
        .collect();
        let order: Vec<_> = docs
            .iter()
            .map(|d| (d.attribute_name.as_str(), d.attribute_value.as_str()))
            .collect();
        assert_eq!(
            order,
            [("device_id", "d1"), ("user_id", "u1"), ("user_id", "u2")]
        );
        assert_eq!(
            docs.get("user_id", "u2"),
            Some(&doc("user_id", "u2", "d")),
            "the later wins"
        );
        assert_eq!(docs.get("user_id", "u3"), None);
        assert_eq!(
            docs.get("user_id", "d1"),
            None,
            "a value of another attribute"
        );
        let replaced = docs.insert(doc("user_id", "u1", "e"));
        assert_eq!(replaced, Some(doc("user_id", "u1", "c")));
        assert_eq!(docs.insert(doc("user_id", "u0", "f")), None);
        assert_eq!(docs.len(), 4);
        let fresh = docs.assignments_mut("user_id", "new");
        assert!(fresh.is_empty());
        fresh.insert("e__1".into(), "g".into());
        assert_eq!(docs.get("user_id", "new").unwrap().assignments["e__1"], "g");
        assert_eq!(docs.assignments_mut("user_id", "u0")["e__0"], "f", "kept");
        assert_eq!(docs.len(), 5);
    }

    #[test]
    fn a_requests_documents_fit_the_allocators_per_thread_cache() {
        // glibc serves requests of up to 1,032 bytes from its per-thread cache (P26); a vector's
        // first allocation holds four elements.
        assert!(
            4 * std::mem::size_of::<StickyDoc>() <= 1032,
            "{} bytes",
            4 * std::mem::size_of::<StickyDoc>()
        );
    }

    fn keys() -> &'static [String] {
        static KEYS: std::sync::LazyLock<[String; 2]> =
            std::sync::LazyLock::new(|| ["control".to_owned(), "trial".to_owned()]);
        &*KEYS
    }

    fn experiment(bucket_version: u32, min_bucket_version: u32) -> StickyExperiment<'static> {
        StickyExperiment {
            key: "paywall",
            bucket_version,
            min_bucket_version,
            variant_keys: keys(),
        }
    }

    /// An attribute, its value and its assignments.
    type Entry<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);

    fn docs(entries: &[Entry<'_>]) -> StickyDocs {
        entries
            .iter()
            .map(|(name, value, assignments)| StickyDoc {
                attribute_name: (*name).to_owned(),
                attribute_value: (*value).to_owned(),
                assignments: assignments
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            })
            .collect()
    }

    const USER: Identifier<'static> = Identifier {
        name: "user_id",
        value: "u1",
    };
    const DEVICE: Identifier<'static> = Identifier {
        name: "device_id",
        value: "d1",
    };

    #[test]
    fn only_canonical_versions_of_the_experiment_count() {
        assert_eq!(assignment_version("paywall__12", "paywall"), Some(12));
        assert_eq!(assignment_version("paywall__0", "paywall"), Some(0));
        for other in [
            "paywall__012",
            "paywall__",
            "paywall_1",
            "paywalls__1",
            "paywall__1x",
            "x__1",
        ] {
            assert_eq!(assignment_version(other, "paywall"), None, "{other}");
        }
        // A version GrowthBook would not look up does not block either.
        let d = docs(&[("user_id", "u1", &[("paywall__01", "trial")])]);
        assert_eq!(
            lookup(&d, USER, None, &experiment(2, 2)),
            StickyLookup::None
        );
    }

    #[test]
    fn assignments_are_recognised_by_their_form() {
        for (key, variant) in [
            ("paywall__0", "control"),
            ("paywall__12", "v"),
            ("0192e3c4-0000-7000-8000-000000000001__4294967295", "x"),
            ("a__b__3", "x"),
            ("paywall__01", "x"),
        ] {
            assert!(is_assignment(key, variant), "{key} → {variant}");
            assert!(
                is_assignment(&assignment_key(key, 7), variant),
                "what this release writes is an assignment"
            );
        }
        for (key, variant) in [
            ("paywall__0", ""),
            ("__0", "x"),
            ("paywall__", "x"),
            ("paywall__-1", "x"),
            ("paywall__+1", "x"),
            ("paywall__1x", "x"),
            ("paywall__4294967296", "x"),
            ("paywall_1", "x"),
            ("paywall", "x"),
            ("_meta", "{\"written_at\": 1}"),
            ("", ""),
        ] {
            assert!(!is_assignment(key, variant), "{key} → {variant}");
        }
    }

    #[test]
    fn a_variant_that_no_longer_exists_is_no_assignment() {
        let d = docs(&[("user_id", "u1", &[("paywall__0", "gone")])]);
        assert_eq!(
            lookup(&d, USER, None, &experiment(0, 0)),
            StickyLookup::None
        );
    }

    #[test]
    fn an_earlier_version_blocks_only_below_the_minimum() {
        let d = docs(&[("user_id", "u1", &[("paywall__1", "trial")])]);
        assert_eq!(
            lookup(&d, USER, None, &experiment(2, 2)),
            StickyLookup::Blocked
        );
        assert_eq!(
            lookup(&d, USER, None, &experiment(2, 1)),
            StickyLookup::None
        );
        assert_eq!(
            lookup(&d, USER, None, &experiment(1, 1)),
            StickyLookup::Variant(1)
        );
    }

    #[test]
    fn the_hashed_attribute_wins_over_the_fallback() {
        let d = docs(&[
            ("user_id", "u1", &[("paywall__0", "control")]),
            ("device_id", "d1", &[("paywall__0", "trial")]),
        ]);
        assert_eq!(
            lookup(&d, USER, Some(DEVICE), &experiment(0, 0)),
            StickyLookup::Variant(0)
        );
        assert_eq!(
            lookup(
                &d,
                Identifier {
                    name: "user_id",
                    value: "u2"
                },
                Some(DEVICE),
                &experiment(0, 0)
            ),
            StickyLookup::Variant(1)
        );
    }

    #[test]
    fn recording_keeps_other_assignments_and_says_when_nothing_changed() {
        let mut d = docs(&[(
            "user_id",
            "u1",
            &[("paywall__0", "control"), ("other__3", "x")],
        )]);
        let written = record(&mut d, USER, &experiment(1, 0), "trial").expect("changed");
        assert_eq!(written.assignments.len(), 3);
        assert_eq!(written.assignments["paywall__0"], "control");
        assert_eq!(written.assignments["paywall__1"], "trial");
        assert_eq!(record(&mut d, USER, &experiment(1, 0), "trial"), None);
        assert_eq!(d.len(), 1, "the same document");
    }
}
