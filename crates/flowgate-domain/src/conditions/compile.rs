//! Turns a condition document into the tree that `eval` walks.
//!
//! One code path serves both compile modes: it always builds the lenient tree (whatever
//! GrowthBook's JavaScript would do at evaluation, including its coercions and its quirks for
//! malformed documents) and records a [`ConditionError`] for everything the strict import
//! check refuses (D4). `Condition::compile` fails when any error was recorded;
//! `Condition::compile_lenient` ignores them.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::conditions::js::{self, Primitive};
use crate::conditions::jsregex::{JsRegex, PatternError};
use crate::conditions::ConditionError;
use crate::shown::{shown, shown_str};
use crate::FastSet;

/// Deepest nesting of documents, operators and operand conditions that is compiled. Audience
/// rules from our catalog stay far below it; the cap keeps both compile and evaluation
/// recursion bounded for any input.
pub(crate) const MAX_DEPTH: usize = 64;

/// Longest `$regex` pattern accepted at import, in bytes (D4).
pub(crate) const MAX_PATTERN_BYTES: usize = 1024;

/// Operators that apply to a field value. At document level GrowthBook reads any other key,
/// `$`-prefixed or not, as an attribute name.
const FIELD_OPERATORS: &[&str] = &[
    "$eq",
    "$ne",
    "$lt",
    "$lte",
    "$gt",
    "$gte",
    "$exists",
    "$in",
    "$nin",
    "$ini",
    "$nini",
    "$inGroup",
    "$notInGroup",
    "$all",
    "$alli",
    "$size",
    "$elemMatch",
    "$type",
    "$regex",
    "$regexi",
    "$veq",
    "$vne",
    "$vgt",
    "$vgte",
    "$vlt",
    "$vlte",
];

/// `$type` names that `getType` can return for a JSON value.
const TYPE_NAMES: &[&str] = &["string", "number", "boolean", "object", "array", "null"];

/// A condition document: every clause must hold (`evalCondition`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Doc {
    pub(crate) clauses: Box<[Clause]>,
}

/// One entry of a condition document.
#[derive(Clone, Debug)]
pub(crate) enum Clause {
    /// An attribute path and the test its value must pass.
    Field { path: Path, test: Test },
    /// `$or`: some document holds. Empty means false; the JavaScript rule that an empty list
    /// is true is decided at compile time, where the list's `length` is known.
    Or(Box<[Doc]>),
    /// `$and`: every document holds.
    And(Box<[Doc]>),
    /// `$nor`: no document holds.
    Nor(Box<[Doc]>),
    /// Logical `$not`.
    Not(Box<Doc>),
    /// A clause whose outcome is known at compile time.
    Const(bool),
    /// JavaScript would throw here (for example `Object.entries(null)`); GrowthBook's
    /// evaluation then produces no result, which we treat as "does not match".
    Abort,
}

/// An attribute path, split once at compile time.
#[derive(Clone, Debug)]
pub(crate) struct Path {
    /// The key as written, looked up literally first (D4).
    pub(crate) full: Box<str>,
    /// The dot-separated parts, for the nested walk (`getPath`).
    pub(crate) parts: Box<[Box<str>]>,
}

impl Path {
    fn new(key: &str) -> Self {
        Path {
            full: key.into(),
            parts: key.split('.').map(Box::from).collect(),
        }
    }

    /// Whether the key has dots, so that a nested walk differs from the literal lookup.
    pub(crate) fn is_dotted(&self) -> bool {
        self.parts.len() > 1
    }
}

/// What a value must satisfy (`evalConditionValue`).
#[derive(Clone, Debug)]
pub(crate) enum Test {
    /// A string condition: `value + "" === s`.
    StrEq(Box<str>),
    /// A string condition inside `$alli`: compared after `toLowerCase()` on both sides.
    StrEqFold(Box<str>),
    /// A number condition: `value * 1 === n`.
    NumEq(f64),
    /// A boolean condition: `value !== null && !!value === b`.
    Bool(bool),
    /// A `null` condition: `value === null` (a missing attribute reads as `null`).
    Null,
    /// An array or a plain object: `JSON.stringify` equality.
    Json(Box<Value>),
    /// An operator object: every operator holds.
    Ops(Box<[Op]>),
    /// A test known at compile time (too deep to compile).
    Const(bool),
}

/// One operator of an operator object (`evalOperatorCondition`).
#[derive(Clone, Debug)]
pub(crate) enum Op {
    /// `$veq` ... `$vlte` against the operand's padded version string, computed once.
    Version(VersionOp, Box<[u16]>),
    /// `$eq` (`true`) or `$ne` (`false`) with strict equality.
    Eq(bool, StrictOperand),
    /// `$lt`, `$lte`, `$gt`, `$gte` with JavaScript's relational comparison.
    Rel(RelOp, RelOperand),
    /// `$exists` with the truthiness of its operand.
    Exists(bool),
    /// `$in` / `$ini` (`negate` false) and `$nin` / `$nini` (`negate` true).
    In { set: InSet, negate: bool },
    /// `$inGroup` / `$notInGroup` with the group id as JavaScript's property key.
    InGroup { group: Box<str>, negate: bool },
    /// Field-level `$not`.
    Not(Test),
    /// `$size`: the test applies to the array's length.
    Size(Test),
    /// `$elemMatch`.
    ElemMatch(ElemMatch),
    /// `$all` / `$alli`: every test holds for some element.
    All(Box<[Test]>),
    /// `$regex` / `$regexi`; `None` when the pattern cannot be used, which evaluates false.
    Regex(Option<JsRegex>),
    /// `$type` with a name `getType` can produce.
    Type(Box<str>),
    /// An operator whose outcome does not depend on the value (unknown operator, `$in` with a
    /// non-array operand, ...).
    Const(bool),
}

/// Which version comparison.
#[derive(Clone, Copy, Debug)]
pub(crate) enum VersionOp {
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
}

/// Which relational comparison.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RelOp {
    Lt,
    Lte,
    Gt,
    Gte,
}

/// The operand of `$eq` / `$ne`.
#[derive(Clone, Debug)]
pub(crate) enum StrictOperand {
    /// A primitive, compared with `===`.
    Value(Value),
    /// An array or object: `===` compares identity, so it never equals an attribute.
    Never,
}

/// The operand of a relational operator after `ToPrimitive`, with a string's number
/// precomputed for comparisons against numeric attributes.
#[derive(Clone, Debug)]
pub(crate) enum RelOperand {
    /// A string primitive and its `Number(...)`.
    Str(Box<str>, f64),
    /// A numeric primitive.
    Num(f64),
}

/// `$elemMatch` operand forms.
#[derive(Clone, Debug)]
pub(crate) enum ElemMatch {
    /// An operator object, applied to each element as a value.
    Test(Test),
    /// A nested condition document, evaluated with each element as the attributes.
    Doc(Doc),
    /// A `null` operand: `Object.keys(null)` throws once the attribute is an array.
    Abort,
}

/// The members of an `$in`-style list (or a saved group) indexed for `Array.prototype.includes`
/// (SameValueZero): strings in a [`StringSet`], numbers sorted for binary search, the rest as
/// flags. Arrays and objects are left out because `includes` compares them by identity.
#[derive(Clone, Debug, Default)]
pub(crate) struct InSet {
    strings: StringSet,
    numbers: Box<[f64]>,
    has_true: bool,
    has_false: bool,
    has_null: bool,
    /// Strings were lower-cased (`$ini`, `$nini`), so candidates are lower-cased too.
    fold: bool,
}

impl InSet {
    /// Indexes `values`; with `fold`, strings are compared after `toLowerCase()`.
    pub(crate) fn new<'a>(values: impl IntoIterator<Item = &'a Value>, fold: bool) -> Self {
        let mut strings: Vec<Box<str>> = Vec::new();
        let mut numbers: Vec<f64> = Vec::new();
        let mut set = InSet {
            fold,
            ..InSet::default()
        };
        for v in values {
            match v {
                Value::String(s) => strings.push(if fold {
                    js::js_lowercase(s).into()
                } else {
                    s.as_str().into()
                }),
                // `+ 0.0` turns -0 into 0, which SameValueZero treats as equal.
                Value::Number(n) => numbers.push(js::number_value(n) + 0.0),
                Value::Bool(true) => set.has_true = true,
                Value::Bool(false) => set.has_false = true,
                Value::Null => set.has_null = true,
                Value::Array(_) | Value::Object(_) => {}
            }
        }
        numbers.sort_unstable_by(f64::total_cmp);
        numbers.dedup();
        set.strings = StringSet::new(strings);
        set.numbers = numbers.into();
        set
    }

    /// Whether its strings were hashed (for tests of the boundary).
    #[cfg(test)]
    pub(crate) fn strings_hashed(&self) -> bool {
        matches!(self.strings, StringSet::Hashed(_))
    }

    /// `list.includes(v)`, after case folding when the set folds.
    fn contains(&self, v: &Value) -> bool {
        match v {
            Value::String(s) => {
                let key = if self.fold {
                    js::js_lowercase(s)
                } else {
                    std::borrow::Cow::Borrowed(s.as_str())
                };
                self.strings.contains(&key)
            }
            Value::Number(n) => {
                let x = js::number_value(n) + 0.0;
                self.numbers.binary_search_by(|p| p.total_cmp(&x)).is_ok()
            }
            Value::Bool(true) => self.has_true,
            Value::Bool(false) => self.has_false,
            Value::Null => self.has_null,
            Value::Array(_) | Value::Object(_) => false,
        }
    }

    /// GrowthBook's `isIn`: an array attribute matches when any element is in the list.
    pub(crate) fn matches(&self, actual: &Value) -> bool {
        match actual {
            Value::Array(items) => items.iter().any(|v| self.contains(v)),
            other => self.contains(other),
        }
    }
}

/// Lists of at most this many strings are sorted and searched; longer ones are hashed.
pub(crate) const MAX_SORTED: usize = 16;

/// The strings of an `$in`-style list, for exact membership. An audience's lists are short
/// (`country $in [...]`) and a sorted slice serves them best; a saved group can hold thousands
/// of user ids, where a binary search costs a dozen or more comparisons, each touching another
/// string in memory, and a hash lookup about one. The keys come from the catalog, not from
/// requests, so the table's layout is not the caller's to choose; its hasher is randomly keyed
/// all the same.
#[derive(Clone, Debug)]
enum StringSet {
    /// At most [`MAX_SORTED`] strings, sorted and without repeats.
    Sorted(Box<[Box<str>]>),
    /// Lists of more strings (counted with their repeats).
    Hashed(FastSet<Box<str>>),
}

impl Default for StringSet {
    fn default() -> Self {
        StringSet::Sorted(Box::default())
    }
}

impl StringSet {
    fn new(mut strings: Vec<Box<str>>) -> Self {
        if strings.len() > MAX_SORTED {
            return StringSet::Hashed(strings.into_iter().collect());
        }
        strings.sort_unstable();
        strings.dedup();
        StringSet::Sorted(strings.into())
    }

    fn contains(&self, key: &str) -> bool {
        match self {
            StringSet::Sorted(strings) => {
                strings.binary_search_by(|probe| (**probe).cmp(key)).is_ok()
            }
            StringSet::Hashed(strings) => strings.contains(key),
        }
    }
}

/// Compiled `$regex` / `$regexi` patterns, shared by every condition compiled with the same
/// `Patterns`: a pattern that appears in many rules compiles once and its clones share one
/// program. A compiled pattern holds about 8 KB, so a catalog of thousands of rules that
/// repeat a few patterns would otherwise spend tens of megabytes on copies.
#[derive(Debug, Default)]
pub struct Patterns {
    /// By pattern text; index 0 for `$regex`, 1 for `$regexi`.
    compiled: [HashMap<String, JsRegex>; 2],
}

impl Patterns {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Distinct patterns compiled so far.
    pub fn len(&self) -> usize {
        self.compiled.iter().map(HashMap::len).sum()
    }

    /// True when no pattern was compiled.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn get(&mut self, pattern: &str, ignore_case: bool) -> Result<JsRegex, PatternError> {
        let compiled = &mut self.compiled[usize::from(ignore_case)];
        if let Some(found) = compiled.get(pattern) {
            return Ok(found.clone());
        }
        let regex = JsRegex::new(pattern, ignore_case)?;
        compiled.insert(pattern.to_owned(), regex.clone());
        Ok(regex)
    }
}

/// Compiles documents while collecting strict-mode errors with their JSON pointers.
pub(crate) struct Compiler<'p> {
    pointer: Vec<String>,
    pub(crate) errors: Vec<ConditionError>,
    patterns: &'p mut Patterns,
}

impl<'p> Compiler<'p> {
    pub(crate) fn new(patterns: &'p mut Patterns) -> Self {
        Compiler {
            pointer: Vec::new(),
            errors: Vec::new(),
            patterns,
        }
    }

    /// Records a strict-mode error at the current position.
    fn error(&mut self, message: impl Into<String>) {
        let mut pointer = String::new();
        for segment in &self.pointer {
            pointer.push('/');
            pointer.push_str(&segment.replace('~', "~0").replace('/', "~1"));
        }
        self.errors.push(ConditionError {
            pointer,
            message: message.into(),
        });
    }

    /// Runs `f` one pointer segment deeper.
    fn at<T>(&mut self, segment: impl Into<String>, f: impl FnOnce(&mut Self) -> T) -> T {
        self.pointer.push(segment.into());
        let out = f(self);
        self.pointer.pop();
        out
    }

    /// A condition document (`evalCondition(obj, condition)`), which JavaScript walks with
    /// `Object.entries`: objects give their members, arrays and strings their indices,
    /// numbers and booleans nothing, and `null` throws.
    pub(crate) fn doc(&mut self, v: &Value, depth: usize) -> Doc {
        if depth > MAX_DEPTH {
            self.error(format!(
                "conditions are nested deeper than {MAX_DEPTH} levels"
            ));
            return Doc {
                clauses: Box::new([Clause::Const(false)]),
            };
        }
        let clauses: Vec<Clause> = match v {
            Value::Object(map) => map
                .iter()
                .map(|(key, value)| self.at(key.as_str(), |c| c.doc_entry(key, value, depth)))
                .collect(),
            Value::Array(items) => {
                self.error(format!("expected a condition object, not {}", shown(v)));
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| Clause::Field {
                        path: Path::new(&i.to_string()),
                        test: self.quiet(|c| c.test(item, depth + 1, false)),
                    })
                    .collect()
            }
            Value::String(s) => {
                self.error(format!("expected a condition object, not {}", shown(v)));
                string_entries(s)
            }
            Value::Number(_) | Value::Bool(_) => {
                self.error(format!("expected a condition object, not {}", shown(v)));
                Vec::new()
            }
            Value::Null => {
                self.error("expected a condition object, not null");
                vec![Clause::Abort]
            }
        };
        Doc {
            clauses: clauses.into(),
        }
    }

    /// Compiles with error collection suspended, for parts of a document already reported as
    /// a whole.
    fn quiet<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let before = self.errors.len();
        let out = f(self);
        self.errors.truncate(before);
        out
    }

    fn doc_entry(&mut self, key: &str, value: &Value, depth: usize) -> Clause {
        match key {
            "$or" | "$and" | "$nor" => self.logical_list(key, value, depth),
            "$not" => Clause::Not(Box::new(self.doc(value, depth + 1))),
            _ => {
                if FIELD_OPERATORS.contains(&key) {
                    self.error(format!(
                        "operator {key} is not valid here: expected an attribute name or $and, $or, $nor, $not"
                    ));
                }
                Clause::Field {
                    path: Path::new(key),
                    test: self.test(value, depth + 1, false),
                }
            }
        }
    }

    /// `$or`, `$and`, `$nor`, which JavaScript reads through `.length` and `[i]`.
    fn logical_list(&mut self, key: &str, value: &Value, depth: usize) -> Clause {
        let build = |docs: Vec<Doc>| -> Clause {
            match key {
                "$or" => Clause::Or(docs.into()),
                "$and" => Clause::And(docs.into()),
                _ => Clause::Nor(docs.into()),
            }
        };
        // `evalOr` answers true when `!conditions.length`; `evalAnd` then loops zero times.
        let empty = Clause::Const(key != "$nor");
        match value {
            Value::Array(items) if items.is_empty() => empty,
            Value::Array(items) => build(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.at(i.to_string(), |c| c.doc(item, depth + 1)))
                    .collect(),
            ),
            Value::Null => {
                self.error(format!("{key} expects an array of conditions, found null"));
                Clause::Abort
            }
            Value::String(s) => {
                self.error(format!(
                    "{key} expects an array of conditions, found a string"
                ));
                if s.is_empty() {
                    return empty;
                }
                // `conditions[i]` is each UTF-16 unit, evaluated as a one-entry document.
                build(
                    s.encode_utf16()
                        .map(|unit| Doc {
                            clauses: Box::new([unit_entry(0, unit)]),
                        })
                        .collect(),
                )
            }
            Value::Number(_) | Value::Bool(_) => {
                self.error(format!(
                    "{key} expects an array of conditions, found a {}",
                    js::type_name(value)
                ));
                empty
            }
            Value::Object(map) => {
                self.error(format!(
                    "{key} expects an array of conditions, found an object"
                ));
                match map.get("length") {
                    Some(length) if js::truthy(length) => {
                        build(self.quiet(|c| c.array_like(map, length, depth)))
                    }
                    _ => empty,
                }
            }
        }
    }

    /// The documents JavaScript's `for (i = 0; i < o.length; i++) o[i]` visits on an object
    /// with a `length` member; a missing index reads `undefined`, which throws.
    fn array_like(&mut self, map: &Map<String, Value>, length: &Value, depth: usize) -> Vec<Doc> {
        let length = js::to_primitive(length);
        let mut docs = Vec::new();
        for i in 0..=map.len() {
            let index = Primitive::Num(i as f64);
            if js::js_compare(&index, &length) != Some(std::cmp::Ordering::Less) {
                break;
            }
            match map.get(&i.to_string()) {
                Some(item) => docs.push(self.doc(item, depth + 1)),
                None => {
                    docs.push(Doc {
                        clauses: Box::new([Clause::Abort]),
                    });
                    break;
                }
            }
        }
        docs
    }

    /// A condition value (`evalConditionValue`); `fold` marks the elements of `$alli`.
    fn test(&mut self, v: &Value, depth: usize, fold: bool) -> Test {
        if depth > MAX_DEPTH {
            self.error(format!(
                "conditions are nested deeper than {MAX_DEPTH} levels"
            ));
            return Test::Const(false);
        }
        match v {
            Value::String(s) if fold => Test::StrEqFold(js::js_lowercase(s).into()),
            Value::String(s) => Test::StrEq(s.as_str().into()),
            Value::Number(n) => Test::NumEq(js::number_value(n)),
            Value::Bool(b) => Test::Bool(*b),
            Value::Null => Test::Null,
            Value::Array(_) => Test::Json(Box::new(v.clone())),
            Value::Object(map) if is_operator_object(map) => Test::Ops(
                map.iter()
                    .map(|(op, operand)| self.at(op.as_str(), |c| c.operator(op, operand, depth)))
                    .collect(),
            ),
            Value::Object(map) => {
                if map.keys().any(|k| k.starts_with('$')) {
                    self.error(
                        "object mixes operators with plain keys; GrowthBook would compare it \
                         as a literal object",
                    );
                }
                Test::Json(Box::new(v.clone()))
            }
        }
    }

    fn operator(&mut self, op: &str, operand: &Value, depth: usize) -> Op {
        match op {
            "$veq" | "$vne" | "$vgt" | "$vgte" | "$vlt" | "$vlte" => self.version_op(op, operand),
            "$eq" | "$ne" => self.eq_op(op, operand),
            "$lt" | "$lte" | "$gt" | "$gte" => self.rel_op(op, operand),
            "$exists" => {
                if !operand.is_boolean() {
                    self.error(format!(
                        "$exists expects true or false, not {}",
                        shown(operand)
                    ));
                }
                Op::Exists(js::truthy(operand))
            }
            "$in" | "$nin" | "$ini" | "$nini" => self.in_op(op, operand),
            "$inGroup" | "$notInGroup" => {
                if !operand.is_string() {
                    self.error(format!(
                        "{op} expects a saved group id (a string), not {}",
                        shown(operand)
                    ));
                }
                Op::InGroup {
                    group: js::to_js_string(operand).into(),
                    negate: op == "$notInGroup",
                }
            }
            "$not" => Op::Not(self.test(operand, depth + 1, false)),
            "$size" => self.size_op(operand, depth),
            "$elemMatch" => self.elem_match_op(operand, depth),
            "$all" | "$alli" => self.all_op(op, operand, depth),
            "$regex" | "$regexi" => self.regex_op(op, operand),
            "$type" => self.type_op(operand),
            _ => {
                self.error(format!("unknown operator {op}"));
                Op::Const(false)
            }
        }
    }

    /// `$veq`, `$vne`, `$vgt`, `$vgte`, `$vlt` and `$vlte`: a comparison of padded versions.
    fn version_op(&mut self, op: &str, operand: &Value) -> Op {
        if !matches!(operand, Value::String(_) | Value::Number(_)) {
            self.error(format!(
                "{op} expects a version string, not {}",
                shown(operand)
            ));
        }
        let kind = match op {
            "$veq" => VersionOp::Eq,
            "$vne" => VersionOp::Ne,
            "$vgt" => VersionOp::Gt,
            "$vgte" => VersionOp::Gte,
            "$vlt" => VersionOp::Lt,
            _ => VersionOp::Lte,
        };
        Op::Version(kind, js::padded_version(operand))
    }

    /// `$eq` and `$ne`: JavaScript's `===`, which an array or object operand never passes.
    fn eq_op(&mut self, op: &str, operand: &Value) -> Op {
        let strict = match operand {
            Value::Array(_) | Value::Object(_) => {
                self.error(format!(
                    "{op} compares with ===, so an array or object operand never equals an attribute"
                ));
                StrictOperand::Never
            }
            other => StrictOperand::Value(other.clone()),
        };
        Op::Eq(op == "$eq", strict)
    }

    /// `$lt`, `$lte`, `$gt` and `$gte`: JavaScript's relational comparison with the operand's
    /// primitive.
    fn rel_op(&mut self, op: &str, operand: &Value) -> Op {
        if !matches!(operand, Value::String(_) | Value::Number(_)) {
            self.error(format!(
                "{op} expects a number or a string, not {}",
                shown(operand)
            ));
        }
        let kind = match op {
            "$lt" => RelOp::Lt,
            "$lte" => RelOp::Lte,
            "$gt" => RelOp::Gt,
            _ => RelOp::Gte,
        };
        let operand = match js::to_primitive(operand) {
            Primitive::Str(s) => RelOperand::Str((*s).into(), js::string_to_number(&s)),
            Primitive::Num(x) => RelOperand::Num(x),
        };
        Op::Rel(kind, operand)
    }

    /// `$in`, `$nin`, `$ini` and `$nini`: membership in an array of values, case-folded for
    /// the `i` forms.
    fn in_op(&mut self, op: &str, operand: &Value) -> Op {
        let negate = op == "$nin" || op == "$nini";
        let fold = op == "$ini" || op == "$nini";
        let Value::Array(items) = operand else {
            self.error(format!(
                "{op} expects an array of values, not {}",
                shown(operand)
            ));
            return Op::Const(false);
        };
        for (i, item) in items.iter().enumerate() {
            if matches!(item, Value::Array(_) | Value::Object(_)) {
                self.at(i.to_string(), |c| {
                    c.error(format!(
                        "{op} compares with ===, so an array or object element never matches"
                    ));
                });
            }
        }
        Op::In {
            set: InSet::new(items, fold),
            negate,
        }
    }

    /// `$size`: the test an array's length must pass.
    fn size_op(&mut self, operand: &Value, depth: usize) -> Op {
        match operand {
            Value::Number(n) => {
                let x = js::number_value(n);
                if x < 0.0 || x.fract() != 0.0 {
                    self.error(format!(
                        "$size expects a non-negative integer or an operator object, not {}",
                        shown(operand)
                    ));
                }
            }
            Value::Object(map) if is_operator_object(map) => {}
            _ => self.error(format!(
                "$size expects a non-negative integer or an operator object, not {}",
                shown(operand)
            )),
        }
        Op::Size(self.test(operand, depth + 1, false))
    }

    /// `$elemMatch`: the test, or the nested document, some element of an array must pass.
    fn elem_match_op(&mut self, operand: &Value, depth: usize) -> Op {
        match operand {
            Value::Null => {
                self.error("$elemMatch expects an operator object or a condition object, not null");
                Op::ElemMatch(ElemMatch::Abort)
            }
            Value::Object(map) if is_operator_object(map) => {
                Op::ElemMatch(ElemMatch::Test(self.test(operand, depth + 1, false)))
            }
            // `isOperatorObject` is false for anything else, so each element is matched as the
            // attributes of a nested document.
            _ => Op::ElemMatch(ElemMatch::Doc(self.doc(operand, depth + 1))),
        }
    }

    /// `$all` and `$alli`: every test some element of an array must pass, case-folded for
    /// `$alli`.
    fn all_op(&mut self, op: &str, operand: &Value, depth: usize) -> Op {
        let Value::Array(items) = operand else {
            self.error(format!(
                "{op} expects an array of values, not {}",
                shown(operand)
            ));
            return Op::Const(false);
        };
        let fold = op == "$alli";
        Op::All(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| self.at(i.to_string(), |c| c.test(item, depth + 1, fold)))
                .collect(),
        )
    }

    /// `$regex` and `$regexi`: a pattern of at most [`MAX_PATTERN_BYTES`], compiled once per
    /// build; `None` (never matches) when it does not compile.
    fn regex_op(&mut self, op: &str, operand: &Value) -> Op {
        let Value::String(pattern) = operand else {
            self.error(format!(
                "{op} expects a pattern string, not {}",
                shown(operand)
            ));
            return Op::Regex(None);
        };
        if pattern.len() > MAX_PATTERN_BYTES {
            self.error(format!(
                "pattern is {} bytes long; at most {MAX_PATTERN_BYTES} are accepted",
                pattern.len()
            ));
        }
        match self.patterns.get(pattern, op == "$regexi") {
            Ok(regex) => Op::Regex(Some(regex)),
            Err(PatternError::Invalid(why)) => {
                self.error(format!(
                    "invalid regular expression {}: {why}",
                    shown_str(pattern)
                ));
                Op::Regex(None)
            }
            Err(PatternError::Unsupported(why)) => {
                self.error(format!(
                    "unsupported regular expression {}: {why}",
                    shown_str(pattern)
                ));
                Op::Regex(None)
            }
        }
    }

    /// `$type`: the name `getType` returns for the attribute.
    fn type_op(&mut self, operand: &Value) -> Op {
        match operand {
            Value::String(name) => {
                if !TYPE_NAMES.contains(&name.as_str()) {
                    self.error(format!(
                        "$type {name:?} never matches; expected one of {}",
                        TYPE_NAMES.join(", ")
                    ));
                }
                Op::Type(name.as_str().into())
            }
            _ => {
                self.error(format!("$type expects a type name, not {}", shown(operand)));
                Op::Const(false)
            }
        }
    }
}

/// GrowthBook's `isOperatorObject`: at least one key, and every key starts with `$`.
fn is_operator_object(map: &Map<String, Value>) -> bool {
    !map.is_empty() && map.keys().all(|k| k.starts_with('$'))
}

/// `Object.entries(string)`: one entry per UTF-16 unit, keyed by its index.
fn string_entries(s: &str) -> Vec<Clause> {
    s.encode_utf16()
        .enumerate()
        .map(|(i, unit)| unit_entry(i, unit))
        .collect()
}

/// The clause for entry `[String(index), unit]` of a string's `Object.entries`. A lone
/// surrogate never equals `String(value)` of a JSON value, so it is a constant false.
fn unit_entry(index: usize, unit: u16) -> Clause {
    match char::from_u32(u32::from(unit)) {
        Some(c) => Clause::Field {
            path: Path::new(&index.to_string()),
            test: Test::StrEq(c.to_string().into()),
        },
        None => Clause::Const(false),
    }
}
