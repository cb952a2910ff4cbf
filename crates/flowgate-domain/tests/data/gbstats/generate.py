"""Golden vectors of experiment statistics from GrowthBook's stats engine (D22).

Run by generate.sh, which installs gbstats 0.8.0 from PyPI into a virtual environment first.
Writes vectors.json beside this file (and sequential.json, below): for each case, the inputs flowgate's statistics take (per
variant n, sum, sum of squares; the weights) and what gbstats computes from them, so the Rust
tests (crates/flowgate-domain/tests/it/results.rs) compare flowgate's figures with gbstats' own.
The cases are fixed (and the random ones seeded), so running it again writes the same file.

sequential.json holds the sequential test's cases (D27): gbstats' SequentialTwoSidedTTest
(asymptotic confidence sequences) with the tuning parameter and alpha of each case, defaults
5000 and 0.05. Its cases draw from a random generator of their own, so vectors.json stays as
it was.
"""

import json
import math
import os
import random

import gbstats
from gbstats.bayesian.tests import EffectBayesianABTest, EffectBayesianConfig
from gbstats.frequentist.tests import (
    FrequentistConfig,
    SequentialConfig,
    SequentialTwoSidedTTest,
    TwoSidedTTest,
)
from gbstats.models.statistics import ProportionStatistic, SampleMeanStatistic
from gbstats.utils import check_srm


def statistic(kind, v):
    if kind == "conversion":
        return ProportionStatistic(n=v["n"], sum=v["sum"])
    return SampleMeanStatistic(n=v["n"], sum=v["sum"], sum_squares=v["sum_squares"])


def number(x):
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x


def compare(kind, control, treatment):
    a, b = statistic(kind, control), statistic(kind, treatment)
    f = TwoSidedTTest(a, b, FrequentistConfig()).compute_result()
    a, b = statistic(kind, control), statistic(kind, treatment)
    bay = EffectBayesianABTest(a, b, EffectBayesianConfig()).compute_result()
    return {
        "frequentist": {
            "error": f.error_message,
            "expected": number(f.expected),
            "ci": [number(c) for c in f.ci],
            "p_value": number(f.p_value),
        },
        "bayesian": {
            "error": bay.error_message,
            "expected": number(bay.expected),
            "ci": [number(c) for c in bay.ci],
            "chance_to_win": number(bay.chance_to_win),
        },
    }


def conversions(n, converted):
    return {"n": n, "sum": float(converted), "sum_squares": float(converted)}


def means(values):
    return {
        "n": len(values),
        "sum": float(sum(values)),
        "sum_squares": float(sum(v * v for v in values)),
    }


def revenue(rng, n, buyers, price, spread):
    """n users, about `buyers` of them paying around `price` (0 for the others)."""
    values = [0.0] * n
    for i in rng.sample(range(n), buyers):
        values[i] = round(max(0.99, rng.gauss(price, spread)), 2)
    return means(values)


def case(name, kind, variants, weights=None):
    weights = weights or [1.0 / len(variants)] * len(variants)
    return {
        "name": name,
        "kind": kind,
        "variants": variants,
        "weights": weights,
        "comparisons": [compare(kind, variants[0], v) for v in variants[1:]],
        "srm_p_value": number(check_srm([v["n"] for v in variants], weights)),
    }


def main():
    rng = random.Random(20261126)
    cases = [
        case("conversions, large samples, treatment better", "conversion",
             [conversions(100_000, 10_000), conversions(100_000, 10_600)]),
        case("conversions, small samples", "conversion",
             [conversions(30, 4), conversions(28, 9)]),
        case("conversions, equal rates", "conversion",
             [conversions(5_000, 500), conversions(5_000, 500)]),
        case("conversions, treatment worse", "conversion",
             [conversions(20_000, 3_000), conversions(20_000, 2_700)]),
        case("conversions, a million users per variant", "conversion",
             [conversions(1_000_000, 52_000), conversions(1_000_000, 53_100)]),
        case("conversions, control mean 0", "conversion",
             [conversions(1_000, 0), conversions(1_000, 12)]),
        case("conversions, zero variance: every user converts", "conversion",
             [conversions(50, 50), conversions(50, 49)]),
        case("conversions, zero variance: no treatment user converts", "conversion",
             [conversions(50, 5), conversions(50, 0)]),
        case("conversions, one user", "conversion",
             [conversions(1, 1), conversions(1, 0)]),
        case("conversions, no user in the treatment", "conversion",
             [conversions(100, 10), conversions(0, 0)]),
        case("conversions, three variants", "conversion",
             [conversions(30_000, 3_000), conversions(30_000, 3_300), conversions(30_000, 2_900)],
             [1 / 3, 1 / 3, 1 / 3]),
        case("conversions, four variants, unequal weights, sample ratio mismatch", "conversion",
             [conversions(50_000, 5_000), conversions(10_500, 1_100), conversions(10_000, 1_000),
              conversions(30_000, 3_100)],
             [0.5, 0.1, 0.1, 0.3]),
        case("conversions, weights 70/30 matched", "conversion",
             [conversions(70_110, 7_000), conversions(29_890, 3_100)], [0.7, 0.3]),
        case("conversions, a variant of weight 0", "conversion",
             [conversions(1_000, 100), conversions(1_000, 120), conversions(3, 1)], [0.5, 0.5, 0.0]),
        case("revenue, large samples", "mean",
             [revenue(rng, 20_000, 400, 9.99, 3.0), revenue(rng, 20_000, 460, 9.99, 3.0)]),
        case("revenue, small samples", "mean",
             [revenue(rng, 40, 3, 4.99, 1.0), revenue(rng, 40, 6, 4.99, 1.0)]),
        case("revenue, equal means", "mean",
             [means([0.0, 10.0] * 500), means([10.0, 0.0] * 500)]),
        case("revenue, control mean 0", "mean",
             [means([0.0] * 200), revenue(rng, 200, 5, 19.99, 5.0)]),
        case("revenue, zero variance", "mean",
             [means([4.99] * 30), means([4.99] * 31)]),
        case("revenue, one user", "mean",
             [means([9.99]), means([0.0])]),
        case("revenue, two users", "mean",
             [means([9.99, 0.0]), means([0.0, 4.99])]),
        case("revenue, three variants", "mean",
             [revenue(rng, 5_000, 100, 29.99, 8.0), revenue(rng, 5_000, 130, 29.99, 8.0),
              revenue(rng, 5_000, 90, 24.99, 8.0)]),
        case("revenue, negative values (refunds)", "mean",
             [means([-5.0, 0.0, 10.0, 20.0] * 50), means([0.0, 10.0, 20.0, 30.0] * 50)]),
    ]
    for i in range(12):
        n_a, n_b = rng.randint(2, 200_000), rng.randint(2, 200_000)
        p_a = rng.uniform(0.01, 0.6)
        p_b = max(0.0, min(1.0, p_a * rng.uniform(0.8, 1.25)))
        cases.append(case(f"conversions, seeded {i}", "conversion",
                          [conversions(n_a, round(n_a * p_a)), conversions(n_b, round(n_b * p_b))]))
    out = {
        "source": f"gbstats {gbstats.__version__ if hasattr(gbstats, '__version__') else '0.8.0'} "
                  "(PyPI): TwoSidedTTest, EffectBayesianABTest with their default configs "
                  "(relative lift, alpha 0.05, flat prior), check_srm",
        "cases": cases,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vectors.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"{len(cases)} cases written to {path}")


def compare_sequential(kind, control, treatment, tuning, alpha):
    a, b = statistic(kind, control), statistic(kind, treatment)
    config = SequentialConfig(sequential_tuning_parameter=tuning, alpha=alpha)
    r = SequentialTwoSidedTTest(a, b, config).compute_result()
    if r.error_message:
        return {"error": r.error_message, "expected": None, "ci": [None, None], "p_value": None}
    return {
        "error": None,
        "expected": number(r.expected),
        "ci": [number(c) for c in r.ci],
        "p_value": number(r.p_value),
    }


def sequential_case(name, kind, variants, tuning=5000.0, alpha=0.05):
    return {
        "name": name,
        "kind": kind,
        "tuning": float(tuning),
        "alpha": float(alpha),
        "variants": variants,
        "comparisons": [compare_sequential(kind, variants[0], v, tuning, alpha)
                        for v in variants[1:]],
    }


def sequential_main():
    rng = random.Random(20270127)
    c, s = conversions, sequential_case
    cases = [
        s("conversions, large samples, treatment better", "conversion",
          [c(100_000, 10_000), c(100_000, 10_600)]),
        s("conversions, small samples", "conversion", [c(30, 4), c(28, 9)]),
        s("conversions, tiny samples", "conversion", [c(3, 1), c(4, 3)]),
        s("conversions, null effect", "conversion", [c(5_000, 500), c(5_000, 500)]),
        s("conversions, treatment worse", "conversion", [c(20_000, 3_000), c(20_000, 2_700)]),
        s("conversions, a million users per variant", "conversion",
          [c(1_000_000, 52_000), c(1_000_000, 53_100)]),
        s("conversions, overwhelming effect: p-value 0", "conversion",
          [c(1_000_000, 50_000), c(1_000_000, 100_000)]),
        s("conversions, control mean 0", "conversion", [c(1_000, 0), c(1_000, 12)]),
        s("conversions, zero variance", "conversion", [c(50, 50), c(50, 49)]),
        s("conversions, no user in the treatment", "conversion", [c(100, 10), c(0, 0)]),
        s("conversions, one user", "conversion", [c(1, 1), c(1, 0)]),
        s("conversions, three variants", "conversion",
          [c(30_000, 3_000), c(30_000, 3_300), c(30_000, 2_900)]),
        s("conversions, five variants, unequal sizes", "conversion",
          [c(50_000, 5_000), c(10_500, 1_100), c(10_000, 1_000), c(30_000, 3_100),
           c(2_000, 260)]),
        s("conversions, tuning parameter 100", "conversion",
          [c(20_000, 2_000), c(20_000, 2_150)], tuning=100),
        s("conversions, tuning parameter 1000", "conversion",
          [c(20_000, 2_000), c(20_000, 2_150)], tuning=1000),
        s("conversions, tuning parameter 50000", "conversion",
          [c(20_000, 2_000), c(20_000, 2_150)], tuning=50_000),
        s("conversions, alpha 0.01", "conversion",
          [c(20_000, 2_000), c(20_000, 2_150)], alpha=0.01),
        s("conversions, alpha 0.1", "conversion",
          [c(20_000, 2_000), c(20_000, 2_150)], alpha=0.1),
        s("conversions, alpha 0.2, tuning parameter 2500", "conversion",
          [c(8_000, 400), c(8_100, 470), c(7_900, 380)], tuning=2500, alpha=0.2),
        s("revenue, large samples", "mean",
          [revenue(rng, 20_000, 400, 9.99, 3.0), revenue(rng, 20_000, 460, 9.99, 3.0)]),
        s("revenue, small samples", "mean",
          [revenue(rng, 40, 3, 4.99, 1.0), revenue(rng, 40, 6, 4.99, 1.0)]),
        s("revenue, null effect", "mean",
          [means([0.0, 10.0] * 500), means([10.0, 0.0] * 500)]),
        s("revenue, control mean 0", "mean",
          [means([0.0] * 200), revenue(rng, 200, 5, 19.99, 5.0)]),
        s("revenue, zero variance", "mean", [means([4.99] * 30), means([4.99] * 31)]),
        s("revenue, two users", "mean", [means([9.99, 0.0]), means([0.0, 4.99])]),
        s("revenue, three variants", "mean",
          [revenue(rng, 5_000, 100, 29.99, 8.0), revenue(rng, 5_000, 130, 29.99, 8.0),
           revenue(rng, 5_000, 90, 24.99, 8.0)]),
        s("revenue, negative values (refunds)", "mean",
          [means([-5.0, 0.0, 10.0, 20.0] * 50), means([0.0, 10.0, 20.0, 30.0] * 50)]),
        s("revenue, alpha 0.01, tuning parameter 10000", "mean",
          [revenue(rng, 10_000, 300, 14.99, 4.0), revenue(rng, 10_000, 360, 14.99, 4.0)],
          tuning=10_000, alpha=0.01),
        s("revenue, tuning parameter 500, alpha 0.1", "mean",
          [revenue(rng, 3_000, 90, 49.99, 12.0), revenue(rng, 3_000, 70, 49.99, 12.0)],
          tuning=500, alpha=0.1),
    ]
    tunings, alphas = [100, 1000, 5000, 20_000, 100_000], [0.01, 0.05, 0.1]
    for i in range(8):
        n_a, n_b = rng.randint(2, 500_000), rng.randint(2, 500_000)
        p_a = rng.uniform(0.01, 0.6)
        p_b = max(0.0, min(1.0, p_a * rng.uniform(0.8, 1.25)))
        cases.append(s(f"conversions, seeded {i}", "conversion",
                       [c(n_a, round(n_a * p_a)), c(n_b, round(n_b * p_b))],
                       tuning=rng.choice(tunings), alpha=rng.choice(alphas)))
    for i in range(4):
        n = rng.randint(50, 20_000)
        buyers = [rng.randint(1, max(1, n // 10)) for _ in range(2)]
        cases.append(s(f"revenue, seeded {i}", "mean",
                       [revenue(rng, n, buyers[0], 9.99, 2.5), revenue(rng, n, buyers[1], 9.99, 2.5)],
                       tuning=rng.choice(tunings), alpha=rng.choice(alphas)))
    out = {
        "source": "gbstats 0.8.0 (PyPI): SequentialTwoSidedTTest with each case's "
                  "sequential_tuning_parameter and alpha (relative lift)",
        "cases": cases,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sequential.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"{len(cases)} sequential cases written to {path}")


if __name__ == "__main__":
    main()
    sequential_main()
