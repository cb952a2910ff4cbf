"""Golden vectors of Fisher's exact test (D35), written by SciPy's own `fisher_exact`.

Run by generate.sh, which installs SciPy from PyPI into a virtual environment first. Writes
fisher.json beside this file: for each case, the successes and users of two groups and SciPy's
two-sided p-value, so the Rust tests (crates/flowgate-domain/tests/it/results.rs) compare
flowgate's `fisher_exact` with SciPy's. The cases are fixed (the random ones seeded), so running
it again writes the same file.
"""

import json
import os
import random

import scipy
from scipy.stats import fisher_exact

FIXED = [
    # The rollout that shipped a flow nobody bought (issue 65): 0 of 68 against 317 of 634.
    (0, 68, 317, 634),
    (0, 10, 5, 10),
    (0, 20, 1, 20),
    (0, 100, 3, 100),
    (0, 5000, 30, 5000),
    (0, 1000, 500, 1000),
    (0, 30, 30, 30),
    (1, 68, 317, 634),
    (3, 10, 7, 10),
    (10, 10, 0, 10),
    (5, 10, 5, 10),
    (50, 100, 49, 100),
    (0, 2, 1, 2),
    (0, 50_000, 120, 50_000),
    (2, 200_000, 60, 200_000),
    (0, 1, 0, 1),
    (0, 7, 0, 9),
]


def case(a, n_a, b, n_b):
    _, p = fisher_exact([[a, n_a - a], [b, n_b - b]], alternative="two-sided")
    return {"a": a, "n_a": n_a, "b": b, "n_b": n_b, "p_value": float(p)}


def main():
    rng = random.Random(65)
    cases = [case(*c) for c in FIXED]
    for _ in range(60):
        n_a = rng.choice([5, 12, 40, 68, 150, 900, 3000])
        n_b = rng.choice([5, 12, 40, 634, 150, 900, 3000])
        p_b = rng.random()
        a = 0 if rng.random() < 0.5 else rng.randint(0, n_a)
        b = sum(1 for _ in range(n_b) if rng.random() < p_b)
        cases.append(case(a, n_a, b, n_b))
    out = {"generator": f"scipy {scipy.__version__} scipy.stats.fisher_exact", "cases": cases}
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "fisher.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
