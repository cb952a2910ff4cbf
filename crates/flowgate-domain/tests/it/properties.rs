//! Statistical and property tests of assignment (D5): determinism, weight fit, independence.

use flowgate_domain::bucketing::{bucket_ranges, choose_variation, hash_v2};
use proptest::prelude::*;

/// Upper critical values of the chi-square distribution at p = 0.001, for 1..=81 degrees of
/// freedom where needed (standard table values).
fn chi2_critical_p001(df: usize) -> f64 {
    const TABLE: [f64; 9] = [
        10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322, 26.124, 27.877,
    ];
    match df {
        1..=9 => TABLE[df - 1],
        16 => 39.252,
        _ => panic!("no table value for df {df}"),
    }
}

/// Deterministic pseudo-random user ids (SplitMix64), so the test is reproducible.
fn user_ids(count: usize, seed: u64) -> Vec<String> {
    let mut state = seed;
    (0..count)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            format!("{:016x}-{}", z, z % 977)
        })
        .collect()
}

fn normalise(w: &[f64]) -> Vec<f64> {
    let s: f64 = w.iter().sum();
    w.iter().map(|x| x / s).collect()
}

#[test]
fn variant_counts_fit_the_weights() {
    let users = user_ids(100_000, 42);
    let hashes: Vec<f64> = users.iter().map(|u| hash_v2("exp-seed-1", u)).collect();
    let mut checked = 0;
    for n in 2..=10usize {
        let shapes: Vec<Vec<f64>> = vec![
            vec![1.0; n],
            (1..=n).map(|i| i as f64).collect(),
            (0..n).map(|i| if i == 0 { 5.0 } else { 1.0 }).collect(),
        ];
        for raw in shapes {
            let weights = normalise(&raw);
            let ranges = bucket_ranges(n, 1.0, Some(&weights));
            let mut counts = vec![0usize; n];
            for &h in &hashes {
                counts[choose_variation(h, &ranges).expect("full coverage assigns everyone")] += 1;
            }
            let total = hashes.len() as f64;
            let chi2: f64 = counts
                .iter()
                .zip(&weights)
                .map(|(&c, &w)| {
                    let expected = total * w;
                    (c as f64 - expected).powi(2) / expected
                })
                .sum();
            assert!(
                chi2 < chi2_critical_p001(n - 1),
                "n={n} weights={raw:?} counts={counts:?} chi2={chi2:.2}"
            );
            checked += 1;
        }
    }
    println!("weight fit: {checked} weight vectors over 100000 users, all p > 0.001");
}

#[test]
fn assignments_of_experiments_with_different_seeds_are_independent() {
    let users = user_ids(100_000, 7);
    let ranges = bucket_ranges(5, 1.0, None);
    let mut table = [[0usize; 5]; 5];
    for u in &users {
        let a = choose_variation(hash_v2("seed-a", u), &ranges).unwrap();
        let b = choose_variation(hash_v2("seed-b", u), &ranges).unwrap();
        table[a][b] += 1;
    }
    let total = users.len() as f64;
    let rows: Vec<f64> = table
        .iter()
        .map(|r| r.iter().sum::<usize>() as f64)
        .collect();
    let cols: Vec<f64> = (0..5)
        .map(|j| table.iter().map(|r| r[j]).sum::<usize>() as f64)
        .collect();
    let mut chi2 = 0.0;
    for i in 0..5 {
        for j in 0..5 {
            let expected = rows[i] * cols[j] / total;
            chi2 += (table[i][j] as f64 - expected).powi(2) / expected;
        }
    }
    assert!(
        chi2 < chi2_critical_p001(16),
        "contingency chi2 {chi2:.2} over df 16: {table:?}"
    );
}

proptest! {
    #[test]
    fn same_input_same_variant(user in "\\PC{0,64}", seed in "[a-z0-9-]{1,40}", coverage in 0.0f64..=1.0) {
        let ranges = bucket_ranges(3, coverage, Some(&[0.5, 0.25, 0.25]));
        let first = choose_variation(hash_v2(&seed, &user), &ranges);
        let second = choose_variation(hash_v2(&seed, &user), &ranges);
        prop_assert_eq!(first, second);
        let h = hash_v2(&seed, &user);
        prop_assert!((0.0..1.0).contains(&h));
    }

    #[test]
    fn raising_coverage_never_moves_an_assigned_user(user in "[a-zA-Z0-9]{1,32}", low in 0.0f64..=1.0, extra in 0.0f64..=1.0) {
        let high = (low + extra).min(1.0);
        let h = hash_v2("cov", &user);
        let before = choose_variation(h, &bucket_ranges(2, low, None));
        let after = choose_variation(h, &bucket_ranges(2, high, None));
        if before.is_some() {
            prop_assert_eq!(before, after);
        }
    }
}
