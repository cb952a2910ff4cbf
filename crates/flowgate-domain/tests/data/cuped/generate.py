"""Golden vectors of ratio metrics and CUPED (D36) from GrowthBook's stats engine.

Writes vectors.json beside this file; README.md says which versions wrote it and how to run it
again. The Rust tests (crates/flowgate-domain/tests/it/cuped.rs) read the committed file; they
never run Python. Every random case is seeded, so running it again writes the same file.

Each case is a control and a treatment summarised by sums (the inputs flowgate's
`results::statistic` takes), and what gbstats 0.8.0 computes from them with its own classes:
`RatioStatistic` or `RegressionAdjustedStatistic` (theta pooled by gbstats' `compute_theta`
inside the test's constructor) under `TwoSidedTTest` and `SequentialTwoSidedTTest`, each with
`difference_type` "relative" and "absolute": four comparisons a case. A comparison holds the
effect (`expected`), its standard error (`uplift.stddev`), the interval, the p-value, or the
error message gbstats returns instead (or the Python exception its arithmetic raises, such as
OverflowError for sums near the float range); a CUPED comparison also the theta gbstats used (0 when it
reverted to the unadjusted statistic).

Two sections:

- "ratio": per variant users, numerator and denominator sums and sums of squares, the sum of
  products; each part "conversion" (gbstats ProportionStatistic) or "mean"
  (SampleMeanStatistic).
- "cuped": per variant users, the metric's and the covariate's sums and sums of squares, the
  sum of products; the metric and its covariate of one kind. A user without a covariate
  counts as 0 (GrowthBook's rule).

Small cases are built from per-user values; large ones from sums consistent with a mean,
standard deviation and correlation (no per-user data needed). Non-finite numbers are written as
null.
"""

import json
import math
import os
import random

import gbstats
import numpy as np
import scipy
from gbstats.frequentist.tests import (
    FrequentistConfig,
    SequentialConfig,
    SequentialTwoSidedTTest,
    TwoSidedTTest,
)
from gbstats.models.statistics import (
    ProportionStatistic,
    RatioStatistic,
    RegressionAdjustedStatistic,
    SampleMeanStatistic,
)

DIFFERENCES = ["relative", "absolute"]


def number(x):
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x


def part(kind, n, s, ss):
    if kind == "conversion":
        return ProportionStatistic(n=n, sum=s)
    return SampleMeanStatistic(n=n, sum=s, sum_squares=ss)


# --- sums ------------------------------------------------------------------------------------


def sums_of(xs, ys):
    """Sums of paired per-user values: n, sum x, sum x², sum y, sum y², sum xy."""
    return {
        "users": len(xs),
        "x": float(sum(xs)),
        "xx": float(sum(x * x for x in xs)),
        "y": float(sum(ys)),
        "yy": float(sum(y * y for y in ys)),
        "xy": float(sum(x * y for x, y in zip(xs, ys))),
    }


def summary(n, mx, sx, my, sy, corr):
    """Sums of n users with these means, standard deviations and correlation."""
    x, y = n * mx, n * my
    return {
        "users": n,
        "x": x,
        "xx": (n - 1) * sx * sx + x * x / n,
        "y": y,
        "yy": (n - 1) * sy * sy + y * y / n,
        "xy": (n - 1) * corr * sx * sy + x * y / n,
    }


def ratio_variant(s):
    return {
        "users": s["users"],
        "numerator": s["x"],
        "numerator_squares": s["xx"],
        "denominator": s["y"],
        "denominator_squares": s["yy"],
        "products": s["xy"],
    }


def cuped_variant(s):
    """x is the metric, y the covariate."""
    return {
        "users": s["users"],
        "metric": s["x"],
        "metric_squares": s["xx"],
        "covariate": s["y"],
        "covariate_squares": s["yy"],
        "products": s["xy"],
    }


# --- gbstats ---------------------------------------------------------------------------------


def methods(sequential):
    """The fixed-horizon test and one sequential configuration."""
    tuning, alpha = sequential
    return [
        ({"test": "fixed_horizon"}, TwoSidedTTest, FrequentistConfig),
        (
            {"test": "sequential", "tuning": tuning, "alpha": alpha},
            SequentialTwoSidedTTest,
            lambda difference_type: SequentialConfig(
                difference_type=difference_type,
                sequential_tuning_parameter=tuning,
                alpha=alpha,
            ),
        ),
    ]


def run(make_a, make_b, sequential, cuped):
    out = []
    for method, test_class, config in methods(sequential):
        for difference in DIFFERENCES:
            a, b = make_a(), make_b()
            comparison = {"method": method, "difference": difference}
            try:
                test = test_class(a, b, config(difference_type=difference))
                result = test.compute_result()
            except ArithmeticError as e:
                # Python's float arithmetic raises where a figure leaves the float range
                # (gbstats has no check of its own); flowgate says `Overflow`.
                comparison["error"] = type(e).__name__
                out.append(comparison)
                continue
            if cuped:
                ra = isinstance(test.stat_a, RegressionAdjustedStatistic)
                comparison["theta"] = number(test.stat_a.theta) if ra else 0.0
            if result.error_message:
                comparison["error"] = result.error_message
            else:
                comparison.update(
                    {
                        "effect": number(result.expected),
                        "std_error": number(result.uplift.stddev),
                        "ci": [number(result.ci[0]), number(result.ci[1])],
                        "p_value": number(result.p_value),
                    }
                )
            out.append(comparison)
    return out


def ratio_case(name, kinds, a, b, sequential=(5000, 0.05)):
    a, b = ratio_variant(a), ratio_variant(b)

    def stat(v):
        return lambda: RatioStatistic(
            n=v["users"],
            m_statistic=part(kinds[0], v["users"], v["numerator"], v["numerator_squares"]),
            d_statistic=part(
                kinds[1], v["users"], v["denominator"], v["denominator_squares"]
            ),
            m_d_sum_of_products=v["products"],
        )

    return {
        "name": name,
        "numerator": kinds[0],
        "denominator": kinds[1],
        "control": a,
        "treatment": b,
        "comparisons": run(stat(a), stat(b), sequential, cuped=False),
    }


def cuped_case(name, kind, a, b, sequential=(5000, 0.05)):
    a, b = cuped_variant(a), cuped_variant(b)

    def stat(v):
        return lambda: RegressionAdjustedStatistic(
            n=v["users"],
            post_statistic=part(kind, v["users"], v["metric"], v["metric_squares"]),
            pre_statistic=part(kind, v["users"], v["covariate"], v["covariate_squares"]),
            post_pre_sum_of_products=v["products"],
            theta=0,
        )

    return {
        "name": name,
        "kind": kind,
        "control": a,
        "treatment": b,
        "comparisons": run(stat(a), stat(b), sequential, cuped=True),
    }


# --- ratio cases -----------------------------------------------------------------------------


def purchases(rng, n, rate, price, spread, lift=1.0):
    """Per user: revenue (numerator) and purchases (denominator)."""
    rev, buys = [], []
    for _ in range(n):
        k = 0
        while rng.random() < rate and k < 6:
            k += 1
        buys.append(float(k))
        rev.append(sum(round(max(0.99, rng.gauss(price * lift, spread)), 2) for _ in range(k)))
    return rev, buys


def sessions(rng, n, p_convert):
    """Per user: converted sessions (numerator, 0/1 a user) and sessions (denominator)."""
    conv, sess = [], []
    for _ in range(n):
        s = 1 + int(rng.expovariate(0.4))
        sess.append(float(s))
        conv.append(1.0 if rng.random() < p_convert else 0.0)
    return conv, sess


def ratio_cases(rng):
    M, C = "mean", "conversion"
    cases = []

    def per_user(name, kinds, xa, ya, xb, yb, sequential=(5000, 0.05)):
        cases.append(ratio_case(name, kinds, sums_of(xa, ya), sums_of(xb, yb), sequential))

    def summaries(name, kinds, a, b, sequential=(5000, 0.05)):
        cases.append(ratio_case(name, kinds, summary(*a), summary(*b), sequential))

    per_user("revenue per purchase, 12 users", (M, M),
             *purchases(rng, 12, 0.6, 9.99, 3.0), *purchases(rng, 12, 0.6, 9.99, 3.0, 1.1))
    per_user("revenue per purchase, 500 users", (M, M),
             *purchases(rng, 500, 0.4, 19.99, 6.0), *purchases(rng, 500, 0.4, 19.99, 6.0, 1.05))
    per_user("revenue per purchase, 5000 users, treatment worse", (M, M),
             *purchases(rng, 5000, 0.3, 4.99, 1.0), *purchases(rng, 5000, 0.3, 4.99, 1.0, 0.9),
             (1000, 0.05))
    per_user("converting users per session, 800 users", (C, M),
             *sessions(rng, 800, 0.2), *sessions(rng, 800, 0.23))
    per_user("converting users per session, 3 users", (C, M),
             [1.0, 0.0, 1.0], [2.0, 1.0, 4.0], [0.0, 1.0, 1.0], [3.0, 2.0, 1.0])
    per_user("two conversions, 40 users", (C, C),
             [1.0] * 8 + [0.0] * 32, [1.0] * 20 + [0.0] * 20,
             [1.0] * 11 + [0.0] * 29, [1.0] * 19 + [0.0] * 21)
    summaries("revenue per purchase, 200,000 users", (M, M),
              (200_000, 0.9, 4.0, 0.09, 0.35, 0.8), (200_000, 0.95, 4.1, 0.092, 0.36, 0.8))
    summaries("revenue per purchase, 2,000,000 users, negative lift", (M, M),
              (2_000_000, 1.2, 6.0, 0.1, 0.4, 0.85), (2_000_000, 1.17, 5.9, 0.1, 0.4, 0.85),
              (50_000, 0.05))
    summaries("items per order, unequal arms", (M, M),
              (90_000, 3.1, 2.0, 1.0, 0.5, 0.6), (10_000, 3.3, 2.2, 1.02, 0.5, 0.55))
    summaries("negatively correlated parts", (M, M),
              (5_000, 10.0, 3.0, 2.0, 0.7, -0.4), (5_000, 10.5, 3.0, 2.0, 0.7, -0.4))
    summaries("uncorrelated parts, alpha 0.1", (M, M),
              (3_000, 5.0, 1.0, 4.0, 1.0, 0.0), (3_000, 5.1, 1.0, 4.0, 1.0, 0.0),
              (5000, 0.1))
    per_user("refunds: a negative numerator", (M, M),
             [-5.0, 2.0, -1.0, 0.0, -3.0, 1.0], [1.0, 1.0, 2.0, 1.0, 1.0, 1.0],
             [-4.0, 1.0, -1.0, 0.0, -2.0, 2.0], [1.0, 1.0, 1.0, 2.0, 1.0, 1.0])
    per_user("zero variance: every user the same", (M, M),
             [2.0] * 30, [1.0] * 30, [3.0] * 30, [1.0] * 30)
    per_user("one user each", (M, M), [4.0], [2.0], [5.0], [1.0])
    per_user("control denominator 0", (M, M), [1.0, 2.0, 0.0], [0.0] * 3,
             [1.0, 2.0, 3.0], [1.0, 1.0, 2.0])
    per_user("treatment denominator 0", (M, M), [1.0, 2.0, 3.0], [1.0, 1.0, 2.0],
             [1.0, 2.0, 0.0], [0.0] * 3)
    per_user("control numerator 0", (M, M), [0.0] * 5, [1.0, 2.0, 1.0, 1.0, 3.0],
             [1.0, 0.0, 2.0, 0.0, 1.0], [1.0, 2.0, 1.0, 1.0, 3.0])
    per_user("no users in the treatment", (M, M), [1.0, 2.0, 3.0], [1.0, 1.0, 2.0], [], [])
    per_user("denominators near zero", (M, M),
             [1.0, 2.0, 1.5, 0.5], [1e-9, 2e-9, 1e-9, 3e-9],
             [1.0, 2.5, 1.5, 0.7], [2e-9, 2e-9, 1e-9, 3e-9])
    per_user("denominator sum near zero, mixed signs", (M, M),
             [1.0, 2.0, 1.5, 0.5, 1.0], [1.0, -1.0, 0.5, -0.5, 1e-6],
             [1.0, 2.5, 1.5, 0.7, 1.2], [1.0, -1.0, 0.5, -0.5, 3e-6])
    per_user("tiny numerators", (M, M),
             [1e-12, 3e-12, 2e-12, 0.0], [1.0, 2.0, 1.0, 1.0],
             [2e-12, 3e-12, 2e-12, 1e-12], [1.0, 2.0, 1.0, 1.0])
    summaries("huge values", (M, M), (1_000, 3e150, 1e150, 2e100, 1e100, 0.5),
              (1_000, 3.1e150, 1e150, 2e100, 1e100, 0.5))

    kinds = [(M, M), (C, M), (M, C), (C, C)]
    for i in range(48):
        k = kinds[i % 4]
        n_a = rng.choice([2, 3, 7, 25, 150, 1_000, 20_000, 400_000, 3_000_000])
        n_b = max(2, int(n_a * rng.uniform(0.6, 1.4)))
        if i % 3 == 0:
            # Per-user values (small arms only).
            n_a, n_b = min(n_a, 400), min(n_b, 400)

            def draw(n, lift):
                xs, ys = [], []
                for _ in range(n):
                    y = float(rng.random() < 0.6) if k[1] == C else float(1 + int(rng.expovariate(0.5)))
                    if k[0] == C:
                        x = float(rng.random() < 0.3 * lift)
                    else:
                        x = round(y * rng.gauss(5.0 * lift, 2.0), 2)
                    xs.append(x)
                    ys.append(y)
                return xs, ys

            per_user(f"random {i}, per user", k, *draw(n_a, 1.0),
                     *draw(n_b, rng.uniform(0.85, 1.15)),
                     (rng.choice([1000, 5000, 20000]), rng.choice([0.05, 0.05, 0.1])))
        else:
            def params(n, lift):
                mx = 0.3 * lift if k[0] == C else rng.uniform(0.5, 50.0) * lift
                sx = math.sqrt(mx * (1 - mx)) if k[0] == C else mx * rng.uniform(0.2, 3.0)
                my = 0.6 if k[1] == C else rng.uniform(0.5, 5.0)
                sy = math.sqrt(my * (1 - my)) if k[1] == C else my * rng.uniform(0.1, 1.5)
                return (n, mx, sx, my, sy, rng.uniform(-0.3, 0.9))

            summaries(f"random {i}, summaries", k, params(n_a, 1.0),
                      params(n_b, rng.uniform(0.9, 1.1)),
                      (rng.choice([1000, 5000, 20000]), 0.05))
    return cases


# --- CUPED cases -----------------------------------------------------------------------------


def correlated(rng, n, mean, sd, corr, lift=1.0, missing=0.0, pre_scale=1.0):
    """Per user: the metric (x) and its covariate (y), correlated; a share `missing` of the
    users have no covariate (0)."""
    xs, ys = [], []
    for _ in range(n):
        z = rng.gauss(0.0, 1.0)
        pre = mean + sd * z
        post = mean * lift + sd * (corr * z + math.sqrt(1 - corr * corr) * rng.gauss(0.0, 1.0))
        xs.append(round(post, 2))
        ys.append(0.0 if rng.random() < missing else round(pre * pre_scale, 2))
    return xs, ys


def binary(rng, n, p_pre, p_post, stay):
    """Per user: converted after (x) and before (y) exposure; `stay` the chance a user who
    converted before converts again."""
    xs, ys = [], []
    for _ in range(n):
        pre = float(rng.random() < p_pre)
        post = float(rng.random() < (stay if pre else p_post))
        xs.append(post)
        ys.append(pre)
    return xs, ys


def cuped_cases(rng):
    M, C = "mean", "conversion"
    cases = []

    def per_user(name, kind, a, b, sequential=(5000, 0.05)):
        cases.append(cuped_case(name, kind, sums_of(*a), sums_of(*b), sequential))

    def summaries(name, kind, a, b, sequential=(5000, 0.05)):
        cases.append(cuped_case(name, kind, summary(*a), summary(*b), sequential))

    per_user("revenue, 20 users", M, correlated(rng, 20, 10.0, 3.0, 0.7),
             correlated(rng, 20, 10.0, 3.0, 0.7, 1.1))
    per_user("revenue, 2,000 users", M, correlated(rng, 2000, 25.0, 8.0, 0.6),
             correlated(rng, 2000, 25.0, 8.0, 0.6, 1.03))
    per_user("revenue, 2,000 users, treatment worse", M, correlated(rng, 2000, 25.0, 8.0, 0.8),
             correlated(rng, 2000, 25.0, 8.0, 0.8, 0.96), (1000, 0.05))
    per_user("negative correlation: negative theta", M, correlated(rng, 300, 50.0, 10.0, -0.6),
             correlated(rng, 300, 50.0, 10.0, -0.6, 1.02))
    per_user("conversions, 3,000 users", C, binary(rng, 3000, 0.2, 0.1, 0.6),
             binary(rng, 3000, 0.2, 0.12, 0.6))
    per_user("conversions, 10 users", C, binary(rng, 10, 0.5, 0.3, 0.8),
             binary(rng, 10, 0.5, 0.4, 0.8))
    per_user("covariate missing for every user", M,
             (correlated(rng, 500, 10.0, 3.0, 0.5)[0], [0.0] * 500),
             (correlated(rng, 500, 10.0, 3.0, 0.5, 1.05)[0], [0.0] * 500))
    per_user("covariate missing for 40% of users", M,
             correlated(rng, 1500, 10.0, 3.0, 0.7, missing=0.4),
             correlated(rng, 1500, 10.0, 3.0, 0.7, 1.04, missing=0.4))
    per_user("conversions, no user converted before", C,
             (binary(rng, 400, 0.0, 0.1, 0.5)[0], [0.0] * 400),
             (binary(rng, 400, 0.0, 0.15, 0.5)[0], [0.0] * 400))
    per_user("covariate constant", M, (correlated(rng, 50, 10.0, 3.0, 0.5)[0], [7.0] * 50),
             (correlated(rng, 50, 10.0, 3.0, 0.5)[0], [7.0] * 50))
    per_user("metric constant: zero variance", M, ([4.99] * 40, correlated(rng, 40, 5.0, 1.0, 0.5)[1]),
             ([4.99] * 40, correlated(rng, 40, 5.0, 1.0, 0.5)[1]))
    per_user("metric constant in the treatment only", M, correlated(rng, 40, 5.0, 1.0, 0.5),
             ([4.99] * 40, correlated(rng, 40, 5.0, 1.0, 0.5)[1]))
    per_user("one user each", M, ([3.0], [2.0]), ([4.0], [1.0]))
    per_user("two users each", M, ([3.0, 5.0], [2.0, 3.0]), ([4.0, 6.0], [1.0, 4.0]))
    per_user("control metric 0", M, ([0.0] * 6, [1.0, 2.0, 0.0, 3.0, 1.0, 2.0]),
             ([1.0, 0.0, 2.0, 3.0, 0.0, 1.0], [1.0, 2.0, 0.0, 3.0, 1.0, 2.0]))
    per_user("no users in the treatment", M, correlated(rng, 30, 5.0, 1.0, 0.5), ([], []))
    per_user("covariate on another scale", M, correlated(rng, 800, 10.0, 3.0, 0.7, pre_scale=1e-3),
             correlated(rng, 800, 10.0, 3.0, 0.7, 1.02, pre_scale=1e-3))
    per_user("metric equal to twice the covariate", M,
             ([2.0 * y for y in [1.0, 2.0, 3.0, 4.0, 5.0]], [1.0, 2.0, 3.0, 4.0, 5.0]),
             ([2.0 * y + 1 for y in [1.0, 2.0, 3.0, 4.0, 6.0]], [1.0, 2.0, 3.0, 4.0, 6.0]))
    summaries("revenue, 500,000 users", M, (500_000, 2.0, 9.0, 1.9, 8.5, 0.65),
              (500_000, 2.05, 9.1, 1.9, 8.5, 0.65))
    summaries("revenue, 3,000,000 users, negative lift", M,
              (3_000_000, 2.0, 9.0, 2.0, 9.0, 0.8), (3_000_000, 1.98, 9.0, 2.0, 9.0, 0.8),
              (50_000, 0.05))
    summaries("unequal arms", M, (80_000, 12.0, 6.0, 11.0, 6.0, 0.5),
              (20_000, 12.4, 6.0, 11.0, 6.0, 0.5))
    summaries("correlation 0.99", M, (10_000, 5.0, 2.0, 5.0, 2.0, 0.99),
              (10_000, 5.02, 2.0, 5.0, 2.0, 0.99))
    summaries("huge values", M, (1_000, 3e150, 1e150, 3e150, 1e150, 0.5),
              (1_000, 3.1e150, 1e150, 3e150, 1e150, 0.5))

    for i in range(48):
        kind = C if i % 4 == 1 else M
        n_a = rng.choice([2, 3, 9, 40, 250, 2_000, 30_000, 600_000, 4_000_000])
        n_b = max(2, int(n_a * rng.uniform(0.6, 1.4)))
        seq = (rng.choice([1000, 5000, 20000]), rng.choice([0.05, 0.05, 0.1]))
        lift = rng.uniform(0.85, 1.15)
        if i % 3 == 0:
            n_a, n_b = min(n_a, 500), min(n_b, 500)
            if kind == C:
                p = rng.uniform(0.05, 0.5)
                a = binary(rng, n_a, p, p * 0.8, 0.6)
                b = binary(rng, n_b, p, p * 0.8 * lift, 0.6)
            else:
                mean, corr = rng.uniform(1.0, 100.0), rng.uniform(-0.5, 0.95)
                missing = rng.choice([0.0, 0.0, 0.3])
                a = correlated(rng, n_a, mean, mean * 0.4, corr, missing=missing)
                b = correlated(rng, n_b, mean, mean * 0.4, corr, lift, missing=missing)
            per_user(f"random {i}, per user", kind, a, b, seq)
        else:
            def params(n, lift):
                if kind == C:
                    mx, my = 0.2 * lift, 0.25
                    return (n, mx, math.sqrt(mx * (1 - mx)), my, math.sqrt(my * (1 - my)), 0.3)
                mean, corr = rng.uniform(0.5, 200.0), rng.uniform(-0.5, 0.97)
                return (n, mean * lift, mean * rng.uniform(0.3, 4.0), mean,
                        mean * rng.uniform(0.3, 4.0), corr)

            summaries(f"random {i}, summaries", kind, params(n_a, 1.0), params(n_b, lift), seq)
    return cases


def write(vectors):
    """The JSON text: one case a line, so a regenerated file diffs case by case."""
    lines = ["{"]
    keys = list(vectors)
    for k, key in enumerate(keys):
        end = "," if k + 1 < len(keys) else ""
        value = vectors[key]
        if isinstance(value, list):
            lines.append(f"{json.dumps(key)}: [")
            for i, case in enumerate(value):
                sep = "," if i + 1 < len(value) else ""
                lines.append(json.dumps(case, allow_nan=False) + sep)
            lines.append("]" + end)
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value)}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    rng = random.Random(20270069)
    with np.errstate(all="ignore"):
        vectors = {
            "generator": "crates/flowgate-domain/tests/data/cuped/generate.py",
            "environment": {
                "gbstats": gbstats.__version__ if hasattr(gbstats, "__version__") else "0.8.0",
                "numpy": np.__version__,
                "scipy": scipy.__version__,
            },
            "ratio": ratio_cases(rng),
            "cuped": cuped_cases(rng),
        }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vectors.json")
    with open(path, "w") as f:
        f.write(write(vectors))
    comparisons = sum(len(c["comparisons"]) for s in ("ratio", "cuped") for c in vectors[s])
    print(
        f"{len(vectors['ratio'])} ratio cases, {len(vectors['cuped'])} CUPED cases, "
        f"{comparisons} comparisons -> {path}"
    )


if __name__ == "__main__":
    main()
