//! GrowthBook's public SDK test vectors (D4, D5), vendored in `tests/data` with their licence.
//! One `check` helper per section; every failure names its case, and each test prints how many
//! cases it ran.

use flowgate_domain::bucketing::{
    bucket_ranges, choose_variation, equal_weights, hash, BucketRange, Namespace,
};
use flowgate_domain::conditions::{Condition, SavedGroups};
use flowgate_domain::sticky::{
    doc_key, lookup, record, Identifier, StickyDoc, StickyDocs, StickyExperiment, StickyLookup,
};
use serde_json::Value;

const CASES: &str = include_str!("../data/growthbook-cases.json");

fn section(name: &str) -> Vec<Value> {
    let all: Value = serde_json::from_str(CASES).expect("cases parse");
    all[name]
        .as_array()
        .unwrap_or_else(|| panic!("section {name} missing"))
        .clone()
}

/// Runs every case of a section through `check`, collecting failures, and reports the count.
fn run(name: &str, expected_count: usize, check: impl Fn(&Value) -> Result<(), String>) {
    let cases = section(name);
    assert_eq!(
        cases.len(),
        expected_count,
        "{name}: the vendored file changed"
    );
    let failures: Vec<String> = cases
        .iter()
        .enumerate()
        .filter_map(|(i, case)| check(case).err().map(|e| format!("  #{i} {e}")))
        .collect();
    assert!(
        failures.is_empty(),
        "{name}: {} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    println!("conformance {name}: {} cases passed", cases.len());
}

const TOLERANCE: f64 = 1e-6;

#[test]
fn conformance_eval_condition() {
    run("evalCondition", 248, |case| {
        let name = case[0].as_str().unwrap_or("?");
        let condition = Condition::compile_lenient(&case[1]);
        let groups = match case.get(4).and_then(Value::as_object) {
            Some(map) => SavedGroups::new(
                map.iter()
                    .map(|(k, v)| (k.clone(), v.as_array().cloned().unwrap_or_default())),
            ),
            None => SavedGroups::empty(),
        };
        let expected = case[3].as_bool().ok_or("expected is not a bool")?;
        let got = condition.eval(&case[2], &groups);
        (got == expected)
            .then_some(())
            .ok_or_else(|| format!("{name}: expected {expected}, got {got}"))
    });
}

#[test]
fn conformance_hash() {
    run("hash", 15, |case| {
        let seed = case[0].as_str().ok_or("seed")?;
        let value = case[1].as_str().ok_or("value")?;
        let version =
            u32::try_from(case[2].as_u64().ok_or("version")?).map_err(|e| e.to_string())?;
        let got = hash(seed, value, version);
        let expected = case[3].as_f64();
        let ok = match (got, expected) {
            (None, None) => true,
            (Some(g), Some(e)) => (g - e).abs() < 1e-9,
            _ => false,
        };
        ok.then_some(()).ok_or_else(|| {
            format!("hash({seed:?}, {value:?}, {version}): expected {expected:?}, got {got:?}")
        })
    });
}

fn ranges_of(v: &Value) -> Vec<BucketRange> {
    v.as_array()
        .map(|rs| {
            rs.iter()
                .map(|r| BucketRange {
                    start: r[0].as_f64().unwrap_or(f64::NAN),
                    end: r[1].as_f64().unwrap_or(f64::NAN),
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn conformance_get_bucket_range() {
    run("getBucketRange", 13, |case| {
        let name = case[0].as_str().unwrap_or("?");
        let args = &case[1];
        let n =
            usize::try_from(args[0].as_u64().ok_or("numVariations")?).map_err(|e| e.to_string())?;
        let coverage = args[1].as_f64().ok_or("coverage")?;
        let weights: Option<Vec<f64>> = args[2]
            .as_array()
            .map(|w| w.iter().filter_map(Value::as_f64).collect());
        let got = bucket_ranges(n, coverage, weights.as_deref());
        let expected = ranges_of(&case[2]);
        let same = got.len() == expected.len()
            && got.iter().zip(&expected).all(|(g, e)| {
                (g.start - e.start).abs() < TOLERANCE && (g.end - e.end).abs() < TOLERANCE
            });
        same.then_some(())
            .ok_or_else(|| format!("{name}: expected {expected:?}, got {got:?}"))
    });
}

#[test]
fn conformance_choose_variation() {
    run("chooseVariation", 13, |case| {
        let name = case[0].as_str().unwrap_or("?");
        let n = case[1].as_f64().ok_or("n")?;
        let ranges = ranges_of(&case[2]);
        let expected = case[3].as_i64().ok_or("expected")?;
        let got = choose_variation(n, &ranges).map_or(-1, |i| i as i64);
        (got == expected)
            .then_some(())
            .ok_or_else(|| format!("{name}: expected {expected}, got {got}"))
    });
}

#[test]
fn conformance_in_namespace() {
    run("inNamespace", 16, |case| {
        let name = case[0].as_str().unwrap_or("?");
        let user = case[1].as_str().ok_or("user")?;
        let ns = &case[2];
        let namespace = Namespace {
            id: ns[0].as_str().ok_or("namespace id")?.to_owned(),
            start: ns[1].as_f64().ok_or("start")?,
            end: ns[2].as_f64().ok_or("end")?,
        };
        let expected = case[3].as_bool().ok_or("expected")?;
        let got = namespace.contains(user);
        (got == expected)
            .then_some(())
            .ok_or_else(|| format!("{name}: expected {expected}, got {got}"))
    });
}

#[test]
fn conformance_get_equal_weights() {
    run("getEqualWeights", 6, |case| {
        let n = case[0].as_i64().ok_or("n")?;
        let expected: Vec<f64> = case[1]
            .as_array()
            .ok_or("weights")?
            .iter()
            .filter_map(Value::as_f64)
            .collect();
        let got = equal_weights(n);
        let same = got.len() == expected.len()
            && got
                .iter()
                .zip(&expected)
                .all(|(g, e)| (g - e).abs() < TOLERANCE);
        same.then_some(())
            .ok_or_else(|| format!("getEqualWeights({n}): expected {expected:?}, got {got:?}"))
    });
}

const STICKY: &str = include_str!("../data/growthbook-sticky-and-run.json");

/// A GrowthBook value as its SDK turns it into a string for documents and hashing (`toString`:
/// a string as is, anything else as JSON); a missing or falsy value is empty.
fn attribute_text(attributes: &Value, name: &str) -> String {
    match attributes.get(name) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) if n.as_f64() == Some(0.0) => String::new(),
        Some(other) => other.to_string(),
    }
}

fn docs_json(docs: &StickyDocs) -> Value {
    docs.iter()
        .map(|(key, doc)| {
            (
                key.clone(),
                serde_json::json!({
                    "attributeName": doc.attribute_name,
                    "attributeValue": doc.attribute_value,
                    "assignments": doc.assignments,
                }),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// One `stickyBucket` case: GrowthBook's experiment run for the feature's (only) experiment
/// rule, the sticky decisions made by `flowgate_domain::sticky` on the documents the SDK would
/// have loaded (those of the user's current values of the rule's hash and fallback
/// attributes), then the result and the documents compared with the case's.
fn check_sticky(case: &Value) -> Result<(), String> {
    let name = case[0].as_str().unwrap_or("?");
    let fail = |what: String| format!("{name}: {what}");
    let attributes = &case[1]["attributes"];
    let feature = case[3].as_str().ok_or_else(|| fail("feature key".into()))?;
    let rules = case[1]["features"][feature]["rules"]
        .as_array()
        .ok_or_else(|| fail("rules".into()))?;
    let [rule] = rules.as_slice() else {
        return Err(fail(format!("{} rules: one is handled", rules.len())));
    };
    let key = rule["key"].as_str().unwrap_or(feature);
    let seed = rule["seed"].as_str().unwrap_or(key);
    let hash_attribute = rule["hashAttribute"].as_str().unwrap_or("id");
    let fallback_attribute = rule["fallbackAttribute"].as_str();
    let sticky_on = rule["disableStickyBucketing"] != Value::Bool(true);
    let version = |field: &str| u32::try_from(rule[field].as_u64().unwrap_or(0)).unwrap_or(0);
    let variations = rule["variations"]
        .as_array()
        .ok_or_else(|| fail("variations".into()))?;
    let meta_keys: Vec<&str> = rule["meta"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m["key"].as_str()).collect())
        .unwrap_or_default();

    // The documents the SDK loads: those of the user's current identifier values.
    let stored: Vec<StickyDoc> = case[2]
        .as_array()
        .ok_or_else(|| fail("stored documents".into()))?
        .iter()
        .map(|d| StickyDoc {
            attribute_name: d["attributeName"].as_str().unwrap_or_default().to_owned(),
            attribute_value: d["attributeValue"].as_str().unwrap_or_default().to_owned(),
            assignments: d["assignments"]
                .as_object()
                .map(|a| {
                    a.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect();
    let mut docs: StickyDocs = StickyDocs::new();
    for attribute in std::iter::once(hash_attribute).chain(fallback_attribute) {
        let value = attribute_text(attributes, attribute);
        for doc in &stored {
            if doc.attribute_name == attribute && doc.attribute_value == value {
                docs.insert(doc_key(attribute, &value), doc.clone());
            }
        }
    }

    let primary = attribute_text(attributes, hash_attribute);
    let fallback = fallback_attribute
        .map(|f| (f, attribute_text(attributes, f)))
        .filter(|(_, v)| !v.is_empty());
    let (used_attribute, used_value) = match (&fallback, primary.is_empty() && sticky_on) {
        (Some((f, v)), true) => (*f, v.clone()),
        _ => (hash_attribute, primary.clone()),
    };
    let experiment = StickyExperiment {
        key,
        bucket_version: version("bucketVersion"),
        min_bucket_version: version("minBucketVersion"),
        variant_keys: &meta_keys,
    };
    let result = (|| {
        if used_value.is_empty() {
            return None;
        }
        let found = if sticky_on {
            lookup(
                &docs,
                Identifier {
                    name: hash_attribute,
                    value: &primary,
                },
                fallback
                    .as_ref()
                    .map(|(f, v)| Identifier { name: f, value: v }),
                &experiment,
            )
        } else {
            StickyLookup::None
        };
        if !matches!(found, StickyLookup::Variant(_)) {
            let condition =
                Condition::compile_lenient(rule.get("condition").unwrap_or(&Value::Null));
            if rule.get("condition").is_some() && !condition.eval(attributes, &SavedGroups::empty())
            {
                return None;
            }
        }
        let hash_version = u32::try_from(rule["hashVersion"].as_u64().unwrap_or(1)).ok()?;
        let n = hash(seed, &used_value, hash_version)?;
        let chosen = match found {
            StickyLookup::Variant(index) => index,
            StickyLookup::Blocked => return None,
            StickyLookup::None => {
                let weights: Option<Vec<f64>> = rule["weights"]
                    .as_array()
                    .map(|w| w.iter().filter_map(Value::as_f64).collect());
                let ranges = bucket_ranges(
                    variations.len(),
                    rule["coverage"].as_f64().unwrap_or(1.0),
                    weights.as_deref(),
                );
                choose_variation(n, &ranges)?
            }
        };
        let variant_key = meta_keys
            .get(chosen)
            .map_or_else(|| chosen.to_string(), |k| (*k).to_owned());
        if sticky_on {
            record(
                &mut docs,
                Identifier {
                    name: used_attribute,
                    value: &used_value,
                },
                &experiment,
                &variant_key,
            );
        }
        Some(serde_json::json!({
            "bucket": n, "featureId": feature, "hashAttribute": used_attribute,
            "hashUsed": true, "hashValue": used_value, "inExperiment": true, "key": variant_key,
            "stickyBucketUsed": matches!(found, StickyLookup::Variant(_)),
            "value": variations[chosen], "variationId": chosen,
        }))
    })()
    .unwrap_or(Value::Null);
    if result != case[4] {
        return Err(fail(format!("result {result}, expected {}", case[4])));
    }
    let saved = docs_json(&docs);
    if saved != case[5] {
        return Err(fail(format!("documents {saved}, expected {}", case[5])));
    }
    Ok(())
}

#[test]
fn conformance_sticky_bucket() {
    let all: Value = serde_json::from_str(STICKY).expect("sticky cases parse");
    let cases = all["stickyBucket"].as_array().expect("stickyBucket");
    assert_eq!(cases.len(), 13, "stickyBucket: the vendored file changed");
    let failures: Vec<String> = cases.iter().filter_map(|c| check_sticky(c).err()).collect();
    assert!(
        failures.is_empty(),
        "stickyBucket: {} of 13 cases failed:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
    println!("conformance stickyBucket: 13 cases passed");
}
