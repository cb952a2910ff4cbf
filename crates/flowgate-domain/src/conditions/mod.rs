//! Audience conditions (D4): GrowthBook's MongoDB-style condition documents, compiled once and
//! evaluated per request with the exact semantics of GrowthBook's JavaScript SDK.
//!
//! A dashboard writes the documents, SDKs on every platform can evaluate the same JSON, and the
//! public GrowthBook conformance suite runs against this module. A document is compiled when
//! the catalog loads ([`Condition::compile`] refuses anything that would silently depend on
//! unknown operators, invalid or unsupported patterns, or operands of the wrong shape) and is
//! then evaluated many times ([`Condition::eval`]) without parsing or regex compilation.
//!
//! For example, the audience `{"country": {"$in": ["US", "CA"]}, "app.version": {"$vgte":
//! "2.1.0"}}` matches the attributes `{"country": "CA", "app.version": "2.3.0"}`.
//!
//! Semantics follow GrowthBook's JavaScript SDK, including its coercions (`"8" > 5` holds, a
//! missing attribute is `null`, a string condition matches `String(value)`), with one
//! extension decided in D4: a key containing dots is looked up literally first, and only then
//! as a nested path.
//!
//! Two details of JavaScript cannot be reproduced from a `serde_json::Value` and are therefore
//! not: properties inherited from `Object.prototype` (`constructor`, `toString`, ...) are not
//! attributes here, as in GrowthBook's other SDKs, and object equality ignores key order,
//! because `serde_json::Map` does not keep it.

mod compile;
mod eval;
mod js;
pub(crate) use js::{to_js_string, truthy};
mod jsregex;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::Arc;

use serde_json::{Map, Value};

pub use crate::conditions::compile::Patterns;
use crate::conditions::compile::{Compiler, Doc, InSet};
use crate::conditions::eval::Source as _;

/// Attribute source: the evaluator looks keys up through this trait so callers need not build
/// a merged map per request.
///
/// `get` receives whole keys, dotted ones included: D4 looks `app.version` up literally first
/// and walks `app` → `version` only when that finds nothing.
pub trait Attributes {
    /// The attribute stored under exactly `key`, if any.
    fn get(&self, key: &str) -> Option<&Value>;
}

impl Attributes for Map<String, Value> {
    fn get(&self, key: &str) -> Option<&Value> {
        Map::get(self, key)
    }
}

/// A JSON object reads its members; any other JSON value has no attributes.
impl Attributes for Value {
    fn get(&self, key: &str) -> Option<&Value> {
        self.as_object().and_then(|map| map.get(key))
    }
}

impl<S: BuildHasher> Attributes for HashMap<String, Value, S> {
    fn get(&self, key: &str) -> Option<&Value> {
        HashMap::get(self, key)
    }
}

impl Attributes for BTreeMap<String, Value> {
    fn get(&self, key: &str) -> Option<&Value> {
        BTreeMap::get(self, key)
    }
}

impl<T: Attributes + ?Sized> Attributes for &T {
    fn get(&self, key: &str) -> Option<&Value> {
        (**self).get(key)
    }
}

/// Two attribute sources read as one, the first winning: D3 point 6 lets identity fields
/// (`user_id`, `session_id`, `device_platform`) override request attributes of the same name
/// without copying either map.
#[derive(Clone, Copy, Debug)]
pub struct Layered<'a, F: ?Sized, B: ?Sized> {
    /// Consulted first.
    pub front: &'a F,
    /// Consulted when `front` has no such key.
    pub back: &'a B,
}

impl<F: Attributes + ?Sized, B: Attributes + ?Sized> Attributes for Layered<'_, F, B> {
    fn get(&self, key: &str) -> Option<&Value> {
        self.front.get(key).or_else(|| self.back.get(key))
    }
}

/// Saved groups of an app (D2): group id -> array of values, for `$inGroup` / `$notInGroup`.
///
/// Each group is indexed once when the catalog loads, so a membership test is a hash lookup
/// (a binary search for groups of at most 16 strings) rather than a scan of the group's values.
#[derive(Clone, Debug, Default)]
pub struct SavedGroups {
    groups: HashMap<String, SavedGroup>,
}

#[derive(Clone, Debug)]
struct SavedGroup {
    values: Vec<Value>,
    set: InSet,
}

impl SavedGroups {
    /// Builds the groups of an app; a repeated id keeps its last values.
    pub fn new(groups: impl IntoIterator<Item = (String, Vec<Value>)>) -> Self {
        SavedGroups {
            groups: groups
                .into_iter()
                .map(|(id, values)| {
                    let set = InSet::new(&values, false);
                    (id, SavedGroup { values, set })
                })
                .collect(),
        }
    }

    /// No groups: every `$inGroup` is false and every `$notInGroup` true, as GrowthBook treats
    /// an unknown group as an empty list.
    pub fn empty() -> Self {
        SavedGroups::default()
    }

    /// The values of group `id`, if the app defines it.
    pub fn get(&self, id: &str) -> Option<&[Value]> {
        self.groups.get(id).map(|g| g.values.as_slice())
    }

    fn set(&self, id: &str) -> Option<&InSet> {
        self.groups.get(id).map(|g| &g.set)
    }
}

/// A compiled condition: parsed once (regexes compiled once), evaluated per request.
///
/// Cloning copies the tree; compiled regexes are shared, not recompiled.
#[derive(Clone, Debug)]
pub struct Condition {
    root: Doc,
    /// The document as written, for explain (D18) to quote the clause that failed; `null`
    /// for a lenient compile of a document the strict compile refuses.
    source: Arc<Value>,
}

/// Why a condition did not match (D18): its first top-level clause that did not hold.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Mismatch {
    /// Position of the clause among the document's members.
    #[serde(rename = "clause_index")]
    pub index: usize,
    /// The clause as written, such as `{"country": {"$in": ["US", "CA"]}}`.
    pub clause: Value,
    /// The attribute values the clause read, by key as written: what the condition saw after
    /// the literal-then-nested lookup (D4), `null` for a missing attribute.
    pub seen: Map<String, Value>,
    /// True when evaluation stopped where GrowthBook's JavaScript throws (no match).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub aborted: bool,
}

/// Records where the root document stopped.
#[derive(Default)]
struct Stop {
    at: Option<(usize, Option<Value>, bool)>,
}

impl eval::Observe for Stop {
    fn stopped(&mut self, index: usize, seen: Option<&Value>, aborted: bool) {
        self.at = Some((index, seen.cloned(), aborted));
    }
}

/// One reason why [`Condition::compile`] refused a document.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{pointer}: {message}")]
pub struct ConditionError {
    /// Where the problem is: a JSON pointer (RFC 6901) relative to the condition document's
    /// root, such as `/country/$in` or `/$and/1/age/$gt`; empty for the root itself.
    pub pointer: String,
    /// What is wrong, for the person who wrote the condition.
    pub message: String,
}

impl Condition {
    /// Strict compile, used at catalog import (D4).
    ///
    /// Rejects what GrowthBook would evaluate as never (or always) matching without saying
    /// so: unknown operators, `$regex` patterns that are invalid in JavaScript, that the
    /// linear-time engine cannot run (look-around, back-references) or that exceed 1024
    /// bytes, operands of the wrong shape (`$in` without an array, `$exists` without a
    /// boolean, `$eq` with an array, ...), documents that are not objects, and nesting deeper
    /// than 64 levels. Every problem is returned, each with its JSON pointer.
    pub fn compile(doc: &Value) -> Result<Condition, Vec<ConditionError>> {
        Self::compile_with(doc, &mut Patterns::new())
    }

    /// [`Condition::compile`] sharing compiled patterns with every other condition compiled
    /// with `patterns` (a catalog build compiles all its rules with one set).
    pub fn compile_with(
        doc: &Value,
        patterns: &mut Patterns,
    ) -> Result<Condition, Vec<ConditionError>> {
        let mut compiler = Compiler::new(patterns);
        let root = compiler.doc(doc, 0);
        if compiler.errors.is_empty() {
            Ok(Condition {
                root,
                source: Arc::new(doc.clone()),
            })
        } else {
            Err(compiler.errors)
        }
    }

    /// Lenient compile: never fails. Whatever [`Condition::compile`] would reject evaluates as
    /// GrowthBook's JavaScript evaluates it (an unknown operator or an invalid pattern is
    /// false, `$in` with a non-array is false, a non-object document is read through
    /// `Object.entries`). Where JavaScript would throw (a `null` document) the condition does
    /// not match. Patterns the linear-time engine cannot run are false (D4), and parts nested
    /// deeper than 64 levels evaluate as false.
    pub fn compile_lenient(doc: &Value) -> Condition {
        let mut patterns = Patterns::new();
        let mut compiler = Compiler::new(&mut patterns);
        let root = compiler.doc(doc, 0);
        // A document the strict compile refuses may be nested without bound: it is not kept
        // (copying it could exhaust the stack), so explain names its clauses by position only.
        let source = if compiler.errors.is_empty() {
            doc.clone()
        } else {
            Value::Null
        };
        Condition {
            root,
            source: Arc::new(source),
        }
    }

    /// True for `{}` (matches everyone) so callers can skip evaluation.
    pub fn is_always_true(&self) -> bool {
        self.root.clauses.is_empty()
    }

    /// Evaluates against attributes and the app's saved groups.
    pub fn eval<A: Attributes + ?Sized>(&self, attrs: &A, groups: &SavedGroups) -> bool {
        eval::doc(&eval::Root(attrs), &self.root, groups).unwrap_or(false)
    }

    /// [`Condition::eval`], saying why when it does not match (D18): the same evaluation,
    /// observed, so the two cannot disagree.
    pub fn explain<A: Attributes + ?Sized>(
        &self,
        attrs: &A,
        groups: &SavedGroups,
    ) -> Result<(), Mismatch> {
        let source = eval::Root(attrs);
        let mut stop = Stop::default();
        let outcome = eval::doc_observed(&source, &self.root, groups, &mut stop);
        if outcome.unwrap_or(false) {
            return Ok(());
        }
        let Some((index, value, aborted)) = stop.at else {
            // Only a clause can make a document fail; keep a clear answer regardless.
            return Err(Mismatch {
                index: 0,
                clause: (*self.source).clone(),
                seen: Map::new(),
                aborted: outcome.is_err(),
            });
        };
        let mut seen = Map::new();
        if let Some(clause) = self.root.clauses.get(index) {
            match (clause, value) {
                (compile::Clause::Field { path, .. }, Some(value)) => {
                    seen.insert(path.full.to_string(), value);
                }
                (clause, _) => {
                    let mut paths = Vec::new();
                    eval::field_paths(clause, &mut paths);
                    for path in paths {
                        if !seen.contains_key(&*path.full) {
                            seen.insert(path.full.to_string(), source.lookup(path).into_owned());
                        }
                    }
                }
            }
        }
        let clause = match &*self.source {
            Value::Object(map) => map
                .iter()
                .nth(index)
                .map(|(k, v)| Value::Object(Map::from_iter([(k.clone(), v.clone())])))
                .unwrap_or(Value::Null),
            other => other.clone(),
        };
        Err(Mismatch {
            index,
            clause,
            seen,
            aborted,
        })
    }

    /// The document as written (`null` after a lenient compile of a document the strict
    /// compile refuses).
    pub fn source(&self) -> &Value {
        &self.source
    }
}

/// Strict conversion, the same as [`Condition::compile`].
impl TryFrom<&Value> for Condition {
    type Error = Vec<ConditionError>;

    fn try_from(doc: &Value) -> Result<Self, Self::Error> {
        Condition::compile(doc)
    }
}
