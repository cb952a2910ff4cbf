//! Our own condition cases: the dotted-key extension (D4), coercion traps, strict compile.
//! GrowthBook's `evalCondition` vectors run in `tests/it/conformance.rs`.

use serde_json::{json, Value};

use crate::conditions::compile::{InSet, MAX_SORTED};
use crate::conditions::{Condition, SavedGroups};

// ---------------------------------------------------------------------------------------------
// Helpers

fn lenient(condition: &Value, attributes: &Value) -> bool {
    Condition::compile_lenient(condition).eval(attributes, &SavedGroups::empty())
}

/// Evaluates with the strict compile, so the case also proves the condition is importable.
fn strict(condition: &Value, attributes: &Value) -> bool {
    Condition::compile(condition)
        .unwrap_or_else(|e| panic!("{condition} should compile: {e:?}"))
        .eval(attributes, &SavedGroups::empty())
}

fn errors(condition: &Value) -> Vec<(String, String)> {
    match Condition::compile(condition) {
        Ok(_) => panic!("{condition} should be rejected"),
        Err(errors) => errors.into_iter().map(|e| (e.pointer, e.message)).collect(),
    }
}

fn pointers(condition: &Value) -> Vec<String> {
    errors(condition).into_iter().map(|(p, _)| p).collect()
}

// ---------------------------------------------------------------------------------------------
// Attribute lookup (D4)

#[test]
fn literal_dotted_key_wins_over_nested_path() {
    let attrs = json!({"app.version": "2.0.0", "app": {"version": "1.0.0"}});
    assert!(strict(&json!({"app.version": "2.0.0"}), &attrs));
    assert!(!strict(&json!({"app.version": "1.0.0"}), &attrs));
    assert!(strict(&json!({"app.version": {"$vgte": "2.0.0"}}), &attrs));
}

#[test]
fn dotted_key_falls_back_to_nested_path() {
    let attrs = json!({"app": {"version": "2.3.0", "build": {"number": 42}}});
    assert!(strict(&json!({"app.version": {"$vgte": "2.1.0"}}), &attrs));
    assert!(strict(&json!({"app.build.number": 42}), &attrs));
    assert!(!strict(&json!({"app.build.number": 41}), &attrs));
    // A path through a non-object ends at null, as GrowthBook's getPath does.
    assert!(strict(&json!({"app.version.major": null}), &attrs));
}

#[test]
fn nested_path_reads_array_indices_and_length() {
    let attrs = json!({"tags": ["a", "b", "c"]});
    assert!(strict(&json!({"tags.1": "b"}), &attrs));
    assert!(strict(&json!({"tags.length": 3}), &attrs));
    assert!(strict(&json!({"tags.length": {"$gte": 2}}), &attrs));
    // "01" is not a canonical array index, so it reads as missing.
    assert!(strict(&json!({"tags.01": null}), &attrs));
    assert!(strict(&json!({"tags.3": {"$exists": false}}), &attrs));
}

#[test]
fn missing_attribute_reads_as_null() {
    let none = json!({});
    assert!(!strict(&json!({"country": {"$in": ["US"]}}), &none));
    assert!(strict(&json!({"country": {"$nin": ["US"]}}), &none));
    assert!(strict(&json!({"country": {"$exists": false}}), &none));
    assert!(!strict(&json!({"country": {"$exists": true}}), &none));
    assert!(strict(&json!({"country": null}), &none));
    assert!(strict(&json!({"country": {"$eq": null}}), &none));
    assert!(!strict(&json!({"country": "US"}), &none));
    // Relational operators see null as 0.
    assert!(strict(&json!({"age": {"$lt": 10}}), &none));
    assert!(!strict(&json!({"age": {"$gt": 0}}), &none));
    assert!(strict(&json!({"age": {"$gte": 0}}), &none));
}

// ---------------------------------------------------------------------------------------------
// JavaScript coercion traps

#[test]
fn relational_operators_coerce_like_javascript() {
    // String attribute against a number operand: the string is converted ("8" > 5).
    assert!(strict(&json!({"n": {"$gt": 5}}), &json!({"n": "8"})));
    assert!(!strict(&json!({"n": {"$gt": 5}}), &json!({"n": "abc"})));
    // Number attribute against a string operand: the operand is converted.
    assert!(strict(&json!({"n": {"$gt": "5"}}), &json!({"n": 8})));
    // Two strings compare by code units: "9" > "10".
    assert!(!strict(&json!({"n": {"$lt": "10"}}), &json!({"n": "9"})));
    assert!(strict(&json!({"n": {"$gt": "10"}}), &json!({"n": "9"})));
    // NaN makes every comparison false, including both directions.
    assert!(!strict(&json!({"n": {"$lte": 5}}), &json!({"n": "five"})));
    assert!(!strict(&json!({"n": {"$gte": 5}}), &json!({"n": "five"})));
    // Booleans compare as 0 and 1, blank strings as 0, hex strings as their value.
    assert!(strict(&json!({"n": {"$gt": 0}}), &json!({"n": true})));
    assert!(strict(&json!({"n": {"$lte": 0}}), &json!({"n": "  "})));
    assert!(strict(&json!({"n": {"$gt": 254}}), &json!({"n": "0xff"})));
}

#[test]
fn plain_values_coerce_like_javascript() {
    // A number condition matches `value * 1`.
    assert!(strict(&json!({"n": 10}), &json!({"n": "10"})));
    assert!(strict(&json!({"n": 10}), &json!({"n": " 10 "})));
    assert!(strict(&json!({"n": 255}), &json!({"n": "0xff"})));
    assert!(strict(&json!({"n": 1}), &json!({"n": true})));
    assert!(strict(&json!({"n": 5}), &json!({"n": [5]})));
    // null, "" and [] are all 0 as numbers, so a 0 condition matches a missing attribute.
    assert!(strict(&json!({"n": 0}), &json!({})));
    assert!(strict(&json!({"n": 0}), &json!({"n": ""})));
    assert!(strict(&json!({"n": 0}), &json!({"n": []})));
    // A string condition matches `value + ""`.
    assert!(strict(&json!({"s": "10"}), &json!({"s": 10})));
    assert!(strict(&json!({"s": "true"}), &json!({"s": true})));
    assert!(strict(&json!({"s": "null"}), &json!({})));
    assert!(strict(&json!({"s": "a,b"}), &json!({"s": ["a", "b"]})));
    assert!(strict(&json!({"s": "1e+21"}), &json!({"s": 1e21})));
    assert!(strict(&json!({"s": "1.5"}), &json!({"s": 1.5})));
    assert!(!strict(&json!({"s": "1.50"}), &json!({"s": 1.5})));
    // A boolean condition is truthiness, but never matches null or a missing attribute.
    assert!(strict(&json!({"b": true}), &json!({"b": "false"})));
    assert!(strict(&json!({"b": false}), &json!({"b": 0})));
    assert!(strict(&json!({"b": false}), &json!({"b": ""})));
    assert!(!strict(&json!({"b": false}), &json!({})));
    assert!(!strict(&json!({"b": false}), &json!({"b": null})));
}

#[test]
fn strict_operators_do_not_coerce() {
    assert!(!strict(&json!({"n": {"$eq": 10}}), &json!({"n": "10"})));
    assert!(strict(&json!({"n": {"$ne": 10}}), &json!({"n": "10"})));
    assert!(strict(&json!({"n": {"$eq": 10}}), &json!({"n": 10.0})));
    assert!(!strict(&json!({"n": {"$eq": 0}}), &json!({})));
    assert!(!strict(&json!({"n": {"$in": [1, 2]}}), &json!({"n": "1"})));
    assert!(strict(&json!({"n": {"$in": [1, 2]}}), &json!({"n": 1.0})));
    // $eq with an array compares identity in JavaScript: never equal (lenient only).
    assert!(!lenient(&json!({"a": {"$eq": [1]}}), &json!({"a": [1]})));
    assert!(lenient(&json!({"a": {"$ne": [1]}}), &json!({"a": [1]})));
    // Plain array and object conditions compare as JSON.
    assert!(strict(&json!({"a": [1, "x"]}), &json!({"a": [1.0, "x"]})));
    assert!(strict(&json!({"a": {"k": [1]}}), &json!({"a": {"k": [1]}})));
}

#[test]
fn case_insensitive_operators_fold_strings_only() {
    assert!(strict(
        &json!({"c": {"$ini": ["us", "ca"]}}),
        &json!({"c": "US"})
    ));
    assert!(strict(
        &json!({"c": {"$nini": ["us"]}}),
        &json!({"c": "GB"})
    ));
    assert!(!strict(
        &json!({"c": {"$ini": ["straße"]}}),
        &json!({"c": "STRASSE"})
    ));
    assert!(strict(
        &json!({"c": {"$ini": ["ΣΑΣ"]}}),
        &json!({"c": "σας"})
    ));
    assert!(strict(
        &json!({"t": {"$alli": ["ONE", 2]}}),
        &json!({"t": ["one", "2"]})
    ));
    assert!(!strict(&json!({"c": {"$ini": [1]}}), &json!({"c": "1"})));
}

#[test]
fn regex_follows_javascript_semantics() {
    // \d is ASCII-only in JavaScript, unlike the regex crate's default.
    assert!(!strict(
        &json!({"x": {"$regex": "^\\d+$"}}),
        &json!({"x": "١٢"})
    ));
    assert!(strict(
        &json!({"x": {"$regex": "^\\d+$"}}),
        &json!({"x": "12"})
    ));
    // `.` stops at \r as well as \n.
    assert!(!strict(
        &json!({"x": {"$regex": "^a.b$"}}),
        &json!({"x": "a\rb"})
    ));
    // A supplementary character is two UTF-16 units, so one `.` does not cover it.
    assert!(!strict(
        &json!({"x": {"$regex": "^.$"}}),
        &json!({"x": "😀"})
    ));
    assert!(strict(
        &json!({"x": {"$regex": "^..$"}}),
        &json!({"x": "😀"})
    ));
    // `\u{41}` is 41 `u`s without the u flag; `[]` matches nothing; `]` is a literal.
    assert!(strict(
        &json!({"x": {"$regex": "^\\u{2}$"}}),
        &json!({"x": "uu"})
    ));
    assert!(!strict(
        &json!({"x": {"$regex": "a[]"}}),
        &json!({"x": "a"})
    ));
    assert!(strict(&json!({"x": {"$regex": "^]$"}}), &json!({"x": "]"})));
    // JavaScript's case folding never maps non-ASCII to ASCII (ſ is not s, K is not k).
    assert!(!strict(&json!({"x": {"$regexi": "s"}}), &json!({"x": "ſ"})));
    assert!(!strict(
        &json!({"x": {"$regexi": "k"}}),
        &json!({"x": "\u{212a}"})
    ));
    assert!(strict(
        &json!({"x": {"$regexi": "^[a-z]+$"}}),
        &json!({"x": "AbC"})
    ));
    assert!(strict(&json!({"x": {"$regexi": "ω"}}), &json!({"x": "Ω"})));
    // The attribute is converted with String(...): numbers, null and arrays can match.
    assert!(strict(&json!({"n": {"$regex": "^1"}}), &json!({"n": 10})));
    assert!(strict(&json!({"n": {"$regex": "^null$"}}), &json!({})));
    assert!(strict(
        &json!({"n": {"$regex": "^a,b$"}}),
        &json!({"n": ["a", "b"]})
    ));
}

#[test]
fn invalid_or_unsupported_patterns_evaluate_false() {
    for pattern in ["(?=a)", "(a)\\1", "[z-a]", "a**", "("] {
        assert!(
            !lenient(&json!({"x": {"$regex": pattern}}), &json!({"x": "aa"})),
            "{pattern}"
        );
        // Not even under $not: the operator itself is false, so $not makes it true.
        assert!(lenient(
            &json!({"x": {"$not": {"$regex": pattern}}}),
            &json!({"x": "aa"})
        ));
    }
}

#[test]
fn version_operators_pad_like_growthbook() {
    let v = |op: &str, operand: Value, version: Value| -> bool {
        strict(&json!({ "v": { op: operand } }), &json!({ "v": version }))
    };
    assert!(v("$vgt", json!("1.9.0"), json!("1.10.0")));
    assert!(v("$vlt", json!("1.0.0"), json!("1.0.0-rc.1")));
    assert!(v("$veq", json!("1.2.3"), json!("v1.2.3+build.7")));
    assert!(v("$vgte", json!("2.1.0"), json!("2.1.0")));
    assert!(v("$vlte", json!("2.1.0"), json!("2.0.99")));
    assert!(v("$vne", json!("2.1.0"), json!("2.1")));
    // A number attribute is read as its string; a missing one as "0".
    assert!(v("$veq", json!("2"), json!(2)));
    assert!(strict(&json!({"v": {"$vlt": "0.0.1"}}), &json!({})));
}

#[test]
fn logical_operators() {
    let attrs = json!({"a": 1, "b": 2});
    assert!(strict(&json!({"$or": [{"a": 2}, {"b": 2}]}), &attrs));
    assert!(!strict(&json!({"$and": [{"a": 1}, {"b": 3}]}), &attrs));
    assert!(strict(&json!({"$nor": [{"a": 2}, {"b": 3}]}), &attrs));
    assert!(strict(&json!({"$not": {"a": 2}}), &attrs));
    // GrowthBook treats an empty $or as true (MongoDB would reject it).
    assert!(strict(&json!({"$or": []}), &attrs));
    assert!(!strict(&json!({"$nor": []}), &attrs));
    // Where JavaScript throws, the whole condition fails, even under $not.
    assert!(!lenient(&json!({"$not": {"$or": [null]}}), &attrs));
    assert!(!lenient(&json!({"$or": [null]}), &attrs));
    assert!(lenient(&json!({"$or": [{"a": 1}, null]}), &attrs));
}

#[test]
fn elem_match_size_all_and_type() {
    let attrs = json!({"items": [0, {"sku": "a-1", "qty": 3}, {"sku": "b-2", "qty": 0}], "tags": ["x", "y"]});
    assert!(strict(
        &json!({"items": {"$elemMatch": {"sku": {"$regex": "^b-"}}}}),
        &attrs
    ));
    assert!(!strict(
        &json!({"items": {"$elemMatch": {"qty": {"$gt": 5}}}}),
        &attrs
    ));
    // Falsy elements are skipped, as in GrowthBook (`actual[i] && ...`).
    assert!(!strict(
        &json!({"items": {"$elemMatch": {"$eq": 0}}}),
        &attrs
    ));
    assert!(strict(&json!({"items": {"$size": 3}}), &attrs));
    assert!(strict(&json!({"tags": {"$size": {"$lt": 3}}}), &attrs));
    assert!(strict(&json!({"tags": {"$all": ["y", "x"]}}), &attrs));
    assert!(!strict(&json!({"tags": {"$all": ["y", "z"]}}), &attrs));
    assert!(strict(&json!({"tags": {"$type": "array"}}), &attrs));
    assert!(strict(&json!({"none": {"$type": "null"}}), &attrs));
}

#[test]
fn lists_of_every_length_match_exactly() {
    // Short lists are searched and long ones hashed: membership must not depend on which, for
    // `$in`, `$nin`, `$ini`, `$nini` and saved groups alike.
    let none = SavedGroups::empty();
    for len in [
        0,
        1,
        2,
        MAX_SORTED - 1,
        MAX_SORTED,
        MAX_SORTED + 1,
        MAX_SORTED + 2,
        100,
        3000,
    ] {
        let mut members: Vec<String> = (0..len).map(|i| format!("User-{i}")).collect();
        if len > 2 {
            members[1] = "ÉCOLE".to_owned();
            members[2] = members[0].clone(); // a repeat
        }
        let mut list: Vec<Value> = members.iter().map(|m| json!(m)).collect();
        list.push(json!(7)); // numbers are indexed apart from strings
        let hashed = InSet::new(&list, false).strings_hashed();
        assert_eq!(hashed, len > MAX_SORTED, "{len} strings");
        let groups = SavedGroups::new([("g".to_owned(), list.clone())]);
        let compile = |c: Value| Condition::compile(&c).expect("valid");
        // (name, condition, folds, negates, reads the saved groups)
        let conditions = [
            ("$in", compile(json!({"u": {"$in": list}})), false, false),
            ("$nin", compile(json!({"u": {"$nin": list}})), false, true),
            (
                "arr $in",
                compile(json!({"arr": {"$in": list}})),
                false,
                false,
            ),
            ("$ini", compile(json!({"u": {"$ini": list}})), true, false),
            ("$nini", compile(json!({"u": {"$nini": list}})), true, true),
            (
                "$inGroup",
                compile(json!({"u": {"$inGroup": "g"}})),
                false,
                false,
            ),
            (
                "$notInGroup",
                compile(json!({"u": {"$notInGroup": "g"}})),
                false,
                true,
            ),
        ];
        // Every member of a short list, a sample of a long one; each also folded and extended.
        let sampled: Vec<&String> = members.iter().step_by(len / 40 + 1).collect();
        let mut candidates: Vec<String> = sampled.iter().map(|m| m.to_string()).collect();
        candidates.extend(sampled.iter().map(|m| m.to_lowercase()));
        candidates.extend(sampled.iter().map(|m| format!("{m}x")));
        let others = ["", "7", "User-", "ÉCOLE", "école", "User-99999"];
        candidates.extend(others.map(str::to_owned));
        for candidate in &candidates {
            let attrs = json!({"u": candidate, "arr": ["none", candidate]});
            for (name, condition, fold, negate) in &conditions {
                let member = if *fold {
                    let folded = candidate.to_lowercase();
                    members.iter().any(|m| m.to_lowercase() == folded)
                } else {
                    members.contains(candidate)
                };
                let saved = if name.contains("Group") {
                    &groups
                } else {
                    &none
                };
                let got = condition.eval(&attrs, saved);
                assert_eq!(
                    got,
                    member != *negate,
                    "{name}, {len} strings, {candidate:?}"
                );
            }
        }
        assert!(conditions[0].1.eval(&json!({"u": 7}), &none));
        assert!(!conditions[0].1.eval(&json!({"u": 8}), &none));
        assert!(conditions[5].1.eval(&json!({"u": 7}), &groups));
    }
}

// ---------------------------------------------------------------------------------------------
// Saved groups (D2)

#[test]
fn saved_groups_present_and_missing() {
    let groups = SavedGroups::new([
        (
            "beta".to_owned(),
            vec![json!("user-1"), json!("user-2"), json!(7)],
        ),
        ("empty".to_owned(), vec![]),
    ]);
    let in_beta = Condition::compile(&json!({"user_id": {"$inGroup": "beta"}})).expect("valid");
    let not_beta = Condition::compile(&json!({"user_id": {"$notInGroup": "beta"}})).expect("valid");
    let in_unknown =
        Condition::compile(&json!({"user_id": {"$inGroup": "unknown"}})).expect("valid");
    let not_unknown =
        Condition::compile(&json!({"user_id": {"$notInGroup": "unknown"}})).expect("valid");

    let member = json!({"user_id": "user-2"});
    let outsider = json!({"user_id": "user-3"});
    assert!(in_beta.eval(&member, &groups));
    assert!(!in_beta.eval(&outsider, &groups));
    assert!(!not_beta.eval(&member, &groups));
    assert!(not_beta.eval(&outsider, &groups));
    // A missing group is an empty list.
    assert!(!in_unknown.eval(&member, &groups));
    assert!(not_unknown.eval(&member, &groups));
    // Membership is strict: "7" is not 7.
    assert!(!in_beta.eval(&json!({"user_id": "7"}), &groups));
    assert!(in_beta.eval(&json!({"user_id": 7}), &groups));
    // An array attribute matches when any element is in the group.
    assert!(in_beta.eval(&json!({"user_id": ["x", "user-1"]}), &groups));
    assert!(!in_beta.eval(&member, &SavedGroups::empty()));

    assert_eq!(groups.get("beta").map(<[Value]>::len), Some(3));
    assert_eq!(groups.get("empty"), Some(&[][..]));
    assert_eq!(groups.get("unknown"), None);
}

// ---------------------------------------------------------------------------------------------
// Attribute sources

#[test]
fn attribute_sources_agree() {
    use std::collections::{BTreeMap, HashMap};

    use crate::conditions::Layered;

    let condition = Condition::compile(&json!({"country": "US", "app.version": {"$vgte": "2.0"}}))
        .expect("valid");
    let value = json!({"country": "US", "app": {"version": "2.1"}});
    let map = value.as_object().cloned().expect("object");
    let hash: HashMap<String, Value> = map.clone().into_iter().collect();
    let btree: BTreeMap<String, Value> = map.clone().into_iter().collect();
    let groups = SavedGroups::empty();
    assert!(condition.eval(&value, &groups));
    assert!(condition.eval(&map, &groups));
    assert!(condition.eval(&hash, &groups));
    assert!(condition.eval(&btree, &groups));
    assert!(!condition.eval(&json!(["US"]), &groups));

    // Identity fields win over request attributes of the same name (D3 point 6).
    let identity = json!({"country": "CA"});
    let layered = Layered {
        front: &identity,
        back: &value,
    };
    assert!(!condition.eval(&layered, &groups));
    let us = Condition::compile(&json!({"country": "CA", "app.version": "2.1"})).expect("valid");
    assert!(us.eval(&layered, &groups));
}

// ---------------------------------------------------------------------------------------------
// Strict compile (D4)

#[test]
fn strict_rejects_unknown_operator() {
    assert_eq!(
        errors(&json!({"name": {"$regx": "hello"}})),
        vec![(
            "/name/$regx".to_owned(),
            "unknown operator $regx".to_owned()
        )]
    );
}

#[test]
fn strict_rejects_look_around() {
    let found = errors(&json!({"name": {"$regex": "(?=x)"}}));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, "/name/$regex");
    assert!(found[0].1.contains("look-ahead"), "{}", found[0].1);
    assert_eq!(
        pointers(&json!({"ua": {"$regexi": "(?<!x)y"}})),
        vec!["/ua/$regexi"]
    );
}

#[test]
fn strict_rejects_back_reference() {
    let found = errors(&json!({"name": {"$regex": "(a)\\1"}}));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, "/name/$regex");
    assert!(found[0].1.contains("back-references"), "{}", found[0].1);
}

#[test]
fn strict_rejects_long_pattern() {
    let ok = "a".repeat(1024);
    assert!(Condition::compile(&json!({"name": {"$regex": ok}})).is_ok());
    let long = "a".repeat(1025);
    assert_eq!(
        errors(&json!({"name": {"$regex": long}})),
        vec![(
            "/name/$regex".to_owned(),
            "pattern is 1025 bytes long; at most 1024 are accepted".to_owned()
        )]
    );
}

#[test]
fn strict_rejects_invalid_pattern() {
    assert_eq!(
        errors(&json!({"name": {"$regex": "/???***[)"}})),
        vec![(
            "/name/$regex".to_owned(),
            "invalid regular expression \"/???***[)\": nothing to repeat".to_owned()
        )]
    );
}

#[test]
fn strict_rejects_in_with_non_array() {
    assert_eq!(
        errors(&json!({"country": {"$in": "US"}})),
        vec![(
            "/country/$in".to_owned(),
            "$in expects an array of values, not \"US\"".to_owned()
        )]
    );
}

#[test]
fn strict_rejects_non_object_top_level() {
    for doc in [json!([]), json!("x"), json!(1), json!(true), json!(null)] {
        assert_eq!(pointers(&doc), vec![String::new()], "{doc}");
    }
}

#[test]
fn strict_reports_every_problem_with_nested_pointers() {
    let doc = json!({
        "$and": [
            {"country": "US"},
            {"age": {"$gt": [18]}},
            {"$or": {"a": 1}}
        ],
        "tags": {"$in": [["nested"]], "$size": "2", "$exists": 1},
        "x/y~z": {"$type": "undefined"},
        "$in": [1]
    });
    assert_eq!(
        pointers(&doc),
        vec![
            "/$and/1/age/$gt",
            "/$and/2/$or",
            "/$in",
            "/tags/$exists",
            "/tags/$in/0",
            "/tags/$size",
            "/x~1y~0z/$type",
        ]
    );
}

#[test]
fn strict_rejects_other_wrong_shapes() {
    for (doc, pointer) in [
        (json!({"a": {"$eq": [1]}}), "/a/$eq"),
        (json!({"a": {"$ne": {"b": 1}}}), "/a/$ne"),
        (json!({"a": {"$lt": null}}), "/a/$lt"),
        (json!({"a": {"$vgt": true}}), "/a/$vgt"),
        (json!({"a": {"$size": -1}}), "/a/$size"),
        (json!({"a": {"$size": {"b": 1}}}), "/a/$size"),
        (json!({"a": {"$elemMatch": null}}), "/a/$elemMatch"),
        (json!({"a": {"$elemMatch": "x"}}), "/a/$elemMatch"),
        (json!({"a": {"$all": "x"}}), "/a/$all"),
        (json!({"a": {"$inGroup": 1}}), "/a/$inGroup"),
        (json!({"a": {"$type": 1}}), "/a/$type"),
        (json!({"a": {"$regex": 1}}), "/a/$regex"),
        (json!({"a": {"$in": [1], "b": 2}}), "/a"),
        (json!({"$not": [1]}), "/$not"),
        (json!({"$nor": [1]}), "/$nor/0"),
        (json!({"a": {"$not": {"$bad": 1}}}), "/a/$not/$bad"),
    ] {
        assert_eq!(pointers(&doc), vec![pointer.to_owned()], "{doc}");
    }
}

#[test]
fn error_displays_pointer_and_message() {
    let err = Condition::compile(&json!({"a": {"$in": 1}}))
        .err()
        .and_then(|e| e.into_iter().next())
        .expect("an error");
    assert_eq!(
        err.to_string(),
        "/a/$in: $in expects an array of values, not 1"
    );
    let via_try: Result<Condition, _> = Condition::try_from(&json!({"a": 1}));
    assert!(via_try.is_ok());
}

// ---------------------------------------------------------------------------------------------
// Shape of the API

#[test]
fn always_true_only_for_empty_document() {
    assert!(Condition::compile(&json!({}))
        .expect("valid")
        .is_always_true());
    assert!(!Condition::compile(&json!({"a": 1}))
        .expect("valid")
        .is_always_true());
    assert!(!Condition::compile(&json!({"$or": []}))
        .expect("valid")
        .is_always_true());
}

#[test]
fn condition_is_clone_debug_send_sync() {
    fn assert_traits<T: Clone + std::fmt::Debug + Send + Sync + 'static>() {}
    assert_traits::<Condition>();
    assert_traits::<SavedGroups>();
    let c = Condition::compile(&json!({"a": {"$regex": "^x"}})).expect("valid");
    assert!(c.clone().eval(&json!({"a": "xy"}), &SavedGroups::empty()));
}

// ---------------------------------------------------------------------------------------------
// Hostile input

/// `{"$and": [{"$and": [... {"a": 1} ...]}]}`, built directly: `json!` would re-serialise the
/// inner document at every level.
fn nested_and(levels: usize) -> Value {
    let mut doc = json!({"a": 1});
    for _ in 0..levels {
        let mut map = serde_json::Map::new();
        map.insert("$and".to_owned(), Value::Array(vec![doc]));
        doc = Value::Object(map);
    }
    doc
}

#[test]
fn nesting_is_capped() {
    let attrs = json!({"a": 1});
    // 60 levels compile and match.
    assert!(strict(&nested_and(60), &attrs));
    // 70 levels are refused, with the pointer of the first part too deep.
    let found = errors(&nested_and(70));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, "/$and/0".repeat(65));
    assert_eq!(found[0].1, "conditions are nested deeper than 64 levels");
    // The lenient compile evaluates the part beyond the cap as false.
    assert!(!lenient(&nested_and(70), &attrs));
    // Deep documents neither overflow the stack at compile nor at evaluation.
    assert!(!lenient(&nested_and(1_000), &attrs));
}

#[test]
fn odd_documents_never_panic() {
    let docs = [
        json!({"$or": "abc"}),
        json!({"$and": {"length": 3, "0": {}, "1": {}}}),
        json!({"a": {"$elemMatch": [1, {"$in": null}]}}),
        json!({"a": {"$size": {"$size": {"$size": 1}}}}),
        json!({"a": {"$regex": "\\"}}),
        json!({"a": {"$regex": "[\\ud800-\\udfff]{0,99999}"}}),
        json!({"a": {"$regexi": "(?<n>x)(?<n>y)"}}),
        json!({"": {"$gt": 1e308}}),
        json!({"..": {"$vgt": "\u{0}\n+"}}),
        json!("😀"),
    ];
    let attrs = [
        json!({}),
        json!({"a": [[[]]], "": 1e308, "..": "v+"}),
        json!({"0": "\u{fffd}"}),
        json!({"a": "😀😀"}),
    ];
    for doc in &docs {
        let condition = Condition::compile_lenient(doc);
        for a in &attrs {
            let _ = condition.eval(a, &SavedGroups::empty());
        }
        let _ = Condition::compile(doc);
    }
}

// ---------------------------------------------------------------------------------------------
// Shared patterns

#[test]
fn conditions_compiled_with_one_pattern_set_share_each_distinct_pattern() {
    let mut patterns = crate::conditions::Patterns::new();
    let groups = SavedGroups::empty();
    let exact = json!({"email": {"$regex": "^ann@"}});
    let folded = json!({"email": {"$regexi": "^ann@"}});
    let a = Condition::compile_with(&exact, &mut patterns).unwrap();
    let b = Condition::compile_with(&exact, &mut patterns).unwrap();
    assert_eq!(patterns.len(), 1, "the repeated pattern compiled once");
    // The `i` flag is part of the key: same text, another pattern.
    let c = Condition::compile_with(&folded, &mut patterns).unwrap();
    assert_eq!(patterns.len(), 2);
    let upper = json!({"email": "ANN@example.org"});
    let lower = json!({"email": "ann@example.org"});
    assert!(a.eval(&lower, &groups) && b.eval(&lower, &groups));
    assert!(!a.eval(&upper, &groups) && !b.eval(&upper, &groups));
    assert!(c.eval(&upper, &groups) && c.eval(&lower, &groups));
    // An invalid pattern is still reported, each time it appears.
    let bad = json!({"email": {"$regex": "(?<=x)y"}});
    assert!(Condition::compile_with(&bad, &mut patterns).is_err());
    assert!(Condition::compile_with(&bad, &mut patterns).is_err());
    assert_eq!(patterns.len(), 2);
}
