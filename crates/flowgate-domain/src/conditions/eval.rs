//! Evaluates a compiled condition against attributes.
//!
//! Every function returns `Result<bool, Abort>`: `Abort` stands for a JavaScript exception in
//! GrowthBook's evaluator (which then yields no result) and ends the whole evaluation, so a
//! surrounding `$not` cannot turn it into a match.

use std::borrow::Cow;
use std::cmp::Ordering;

use serde_json::Value;

use crate::conditions::compile::{
    Clause, Doc, ElemMatch, Op, Path, RelOp, RelOperand, StrictOperand, Test, VersionOp,
};
use crate::conditions::js::{self, Primitive, NULL};
use crate::conditions::{Attributes, SavedGroups};

/// Evaluation stopped where JavaScript would have thrown.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Abort;

type Outcome = Result<bool, Abort>;

/// Where a document reads its attributes from.
pub(crate) trait Source {
    /// GrowthBook's `getPath`, with D4's literal lookup of dotted keys first. A missing
    /// attribute reads as `null`.
    fn lookup(&self, path: &Path) -> Cow<'_, Value>;
}

/// The caller's attributes at the top of a condition.
pub(crate) struct Root<'a, A: ?Sized>(pub(crate) &'a A);

impl<A: Attributes + ?Sized> Source for Root<'_, A> {
    fn lookup(&self, path: &Path) -> Cow<'_, Value> {
        if let Some(v) = self.0.get(&path.full) {
            return Cow::Borrowed(v);
        }
        if !path.is_dotted() {
            return Cow::Borrowed(&NULL);
        }
        let (first, rest) = match path.parts.split_first() {
            Some(split) => split,
            None => return Cow::Borrowed(&NULL),
        };
        match self.0.get(first) {
            Some(v) => walk(v, rest),
            None => Cow::Borrowed(&NULL),
        }
    }
}

/// An array element as the attributes of an `$elemMatch` document.
struct Element<'a>(&'a Value);

impl Source for Element<'_> {
    fn lookup(&self, path: &Path) -> Cow<'_, Value> {
        if path.is_dotted() {
            if let Some(v) = self.0.as_object().and_then(|m| m.get(&*path.full)) {
                return Cow::Borrowed(v);
            }
        }
        walk(self.0, &path.parts)
    }
}

/// Follows path parts as `getPath` does: through object members, array indices and an
/// array's `length`; anything else ends the walk with `null`.
fn walk<'a>(start: &'a Value, parts: &[Box<str>]) -> Cow<'a, Value> {
    let mut current = start;
    for (i, part) in parts.iter().enumerate() {
        let next = match current {
            Value::Object(map) => map.get(&**part),
            Value::Array(items) => {
                if &**part == "length" {
                    // A number is not an object, so a longer path ends at `null`.
                    return if i + 1 == parts.len() {
                        Cow::Owned(Value::from(items.len()))
                    } else {
                        Cow::Borrowed(&NULL)
                    };
                }
                js::array_index(part).and_then(|idx| items.get(idx))
            }
            _ => None,
        };
        match next {
            Some(v) => current = v,
            None => return Cow::Borrowed(&NULL),
        }
    }
    Cow::Borrowed(current)
}

/// Told where a top-level evaluation stopped: the first clause that did not hold (or threw),
/// with the attribute value a field clause read. Resolve passes `()`, which does nothing and
/// compiles away; explain (D18) records the failure.
pub(crate) trait Observe {
    /// Clause `index` did not hold (`aborted`: it threw). `seen` is the value a field clause
    /// read (after the literal-then-nested lookup of D4); `None` for logical clauses.
    fn stopped(&mut self, index: usize, seen: Option<&Value>, aborted: bool);
}

impl Observe for () {
    #[inline(always)]
    fn stopped(&mut self, _: usize, _: Option<&Value>, _: bool) {}
}

/// `evalCondition`: every clause holds.
pub(crate) fn doc<S: Source>(source: &S, doc: &Doc, groups: &SavedGroups) -> Outcome {
    doc_observed(source, doc, groups, &mut ())
}

/// [`doc`], telling `observe` which clause stopped the evaluation.
#[inline(always)]
pub(crate) fn doc_observed<S: Source, O: Observe>(
    source: &S,
    doc: &Doc,
    groups: &SavedGroups,
    observe: &mut O,
) -> Outcome {
    for (index, clause) in doc.clauses.iter().enumerate() {
        let outcome = match clause {
            Clause::Field { path, test: t } => {
                let value = source.lookup(path);
                let outcome = test(t, &value, groups);
                if !matches!(outcome, Ok(true)) {
                    observe.stopped(index, Some(&value), outcome.is_err());
                }
                outcome
            }
            other => {
                let outcome = logical(source, other, groups);
                if !matches!(outcome, Ok(true)) {
                    observe.stopped(index, None, outcome.is_err());
                }
                outcome
            }
        };
        if !outcome? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A clause other than a field test.
fn logical<S: Source>(source: &S, clause: &Clause, groups: &SavedGroups) -> Outcome {
    Ok(match clause {
        Clause::Field { path, test: t } => test(t, &source.lookup(path), groups)?,
        Clause::Or(docs) => any_doc(source, docs, groups)?,
        Clause::And(docs) => {
            let mut all = true;
            for d in docs.iter() {
                if !self::doc(source, d, groups)? {
                    all = false;
                    break;
                }
            }
            all
        }
        Clause::Nor(docs) => !any_doc(source, docs, groups)?,
        Clause::Not(d) => !self::doc(source, d, groups)?,
        Clause::Const(b) => *b,
        Clause::Abort => return Err(Abort),
    })
}

/// The attribute paths a logical clause reads at the top level (not those inside
/// `$elemMatch` documents, which read array elements), in document order.
pub(crate) fn field_paths<'d>(clause: &'d Clause, out: &mut Vec<&'d Path>) {
    let docs = |docs: &'d [Doc], out: &mut Vec<&'d Path>| {
        for d in docs {
            for c in d.clauses.iter() {
                field_paths(c, out);
            }
        }
    };
    match clause {
        Clause::Field { path, .. } => out.push(path),
        Clause::Or(list) | Clause::And(list) | Clause::Nor(list) => docs(list, out),
        Clause::Not(d) => docs(std::slice::from_ref(d), out),
        Clause::Const(_) | Clause::Abort => {}
    }
}

fn any_doc<S: Source>(source: &S, docs: &[Doc], groups: &SavedGroups) -> Outcome {
    for d in docs {
        if doc(source, d, groups)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `evalConditionValue`.
pub(crate) fn test(t: &Test, value: &Value, groups: &SavedGroups) -> Outcome {
    Ok(match t {
        Test::StrEq(s) => match value {
            Value::String(v) => v == &**s,
            other => js::to_js_string(other) == **s,
        },
        Test::StrEqFold(s) => js::js_lowercase(&js::to_js_string(value)) == **s,
        Test::NumEq(n) => js::to_number(value) == *n,
        Test::Bool(b) => !value.is_null() && js::truthy(value) == *b,
        Test::Null => value.is_null(),
        Test::Json(expected) => js::json_equals(value, expected),
        Test::Ops(ops) => {
            for op in ops.iter() {
                if !operator(op, value, groups)? {
                    return Ok(false);
                }
            }
            true
        }
        Test::Const(b) => *b,
    })
}

/// `evalOperatorCondition`.
fn operator(op: &Op, actual: &Value, groups: &SavedGroups) -> Outcome {
    Ok(match op {
        Op::Version(kind, expected) => {
            let input = js::version_input(actual);
            let ord = js::padded_version_units(&input).cmp(expected.iter().copied());
            match kind {
                VersionOp::Eq => ord == Ordering::Equal,
                VersionOp::Ne => ord != Ordering::Equal,
                VersionOp::Gt => ord == Ordering::Greater,
                VersionOp::Gte => ord != Ordering::Less,
                VersionOp::Lt => ord == Ordering::Less,
                VersionOp::Lte => ord != Ordering::Greater,
            }
        }
        Op::Eq(positive, expected) => {
            let equal = match expected {
                StrictOperand::Value(v) => js::strict_equals(actual, v),
                StrictOperand::Never => false,
            };
            equal == *positive
        }
        Op::Rel(kind, expected) => {
            let ord = match (js::to_primitive(actual), expected) {
                (Primitive::Str(a), RelOperand::Str(b, _)) => Some(js::js_cmp_str(&a, b)),
                (Primitive::Str(a), RelOperand::Num(y)) => js::string_to_number(&a).partial_cmp(y),
                // The operand's `Number(...)` was computed at compile time.
                (Primitive::Num(x), RelOperand::Str(_, y)) => x.partial_cmp(y),
                (Primitive::Num(x), RelOperand::Num(y)) => x.partial_cmp(y),
            };
            match (kind, ord) {
                (_, None) => false,
                (RelOp::Lt, Some(o)) => o == Ordering::Less,
                (RelOp::Lte, Some(o)) => o != Ordering::Greater,
                (RelOp::Gt, Some(o)) => o == Ordering::Greater,
                (RelOp::Gte, Some(o)) => o != Ordering::Less,
            }
        }
        // `!= null` also covers a missing attribute, which reads as null.
        Op::Exists(expected) => actual.is_null() != *expected,
        Op::In { set, negate } => set.matches(actual) != *negate,
        Op::InGroup { group, negate } => {
            // A group that does not exist is an empty list (`savedGroups[id] || []`).
            let member = groups.set(group).is_some_and(|set| set.matches(actual));
            member != *negate
        }
        Op::Not(t) => !test(t, actual, groups)?,
        Op::Size(t) => match actual {
            Value::Array(items) => test(t, &Value::from(items.len()), groups)?,
            _ => false,
        },
        Op::ElemMatch(m) => match actual {
            Value::Array(items) => elem_match(m, items, groups)?,
            _ => false,
        },
        Op::All(tests) => match actual {
            Value::Array(items) => {
                let mut all = true;
                'tests: for t in tests.iter() {
                    for item in items {
                        if test(t, item, groups)? {
                            continue 'tests;
                        }
                    }
                    all = false;
                    break;
                }
                all
            }
            _ => false,
        },
        // `RegExp.prototype.test` converts its argument with `String(...)`.
        Op::Regex(Some(regex)) => regex.test(&js::to_js_string(actual)),
        Op::Regex(None) => false,
        Op::Type(name) => js::type_name(actual) == &**name,
        Op::Const(b) => *b,
    })
}

/// GrowthBook's `elemMatch`: some truthy element matches (falsy elements such as `0`, `""`
/// or `false` are skipped by the reference implementation's `actual[i] &&`).
fn elem_match(m: &ElemMatch, items: &[Value], groups: &SavedGroups) -> Outcome {
    for item in items {
        if !js::truthy(item) {
            continue;
        }
        let matched = match m {
            ElemMatch::Test(t) => test(t, item, groups)?,
            ElemMatch::Doc(d) => doc(&Element(item), d, groups)?,
            ElemMatch::Abort => return Err(Abort),
        };
        if matched {
            return Ok(true);
        }
    }
    match m {
        // `Object.keys(null)` throws before the loop, even for an empty array.
        ElemMatch::Abort => Err(Abort),
        _ => Ok(false),
    }
}
