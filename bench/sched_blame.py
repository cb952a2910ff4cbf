#!/usr/bin/env python3
"""Who kept the server's workers and wrk waiting: reads a `perf sched record` file (as written
by `BENCH_SCHED=1 python3 bench/bench.py`) through `perf sched timehist`, and prints

1. per kind of thread: runs, and how many of them waited longer than 1, 2 and 4 ms for a core
   after becoming runnable (woken or preempted);
2. for the waits longer than THRESHOLD_MS of the server's workers and of wrk: how long each
   kind of thread ran on the cores during those waits, summed per wait (when two threads wait
   at once, what ran meanwhile counts for each of them, so the column can exceed the waits'
   total times the cores).

Thread names are those `perf` shows (15 characters): flowgate's actix workers are
`actix-server wo...`, the baseline's `actix-rt|...`, flowgate's runtime threads `tokio-rt-worker`.

Usage: python3 bench/sched_blame.py target/bench-http/sched-1-18480.data [THRESHOLD_MS]
Only the standard library and `perf`.
"""

import bisect
import collections
import subprocess
import sys

# Thread names (as `perf` shows them, up to 15 characters) grouped into kinds.
KINDS = (
    ("actix-server wo", "flowgate worker"),
    ("actix-rt", "baseline worker"),
    ("wrk", "wrk"),
    ("tokio-rt", "flowgate runtime"),
    ("postgres", "postgres"),
    ("<idle>", "idle"),
)
WAITERS = ("flowgate worker", "baseline worker", "wrk")


def kind(name):
    for prefix, k in KINDS:
        if name.startswith(prefix):
            return k
    return "other: " + name.split("[")[0]


def runs(path):
    """(end s, cpu, kind, sched delay ms, run ms) for every run in the file."""
    out = subprocess.run(["perf", "sched", "timehist", "-i", path], capture_output=True, text=True, check=True)
    rows = []
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) < 6:
            continue
        try:
            end, cpu = float(parts[0]), int(parts[1].strip("[]"))
            delay, run = float(parts[-2]), float(parts[-1])
        except ValueError:
            continue  # the header
        rows.append((end, cpu, kind(" ".join(parts[2:-3])), delay, run))
    return rows


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    threshold = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    rows = runs(sys.argv[1])
    counts = collections.defaultdict(lambda: [0, 0, 0, 0])
    for _, _, k, delay, _ in rows:
        c = counts[k]
        c[0] += 1
        c[1] += delay > 1
        c[2] += delay > 2
        c[3] += delay > 4
    print("| threads | runs | waited > 1 ms | > 2 ms | > 4 ms |")
    print("|---|---|---|---|---|")
    for k, c in sorted(counts.items(), key=lambda item: -item[1][0])[:12]:
        print("| %s | %d | %d | %d | %d |" % (k, *c))

    # Runs as intervals (start s, end s) sorted by start: a run overlapping the wait [w0, w1]
    # starts before w1 and no earlier than w0 minus the longest run.
    spans = sorted((end - run / 1e3, end, k) for end, _, k, _, run in rows)
    starts = [s for s, _, _ in spans]
    longest = max((run for *_, run in rows), default=0.0) / 1e3
    cores = max((cpu for _, cpu, *_ in rows), default=0) + 1
    ran = collections.Counter()
    waits, waited = 0, 0.0
    for end, _, k, delay, run in rows:
        if k not in WAITERS or delay <= threshold:
            continue
        w0, w1 = end - (run + delay) / 1e3, end - run / 1e3
        waits += 1
        waited += delay
        lo, hi = bisect.bisect_left(starts, w0 - longest), bisect.bisect_right(starts, w1)
        for s, e, k2 in spans[lo:hi]:
            overlap = min(w1, e) - max(w0, s)
            if overlap > 0:
                ran[k2] += overlap * 1e3
    print()
    print("%d waits longer than %g ms of workers and wrk, %.1f ms in all; what ran on the %d cores "
          "meanwhile, summed per wait:" % (waits, threshold, waited, cores))
    print()
    print("| threads | ms |")
    print("|---|---|")
    for k, ms in ran.most_common(10):
        print("| %s | %.1f |" % (k, ms))


if __name__ == "__main__":
    main()
