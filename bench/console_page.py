#!/usr/bin/env python3
"""The console's experiment page for a 1,000,000-user experiment (`make bench-console`; D24,
docs/benchmarks.md).

The release binary serves the database `make bench-results` keeps (RESULTS_KEEP=1: one
experiment, 1,000,000 exposed users, about 8.5 million events on PostgreSQL). After signing in
to the console, it asks in alternation for the experiment's page (the report's query, the
report, the charts and the HTML: what an operator waits for) and for the admin API's JSON
report of the same experiment (the same query and report, no page): the baseline of the same
run. The first of each, then the median of BENCH_ROUNDS (default 5) more. Times are whole
responses read by this client over loopback.

Environment: BENCH_BIN (target/release/flowgate), CONSOLE_DB (the kept database's URL),
BENCH_ROUNDS. Writes target/bench-console/console.md.
"""

import http.client
import os
import re
import statistics
import subprocess
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("BENCH_BIN", os.path.join(ROOT, "target/release/flowgate"))
DB = os.environ.get(
    "CONSOLE_DB", "postgres://postgres@127.0.0.1:5432/flowgate_results_bench_1000000"
)
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
TOKEN = "console-bench-admin-token-0123456789"
# flowgate_contract_tests::fixtures::scale::experiment::EXPERIMENT
EXPERIMENT = str(uuid.UUID(int=0xE100_0000_0000_4000_8000_0000_0000_0001))
API, ADMIN = 18581, 18591


def request(method, path, headers=None, body=None):
    """One exchange on a new connection: status, headers, body and seconds."""
    conn = http.client.HTTPConnection("127.0.0.1", ADMIN, timeout=120)
    start = time.perf_counter()
    conn.request(method, path, body=body, headers=headers or {})
    response = conn.getresponse()
    data = response.read()
    took = time.perf_counter() - start
    conn.close()
    return response.status, response.getheaders(), data, took


def cookie(headers, name):
    for key, value in headers:
        if key.lower() == "set-cookie" and value.startswith(name + "="):
            return value.split(";", 1)[0]
    sys.exit(f"no {name} cookie in {headers}")


def sign_in():
    status, headers, body, _ = request("GET", "/console/sign-in")
    assert status == 200, body
    pre = cookie(headers, "flowgate_console_sign_in")
    csrf = re.search(rb'name="csrf" value="([0-9a-f]{64})"', body).group(1).decode()
    status, headers, body, _ = request(
        "POST",
        "/console/sign-in",
        {"Content-Type": "application/x-www-form-urlencoded", "Cookie": pre},
        f"csrf={csrf}&token={TOKEN}",
    )
    assert status == 303, (status, body)
    return cookie(headers, "flowgate_console")


def main():
    if not os.path.exists(BIN):
        sys.exit(f"{BIN} is missing: cargo build --release -p flowgate")
    env = dict(
        os.environ,
        FLOWGATE__DATABASE__URL=DB,
        FLOWGATE__DATABASE__AUTO_MIGRATE="false",
        FLOWGATE__SERVER__LISTEN=f"127.0.0.1:{API}",
        FLOWGATE__ADMIN__LISTEN=f"127.0.0.1:{ADMIN}",
        FLOWGATE__ADMIN__TOKEN=TOKEN,
        FLOWGATE__CATALOG__CACHE_PATH="",
        FLOWGATE__LOG__LEVEL="warn",
    )
    server = subprocess.Popen(
        [BIN, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.time() + 60
        while True:
            try:
                if request("GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or server.poll() is not None:
                sys.exit("the server did not become ready")
            time.sleep(0.2)
        session = sign_in()
        page = ("GET", f"/console/experiments/{EXPERIMENT}", {"Cookie": session})
        report = (
            "GET",
            f"/admin/v1/experiments/{EXPERIMENT}/results",
            {"Authorization": f"Bearer {TOKEN}"},
        )
        times = {"page": [], "json": []}
        sizes = {}
        order = (("page", page), ("json", report))
        if os.environ.get("BENCH_FIRST") == "json":
            order = order[::-1]
        for i in range(ROUNDS + 1):
            for name, (method, path, headers) in order:
                status, _, body, took = request(method, path, headers)
                assert status == 200, (name, status, body[:500])
                if name == "page":
                    exposed = re.search(rb'id="exposed-users">(\d+)<', body).group(1).decode()
                times[name].append(took)
                sizes[name] = len(body)
        lines = [
            f"Experiment page of the console for {int(exposed):,} exposed users "
            f"({DB.rsplit('/', 1)[-1]}), {ROUNDS} rounds after a first request:",
            "",
            "| response | bytes | first (s) | median (s) | min (s) |",
            "|---|---|---|---|---|",
        ]
        for name, label in (("page", "console page (HTML, charts)"), ("json", "admin API report (JSON)")):
            rest = times[name][1:]
            lines.append(
                f"| {label} | {sizes[name]:,} | {times[name][0]:.3f} | "
                f"{statistics.median(rest):.3f} | {min(rest):.3f} |"
            )
        ratio = statistics.median(times["page"][1:]) / statistics.median(times["json"][1:])
        lines += ["", f"page / JSON (medians): {ratio:.3f}; target: the page under 1.5 s"]
        text = "\n".join(lines)
        print(text)
        out = os.path.join(ROOT, "target/bench-console")
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "console.md"), "w") as f:
            f.write(text + "\n")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
