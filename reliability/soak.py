#!/usr/bin/env python3
"""Soak driver for `make soak` (docs/reliability.md): mixed resolve, batch resolve and events load at a
fixed rate against one flowgate process on 127.0.0.1, sampling the server's RSS and the client
latency every interval into a CSV, then printing a summary (RSS slope, latency over time,
errors). Standard library only; every loop is bounded by the run's duration.

Usage: soak.py --base http://127.0.0.1:PORT --key KEY --app APP --pid PID --seconds 600 \
               --csv target/soak/soak.csv [--rate 300] [--interval 10]
"""

import argparse
import http.client
import json
import random
import threading
import time
import uuid
from datetime import datetime, timezone
from urllib.parse import urlparse

# The demo catalog's onboarding flow (crates/flowgate/src/demo.rs).
FLOW = "d0000000-0000-4000-8000-0000000000f1"
VERSION = "d0000000-0000-4000-8000-0000000000e1"
COUNTRIES = ["US", "CA", "GB", "FR", "DE", "JP", "BR"]
PLATFORMS = ["ios", "android", "web"]
EVENT_TYPES = ["flow_open", "screen_view", "screen_complete", "flow_complete"]
EVENTS_PER_REQUEST = 10
# Mix by request count: resolve, batch resolve, events.
MIX = [("resolve", 0.6), ("batch", 0.2), ("events", 0.2)]
ROUTES = [name for name, _ in MIX]


class Window:
    """Observations of one sampling interval."""

    def __init__(self):
        self.lat = {r: [] for r in ROUTES}
        self.errors = {r: 0 for r in ROUTES}
        self.events_accepted = 0


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.window = Window()
        self.error_samples = []
        self.total_events_accepted = 0

    def record(self, route, seconds, ok, accepted=0, detail=None):
        with self.lock:
            self.window.lat[route].append(seconds)
            if not ok:
                self.window.errors[route] += 1
                if detail and len(self.error_samples) < 20:
                    self.error_samples.append(f"{route}: {detail}")
            self.window.events_accepted += accepted
            self.total_events_accepted += accepted

    def take(self):
        with self.lock:
            w, self.window = self.window, Window()
            return w


def identity(rng):
    return {
        "user_id": f"soak-user-{rng.randrange(100_000)}",
        "session_id": f"soak-session-{rng.randrange(1_000_000)}",
        "device_platform": rng.choice(PLATFORMS),
        "attributes": {"country": rng.choice(COUNTRIES), "app.version": "2.4.0"},
    }


def request_for(route, app, rng):
    if route == "resolve":
        placement = rng.choice(["onboarding", "paywall"])
        return f"/v1/apps/{app}/placements/{placement}/resolve", identity(rng), 200
    if route == "batch":
        body = identity(rng)
        body["placement_keys"] = ["onboarding", "paywall"]
        return f"/v1/apps/{app}/placements/resolve-batch", body, 200
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    who = identity(rng)
    events = [
        {
            "event_id": str(uuid.uuid4()),
            "app_id": app,
            "flow_id": FLOW,
            "flow_version_id": VERSION,
            "user_id": who["user_id"],
            "session_id": who["session_id"],
            "device_platform": who["device_platform"],
            "event_type": rng.choice(EVENT_TYPES),
            "timestamp": now,
            "sdk_version": "soak-1.0",
            "screen_index": i,
        }
        for i in range(EVENTS_PER_REQUEST)
    ]
    return f"/v1/apps/{app}/events", events, 202


def worker(args, state, deadline, rate, seed):
    rng = random.Random(seed)
    url = urlparse(args.base)
    conn = None
    headers = {"Authorization": f"Bearer {args.key}", "Content-Type": "application/json"}
    period = 1.0 / rate
    next_at = time.monotonic()
    weights = [w for _, w in MIX]
    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        if next_at > now:
            time.sleep(next_at - now)
        next_at += period
        route = rng.choices(ROUTES, weights)[0]
        path, body, want = request_for(route, args.app, rng)
        data = json.dumps(body).encode()
        start = time.perf_counter()
        try:
            if conn is None:
                conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
            conn.request("POST", path, body=data, headers=headers)
            resp = conn.getresponse()
            payload = resp.read()
            elapsed = time.perf_counter() - start
            accepted = 0
            ok = resp.status == want
            if ok and route == "events":
                result = json.loads(payload)
                accepted = result.get("accepted", 0)
                ok = accepted == EVENTS_PER_REQUEST and result.get("rejected", 0) == 0
            state.record(route, elapsed, ok, accepted, None if ok else f"{resp.status} {payload[:200]!r}")
        except (OSError, http.client.HTTPException, ValueError) as err:
            state.record(route, time.perf_counter() - start, False, 0, repr(err))
            if conn is not None:
                conn.close()
            conn = None
    if conn is not None:
        conn.close()


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return -1
    return -1


def pct(values, p):
    if not values:
        return 0.0
    values = sorted(values)
    k = min(len(values) - 1, max(0, int(round(p / 100.0 * len(values) + 0.5)) - 1))
    return values[k]


def slope_per_minute(points):
    """Least-squares slope of (seconds, value) points, per minute."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    return 60.0 * sxy / sxx if sxx else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--app", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--interval", type=int, default=10)
    ap.add_argument("--rate", type=float, default=300.0, help="total requests per second")
    ap.add_argument("--threads", type=int, default=6)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--summary", required=True)
    args = ap.parse_args()

    state = State()
    begin = time.monotonic()
    deadline = begin + args.seconds
    per_thread = args.rate / args.threads
    threads = [
        threading.Thread(target=worker, args=(args, state, deadline, per_thread, i), daemon=True)
        for i in range(args.threads)
    ]
    for t in threads:
        t.start()

    cols = ["t_s", "rss_kib", "requests", "errors", "events_accepted"]
    for r in ROUTES:
        cols += [f"{r}_n", f"{r}_p50_ms", f"{r}_p99_ms", f"{r}_max_ms"]
    rows = []
    with open(args.csv, "w") as out:
        out.write(",".join(cols) + "\n")
        out.flush()
        tick = begin
        while tick < deadline:
            tick += args.interval
            time.sleep(max(0.0, tick - time.monotonic()))
            w = state.take()
            row = {
                "t_s": round(tick - begin),
                "rss_kib": rss_kib(args.pid),
                "requests": sum(len(w.lat[r]) for r in ROUTES),
                "errors": sum(w.errors.values()),
                "events_accepted": w.events_accepted,
            }
            for r in ROUTES:
                row[f"{r}_n"] = len(w.lat[r])
                row[f"{r}_p50_ms"] = round(pct(w.lat[r], 50) * 1000, 2)
                row[f"{r}_p99_ms"] = round(pct(w.lat[r], 99) * 1000, 2)
                row[f"{r}_max_ms"] = round(max(w.lat[r], default=0) * 1000, 2)
            rows.append(row)
            out.write(",".join(str(row[c]) for c in cols) + "\n")
            out.flush()
            print(
                f"t={row['t_s']:>4}s rss={row['rss_kib'] / 1024:.1f} MiB req={row['requests']} "
                f"err={row['errors']} resolve p50/p99={row['resolve_p50_ms']}/{row['resolve_p99_ms']} ms "
                f"events p99={row['events_p99_ms']} ms",
                flush=True,
            )
    for t in threads:
        t.join(timeout=15)
    w = state.take()  # stragglers finishing after the last sample
    late_errors = sum(w.errors.values())

    requests = sum(r["requests"] for r in rows) + sum(len(w.lat[r]) for r in ROUTES)
    errors = sum(r["errors"] for r in rows) + late_errors
    rss = [(r["t_s"], r["rss_kib"] / 1024) for r in rows if r["rss_kib"] >= 0]
    after_warmup = [p for p in rss if p[0] > 60]
    half = len(rows) // 2
    summary = {
        "seconds": args.seconds,
        "target_rps": args.rate,
        "requests": requests,
        "achieved_rps": round(requests / args.seconds, 1),
        "errors": errors,
        "error_samples": state.error_samples,
        "events_accepted": state.total_events_accepted,
        "rss_mib_first": round(rss[0][1], 1) if rss else None,
        "rss_mib_last": round(rss[-1][1], 1) if rss else None,
        "rss_mib_max": round(max(v for _, v in rss), 1) if rss else None,
        "rss_slope_mib_per_min_all": round(slope_per_minute(rss), 3),
        "rss_slope_mib_per_min_after_1min": round(slope_per_minute(after_warmup), 3),
        "latency_ms": {
            r: {
                "p50_first_half_median": round(pct([x[f"{r}_p50_ms"] for x in rows[:half]], 50), 2),
                "p50_second_half_median": round(pct([x[f"{r}_p50_ms"] for x in rows[half:]], 50), 2),
                "p99_first_half_median": round(pct([x[f"{r}_p99_ms"] for x in rows[:half]], 50), 2),
                "p99_second_half_median": round(pct([x[f"{r}_p99_ms"] for x in rows[half:]], 50), 2),
                "p99_worst_window": max((x[f"{r}_p99_ms"] for x in rows), default=0),
                "max": max((x[f"{r}_max_ms"] for x in rows), default=0),
                "p99_slope_ms_per_min": round(
                    slope_per_minute([(x["t_s"], x[f"{r}_p99_ms"]) for x in rows]), 4
                ),
            }
            for r in ROUTES
        },
    }
    with open(args.summary, "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
