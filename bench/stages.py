#!/usr/bin/env python3
"""Where a single resolve's cost goes, stage by stage (`make bench-stages`; docs/benchmarks.md).

Two sources, each read the same way, as a function's inclusive cost (its own and its callees'):

- **Instructions**, from callgrind runs of the in-process handler benchmark
  (crates/flowgate-http/benches/handler.rs), N and 2N requests of flowgate and of the no-logic
  baseline, the difference divided by N (bench/instructions.sh's method). The callgrind files are
  read directly (`fn=`/`calls=` records), not through callgrind_annotate, so a function's cost is
  the same whatever files its inlined code came from.
- **CPU time**, from `perf record -g` profiles of the pinned servers (`BENCH_PERF=1 make
  bench-http` writes target/bench-http/perf-pinned.data and perf-pinned-baseline.data, and
  pinned.json with each server's CPU µs per request): a stage's share of the server's samples
  (children included) times the server's median CPU µs per request.

Usage: stages.py instructions HANDLER_BIN [N]   (runs valgrind; default N 2000)
       stages.py perf                             (reads target/bench-http)
"""

import collections
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "target", "bench-http")

# (stage, [functions whose inclusive cost is the stage's], [functions inside them to subtract]).
# Names as callgrind and perf print them (demangled, no hash); a name matches a function whose
# name equals it or ends with it.
STAGES = [
    ("authenticate: SHA-256 of the key", ["flowgate_domain::keys::KeyDigest::of"], []),
    ("authenticate: header, key lookup, IP and key rate limits", ["flowgate_http::guard::authenticate"],
     ["flowgate_domain::keys::KeyDigest::of"]),
    ("body read (payload to one buffer, deadline)", ["flowgate_http::request_body::read_document::{{closure}}"], []),
    ("body parse (borrowed members)", ["flowgate_http::handlers::resolve::resolve_body::{{closure}}"],
     ["flowgate_http::request_body::read_document::{{closure}}"]),
    ("identity (user, session, platform checks)", ["flowgate_http::handlers::identity::identity"], []),
    ("resolve (10 audience rules, the experiment)", ["flowgate_domain::resolve::<impl flowgate_domain::catalog::App>::resolve"], []),
    ("result JSON (ids, flow bytes referenced)", ["flowgate_http::response::json::write_result"], []),
    ("resolve_no_flow events (13% of users)", ["flowgate_http::handlers::resolve::record_no_flow",
                                               "flowgate_http::handlers::resolve::enqueue_server_events"], []),
    ("response assembly (headers, coding)", ["flowgate_http::response::compression::encode"], []),
    ("latency metric", ["<flowgate_http::metrics::LatencyRecorder as flowgate_http::middleware::RecordLatency>::record"], []),
]
SERVE = "flowgate_http::dispatch::serve::{{closure}}"
# Parts of the kernel's share (children included; they overlap the "kernel, all" row). On
# loopback, the packets a server sends are delivered to the generator's socket in the sender's
# softirq, on the server's core: the generator's TCP receive and its wake-up count there.
KERNEL_ROWS = [
    ("kernel: sendto (copy, TCP, and the loopback delivery to the generator)", ["__x64_sys_sendto"]),
    ("kernel, within sendto: the generator's socket woken (`sock_def_readable`)", ["sock_def_readable"]),
    ("kernel: recvfrom", ["__x64_sys_recvfrom"]),
    ("kernel: epoll_wait", ["__x64_sys_epoll_wait"]),
]
# The baseline's whole handler: the body extracted as `Bytes`, the response built.
BASELINE_HANDLER = "actix_web::handler::handler_service::{{closure}}::{{closure}}"


def parse_callgrind(path):
    """{function: inclusive instructions} and the program total, from a callgrind file."""
    names, self_cost, call_cost = {}, collections.Counter(), collections.Counter()
    fn = cfn = None
    pending = False
    total = 0

    def name(token):
        m = re.match(r"\((\d+)\)(?: (.*))?$", token)
        if not m:
            return token
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names[m.group(1)]

    with open(path) as f:
        for line in f:
            if line.startswith("fn="):
                fn = name(line[3:].rstrip("\n"))
            elif line.startswith("cfn="):
                cfn = name(line[4:].rstrip("\n"))
            elif line.startswith("calls="):
                pending = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                parts = line.split()
                cost = int(parts[1]) if len(parts) > 1 else 0
                if pending:
                    if cfn != fn:  # recursion is counted once
                        call_cost[fn] += cost
                    pending = False
                else:
                    self_cost[fn] += cost
                    total += cost
    incl = collections.Counter()
    for k in set(self_cost) | set(call_cost):
        incl[k] = self_cost[k] + call_cost[k]
    return incl, total


def matching(costs, wanted):
    """The summed cost of the functions named `wanted`."""
    return sum(costs.get(w, 0) for w in wanted)


def run_callgrind(binary, variant, iters, out):
    path = os.path.join(out, "cg.%s.%d" % (variant, iters))
    env = dict(os.environ, HANDLER_ITERS=str(iters), HANDLER_VARIANT=variant)
    subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + path, binary, "--bench"],
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return parse_callgrind(path)


def per_request(binary, variant, n, out):
    (a, ta), (b, tb) = run_callgrind(binary, variant, n, out), run_callgrind(binary, variant, 2 * n, out)
    costs = {k: (b.get(k, 0) - a.get(k, 0)) / n for k in set(a) | set(b)}
    return costs, (tb - ta) / n


def stage_costs(costs):
    """[(stage, cost)] of flowgate's stages, then dispatch (the rest of `serve`'s cost), from
    {function: inclusive cost}."""
    rows = [(stage, matching(costs, functions) - matching(costs, minus)) for stage, functions, minus in STAGES]
    rows.append(("dispatch: routing, request id, CORS and RateLimit headers, log decision",
                 matching(costs, [SERVE]) - sum(v for _, v in rows)))
    return rows


def instructions(binary, n):
    with tempfile.TemporaryDirectory() as out:
        fg, fg_total = per_request(binary, "flowgate", n, out)
        bl, bl_total = per_request(binary, "baseline", n, out)
    print("| stage | flowgate instructions per request | baseline |")
    print("|---|---|---|")
    for stage, v in stage_costs(fg):
        print("| %s | %.0f | |" % (stage, v))
    serve = matching(fg, [SERVE])
    handler = matching(bl, [BASELINE_HANDLER])
    print("| the baseline's handler (body extracted, response built) | | %.0f |" % handler)
    print("| **the service's own work** | **%.0f** | **%.0f** |" % (serve, handler))
    print("| actix around the service (request and response objects, the service's box, the body"
          " streamed out) and the benchmark's harness (test request built, body copied out, a `rep"
          " movsb` counted per byte) | %.0f | %.0f |" % (fg_total - serve, bl_total - handler))
    print("| **total** | **%.0f** | **%.0f** (flowgate %.2fx) |" % (fg_total, bl_total, fg_total / bl_total))
    print()
    print("binary: %s; N=%d" % (binary, n))


def perf_shares(path):
    """{symbol: children share} and the kernel's self share of one perf file's samples."""
    out = subprocess.run(["perf", "report", "-i", path, "--children", "--stdio", "--no-header", "-g", "none",
                          "--percent-limit", "0.01", "--sort", "sym"], capture_output=True, text=True, check=True).stdout
    shares = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+([\d.]+)%\s+\[(.)\]\s+(.*)$", line)
        if m:
            shares[m.group(4).strip()] += float(m.group(1)) / 100
    kernel = subprocess.run(["perf", "report", "-i", path, "--no-children", "--stdio", "--no-header", "-g", "none",
                             "--sort", "dso"], capture_output=True, text=True, check=True).stdout
    k = sum(float(m.group(1)) for m in re.finditer(r"([\d.]+)%\s+\[kernel", kernel)) / 100
    return shares, k


def perf():
    with open(os.path.join(OUT, "pinned.json")) as f:
        pinned = json.load(f)
    # The recorded round's own CPU per request (the first): the profile is of that round.
    cpu = {name: pinned["peaks"][name][0]["cpu_us"] for name in ("flowgate", "baseline")}
    fg, fg_kernel = perf_shares(os.path.join(OUT, "perf-pinned.data"))
    bl, bl_kernel = perf_shares(os.path.join(OUT, "perf-pinned-baseline.data"))
    print("| stage | flowgate µs per request | share | baseline µs | share |")
    print("|---|---|---|---|---|")
    for stage, share in stage_costs(fg):
        print("| %s | %.2f | %.1f%% | | |" % (stage, share * cpu["flowgate"], share * 100))
    for label, symbols in KERNEL_ROWS:
        f, b = matching(fg, symbols), matching(bl, symbols)
        print("| %s | %.2f | %.1f%% | %.2f | %.1f%% |" % (label, f * cpu["flowgate"], f * 100, b * cpu["baseline"], b * 100))
    print("| kernel, all | %.2f | %.1f%% | %.2f | %.1f%% |"
          % (fg_kernel * cpu["flowgate"], fg_kernel * 100, bl_kernel * cpu["baseline"], bl_kernel * 100))
    for name, shares, kernel in (("flowgate", fg, fg_kernel), ("baseline", bl, bl_kernel)):
        own = matching(shares, [SERVE]) if name == "flowgate" else 0.0
        rest = 1 - kernel - own
        if name == "flowgate":
            print("| actix, allocator, runtime and other threads (user space outside the service) | %.2f | %.1f%% | | |"
                  % (rest * cpu[name], rest * 100))
        else:
            print("| baseline: all user space (actix parse, its handler, write buffers) | | | %.2f | %.1f%% |"
                  % (rest * cpu[name], rest * 100))
    print("| **CPU per request** (the recorded round's) | **%.2f** | | **%.2f** | |" % (cpu["flowgate"], cpu["baseline"]))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "instructions":
        instructions(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 2000)
    elif len(sys.argv) == 2 and sys.argv[1] == "perf":
        perf()
    else:
        sys.exit(__doc__)
