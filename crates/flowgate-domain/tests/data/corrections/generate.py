"""Golden vectors of the multiple-comparison corrections (D36).

Writes vectors.json beside this file; README.md says which versions wrote it and how to run it
again. The Rust tests (crates/flowgate-domain/tests/it/corrections.rs) read the committed file;
they never run Python. Every random case is seeded, so running it again writes the same file.

Three sections:

- "p_values": families of p-values and statsmodels' adjusted p-values for
  `multipletests(method="holm")` and `multipletests(method="fdr_bh")`. statsmodels has no NaN
  handling, so a family holding NaN is adjusted without its NaN members (the family shrinks)
  and the NaN members stay NaN: flowgate's documented rule. NaN is written as null.
- "intervals": single adjusted intervals, GrowthBook's ad-hoc rule applied to a lift, its
  interval, an adjusted p-value and alpha, chosen to reach every branch of the rule.
- "families": end to end. gbstats 0.8.0 compares treatments with a control on several
  conversion metrics (TwoSidedTTest or SequentialTwoSidedTTest, default configurations); the
  family's p-values are adjusted by statsmodels, then each interval by GrowthBook's rule.

GrowthBook's interval rule (docs.growthbook.io/statistics/multiple-corrections, "Adjusted
p-values do not have directly analogous confidence intervals", and `getAdjustedCI` in
GrowthBook's packages/shared/src/experiments.ts) is not in gbstats 0.8.0, so `adjusted_ci`
below writes it out from that description: an adjusted p-value above 0.999999 gives an
unbounded interval; otherwise the standard deviation that would give the adjusted p-value is
|lift / z(1 - p_adj / 2)|, the interval is lift -+ z(1 - alpha / 2) times it, and it replaces
the original only when it is wider on both sides. An infinite bound is written as null.
"""

import json
import math
import os
import random

import gbstats
import numpy as np
import scipy
import statsmodels
from gbstats.frequentist.tests import (
    FrequentistConfig,
    SequentialConfig,
    SequentialTwoSidedTTest,
    TwoSidedTTest,
)
from gbstats.models.statistics import ProportionStatistic
from scipy.stats import norm
from statsmodels.stats.multitest import multipletests

# GrowthBook's threshold above which an adjusted p-value counts as 1.
UNBOUNDED_ABOVE = 0.999999


def number(x):
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x


def adjust(p_values, method):
    """statsmodels' adjusted p-values of the family's non-NaN members; NaN stays NaN."""
    kept = [i for i, p in enumerate(p_values) if not math.isnan(p)]
    out = [math.nan] * len(p_values)
    if kept:
        _, corrected, _, _ = multipletests(
            np.array([p_values[i] for i in kept], dtype=float), method=method
        )
        for i, c in zip(kept, corrected):
            out[i] = float(c)
    return out


def p_value_case(name, p_values):
    return {
        "name": name,
        "p_values": [number(p) for p in p_values],
        "holm": [number(p) for p in adjust(p_values, "holm")],
        "fdr_bh": [number(p) for p in adjust(p_values, "fdr_bh")],
    }


def fixed_families():
    nan = math.nan
    return [
        ("empty", []),
        ("one", [0.03]),
        ("one zero", [0.0]),
        ("one one", [1.0]),
        ("one NaN", [nan]),
        ("every NaN", [nan, nan, nan]),
        ("NaN among others", [0.01, nan, 0.04, nan, 0.5]),
        ("NaN first and last", [nan, 0.002, 0.2, 0.03, nan]),
        ("textbook", [0.01, 0.04, 0.03, 0.005]),
        ("all tied small", [0.01] * 5),
        ("all tied half", [0.5] * 10),
        ("all ones", [1.0] * 4),
        ("all zeros", [0.0] * 3),
        ("zeros and ones", [0.0, 1.0, 0.0, 1.0, 0.5]),
        ("ties in the middle", [0.001, 0.02, 0.02, 0.02, 0.3, 0.3, 0.9]),
        ("ties unsorted", [0.3, 0.02, 0.9, 0.02, 0.001, 0.3, 0.02]),
        ("tiny", [1e-300, 1e-300, 2e-300, 1e-200, 0.04]),
        ("smallest subnormal", [5e-324, 1e-310, 0.5, 0.0]),
        ("clipped near one", [0.9, 0.95, 0.99, 0.6]),
        ("already monotone", [0.001, 0.002, 0.003, 0.004, 0.005]),
        ("descending", [0.05, 0.04, 0.03, 0.02, 0.01]),
        ("thresholds", [0.05, 0.025, 0.0166666666666667, 0.0125, 0.01]),
        ("thirds", [1 / 3, 2 / 3, 1 / 7, 0.1, 0.7]),
    ]


def random_families(rng):
    """Per family size 1..30: uniform, mostly small, rounded (ties) and with special values."""
    out = []
    for n in range(1, 31):
        out.append((f"uniform {n}", [rng.random() for _ in range(n)]))
        out.append((f"small {n}", [rng.random() ** 4 * 0.2 for _ in range(n)]))
        out.append((f"rounded {n}", [round(rng.random() ** 2, 2) for _ in range(n)]))
        special = [rng.random() for _ in range(n)]
        for value in (0.0, 1.0, 1e-300, 1e-12):
            if rng.random() < 0.5:
                special[rng.randrange(n)] = value
        if n >= 3 and rng.random() < 0.3:
            special[rng.randrange(n)] = math.nan
        out.append((f"special {n}", special))
    return out


def adjusted_ci(lift, ci, p_adjusted, alpha):
    """GrowthBook's ad-hoc adjusted interval, written out from its documentation."""
    if p_adjusted > UNBOUNDED_ABOVE:
        return [-math.inf, math.inf]
    if math.isnan(lift) or lift == 0 or math.isnan(p_adjusted):
        candidate = [0.0, 0.0]
    else:
        z = norm.ppf(1 - alpha / 2)
        sd = abs(lift / norm.ppf(1 - p_adjusted / 2))
        candidate = [lift - z * sd, lift + z * sd]
    if candidate[0] < ci[0] and candidate[1] > ci[1]:
        return [float(c) for c in candidate]
    return [float(c) for c in ci]


def interval_case(name, lift, ci, p_adjusted, alpha):
    return {
        "name": name,
        "lift": lift,
        "ci": ci,
        "adjusted_p_value": p_adjusted,
        "alpha": alpha,
        "adjusted_ci": [number(c) for c in adjusted_ci(lift, ci, p_adjusted, alpha)],
    }


def interval_cases(rng):
    out = [
        interval_case("widened", 0.05, [0.01, 0.09], 0.2, 0.05),
        interval_case("negative lift widened", -0.08, [-0.15, -0.01], 0.3, 0.05),
        interval_case("adjusted p-value 1", 0.02, [-0.01, 0.05], 1.0, 0.05),
        interval_case("just above the threshold", 0.02, [-0.01, 0.05], 0.9999995, 0.05),
        interval_case("at the threshold", 0.02, [-0.01, 0.05], 0.999999, 0.05),
        interval_case("zero lift", 0.0, [-0.03, 0.03], 0.5, 0.05),
        interval_case("zero adjusted p-value", 0.3, [0.2, 0.4], 0.0, 0.05),
        interval_case("tiny adjusted p-value", 0.3, [0.2, 0.4], 1e-300, 0.05),
        interval_case("narrower kept", 0.05, [-0.2, 0.3], 0.2, 0.05),
        interval_case("wider on one side only", 0.05, [0.02, 0.2], 0.1, 0.05),
        interval_case("alpha 0.1", 0.05, [0.01, 0.09], 0.2, 0.1),
        interval_case("alpha 0.01", 0.05, [0.01, 0.09], 0.2, 0.01),
    ]
    for i in range(30):
        lift = rng.choice([-1, 1]) * rng.random() ** 2
        half = abs(lift) * rng.uniform(0.2, 1.5)
        ci = [lift - half, lift + half]
        p_adjusted = rng.random() ** 3
        alpha = rng.choice([0.05, 0.05, 0.1, 0.01])
        out.append(interval_case(f"random {i}", lift, ci, p_adjusted, alpha))
    return out


def compare(sequential, control, treatment):
    a = ProportionStatistic(n=control[0], sum=control[1])
    b = ProportionStatistic(n=treatment[0], sum=treatment[1])
    if sequential:
        return SequentialTwoSidedTTest(a, b, SequentialConfig()).compute_result()
    return TwoSidedTTest(a, b, FrequentistConfig()).compute_result()


def family_tests(rng, sequential):
    treatments, metrics = rng.randint(1, 3), rng.randint(1, 4)
    n = rng.choice([400, 2000, 10_000, 50_000])
    tests = []
    for _ in range(metrics):
        rate = rng.uniform(0.02, 0.6)
        control = (n, sum(1 for _ in range(n) if rng.random() < rate))
        for _ in range(treatments):
            effect = rng.choice([0.0, 0.0, 0.03, 0.1, 0.3])
            treated = min(0.99, rate * (1 + rng.choice([-1, 1]) * effect))
            treatment = (n, sum(1 for _ in range(n) if rng.random() < treated))
            r = compare(sequential, control, treatment)
            if r.error_message:
                continue
            tests.append({"lift": r.expected, "ci": list(r.ci), "p_value": r.p_value})
    return tests


def families(rng):
    out = []
    for i in range(40):
        sequential = i % 3 == 2
        tests = family_tests(rng, sequential)
        p_values = [t["p_value"] for t in tests]
        for correction, method in (("holm-bonferroni", "holm"), ("benjamini-hochberg", "fdr_bh")):
            adjusted = adjust(p_values, method)
            out.append({
                "name": f"family {i}",
                "test": "sequential" if sequential else "fixed",
                "correction": correction,
                "alpha": 0.05,
                "tests": [
                    {
                        "lift": t["lift"],
                        "ci": t["ci"],
                        "p_value": t["p_value"],
                        "adjusted_p_value": p,
                        "adjusted_ci": [number(c) for c in adjusted_ci(t["lift"], t["ci"], p, 0.05)],
                    }
                    for t, p in zip(tests, adjusted)
                ],
            })
    return out


def write(out):
    """JSON with one case a line, so a change to the vectors reads as a short diff."""
    def dump(x):
        return json.dumps(x, allow_nan=False)

    parts = [f' "generator": {dump(out["generator"])}']
    for key in ("p_values", "intervals", "families"):
        rows = ",\n".join(f"  {dump(case)}" for case in out[key])
        parts.append(f' "{key}": [\n{rows}\n ]')
    return "{\n" + ",\n".join(parts) + "\n}\n"


def main():
    rng = random.Random(36)
    cases = [p_value_case(name, ps) for name, ps in fixed_families() + random_families(rng)]
    out = {
        "generator": (
            f"statsmodels {statsmodels.__version__} multipletests (holm, fdr_bh), "
            f"gbstats {gbstats.__version__} TwoSidedTTest and SequentialTwoSidedTTest, "
            f"scipy {scipy.__version__} norm.ppf, numpy {np.__version__}"
        ),
        "p_values": cases,
        "intervals": interval_cases(random.Random(3601)),
        "families": families(random.Random(3602)),
    }
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "vectors.json"), "w") as f:
        f.write(write(out))
    print(
        f"{len(cases)} p-value families, {len(out['intervals'])} intervals, "
        f"{len(out['families'])} end-to-end families"
    )


if __name__ == "__main__":
    main()
