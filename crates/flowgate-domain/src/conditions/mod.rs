//! TEMPORARY STUB: replaced by the real GrowthBook-compatible module.
#![allow(missing_docs, dead_code)]
use serde_json::Value;
pub trait Attributes {
    fn get(&self, key: &str) -> Option<&Value>;
}
impl Attributes for serde_json::Map<String, Value> {
    fn get(&self, key: &str) -> Option<&Value> {
        serde_json::Map::get(self, key)
    }
}
#[derive(Clone, Debug, Default)]
pub struct SavedGroups(std::collections::HashMap<String, Vec<Value>>);
impl SavedGroups {
    pub fn new(groups: impl IntoIterator<Item = (String, Vec<Value>)>) -> Self {
        Self(groups.into_iter().collect())
    }
    pub fn empty() -> Self {
        Self::default()
    }
}
#[derive(Clone, Debug)]
pub struct Condition(Value);
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{pointer}: {message}")]
pub struct ConditionError {
    pub pointer: String,
    pub message: String,
}
impl Condition {
    pub fn compile(doc: &Value) -> Result<Condition, Vec<ConditionError>> {
        Ok(Condition(doc.clone()))
    }
    pub fn compile_lenient(doc: &Value) -> Condition {
        Condition(doc.clone())
    }
    pub fn is_always_true(&self) -> bool {
        self.0.as_object().is_some_and(|m| m.is_empty())
    }
    pub fn eval<A: Attributes + ?Sized>(&self, attrs: &A, _groups: &SavedGroups) -> bool {
        match &self.0 {
            Value::Object(m) => m.iter().all(|(k, v)| attrs.get(k) == Some(v)),
            _ => false,
        }
    }
}
impl Attributes for Value {
    fn get(&self, key: &str) -> Option<&Value> {
        self.as_object().and_then(|m| m.get(key))
    }
}
