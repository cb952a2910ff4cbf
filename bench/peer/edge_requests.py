#!/usr/bin/env python3
"""Writes the request lists of `make bench-peer`'s Unleash Edge side: the Edge counterpart of
one flowgate single resolve of the typical placement, with the same users and attributes as
bench/lua/resolve.lua.

    edge_requests.py OUT_DIR [--base-url http://127.0.0.1:18483] [--count 100000]

Writes, into OUT_DIR:
- equivalent.urls: one full URL a line, for `oha --urls-from-file`:
  GET /api/frontend/features/onboarding?<context>, Edge's evaluation of one toggle for one
  context (equivalent.json or equivalent_mirror.json must be the bootstrap file);
- equivalent.paths: the same requests as path and query only, one a line, for wrk
  (bench/peer/edge.lua reads it);
- edge5.urls, edge5.paths: GET /api/frontend?<context>, every toggle of edge5.json evaluated
  for the same contexts (Edge's own benchmark endpoint);
- requests.json: the token header and what the lists hold.

Every request carries the header `Authorization: <FRONTEND_TOKEN>` (no "Bearer"); see
README.md. The context is a query string (serde_qs): userId, sessionId and appName at the top
level, everything else as `properties[name]=value`, brackets percent-encoded as browsers and
the Unleash SDKs send them.

Line n (n = 1..count) is request n of resolve.lua's thread 1: user `user-((1000003 + n) * 7919
% 100000)`, attribute set n % 12, platform n % 4, app n % 10. 100,000 lines hold each of the
100,000 user ids exactly once. Python 3 standard library only.
"""

import argparse
import json
import os
import sys
from urllib.parse import quote

sys.dont_write_bytecode = True  # imports below are scripts of bench/, not packages
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # bench/
import gen_catalog  # noqa: E402
import edge_features as features  # noqa: E402

# Offline Edge accepts exactly the tokens it was started with (--frontend-tokens /
# --client-tokens); the format is Unleash's `<project>:<environment>.<secret>`, `*` = all
# projects. Offline mode refuses to start without a client token, hence two.
FRONTEND_TOKEN = "*:development.flowgate-bench-frontend-token"
CLIENT_TOKEN = "*:development.flowgate-bench-client-token"
DEFAULT_BASE_URL = "http://127.0.0.1:18483"

# bench/lua/resolve.lua's 12 attribute sets and 4 platforms, in its order.
SETS = [
    {"country": "US", "app.version": "2.4.1", "locale": "en-US", "plan": "free", "sessions": 12, "email": "someone@example.com", "age": 31, "tags": ["new", "organic"]},
    {"country": "CA", "app.version": "2.9.0", "locale": "en-CA", "plan": "free", "sessions": 3, "email": "a@b.ca", "age": 24, "tags": ["organic"]},
    {"country": "GB", "app.version": "3.2.0", "locale": "en-GB", "plan": "trial", "sessions": 40, "age": 45, "tags": []},
    {"country": "FR", "app.version": "2.0.5", "locale": "fr-FR", "plan": "free", "sessions": 7, "age": 29},
    {"country": "US", "app.version": "3.0.1", "locale": "es-US", "plan": "free", "sessions": 1, "tags": ["paid"]},
    {"country": "IN", "app.version": "2.2.0", "locale": "hi-IN", "plan": "free", "sessions": 15, "age": 19},
    {"country": "DE", "app.version": "3.1.0", "locale": "de-DE", "plan": "free", "sessions": 20},
    {"country": "BR", "app.version": "2.7.0", "locale": "pt-BR", "plan": "free", "sessions": 9},
    {"country": "US", "app.version": "2.4.1", "plan": "pro", "sessions": 120},
    {"country": "FR", "app.version": "2.4.1", "plan": "free", "sessions": 80},
    {"country": "JP", "app.version": "2.8.0", "plan": "free", "sessions": 5, "age": 70, "email": "x@example.org"},
    {"app.version": "2.4.1", "plan": "free", "sessions": 2},
]
PLATFORMS = ["ios", "android", "web", "ios"]
# Attribute names as Edge's context properties (the constraints' contextName).
RENAME = {
    "country": features.PROP_COUNTRY,
    "app.version": features.PROP_APP_VERSION,
    "sessions": features.PROP_SESSIONS,
}


def prop(name, value):
    if isinstance(value, list):
        value = ",".join(value)
    return "properties%5B" + quote(name, safe="") + "%5D=" + quote(str(value), safe="")


def query(n):
    base = 1 * 1000003 + n  # resolve.lua's thread 1
    attrs = SETS[n % len(SETS)]
    parts = [
        "userId=user-%d" % (base * 7919 % 100000),
        "sessionId=s-%d" % base,
        "appName=" + gen_catalog.uuid(2, n % gen_catalog.APPS_PER_WORKSPACE),
        prop("devicePlatform", PLATFORMS[n % len(PLATFORMS)]),
    ]
    parts += [prop(RENAME.get(k, k), v) for k, v in attrs.items()]
    return "&".join(parts)


def passes_constraints(attrs):
    """What equivalent.json's constraints say of an attribute set (before the rollout)."""

    def semver(v):
        return tuple(int(x) for x in v.split("."))

    return (
        attrs.get("country") in features.COUNTRIES
        and "app.version" in attrs
        and semver(attrs["app.version"]) >= semver(features.MIN_APP_VERSION)
        and attrs.get("sessions", 1e9) <= float(features.MAX_SESSIONS)
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--base-url", default=DEFAULT_BASE_URL)
    ap.add_argument("--count", type=int, default=100_000)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    base_url = args.base_url.rstrip("/")
    endpoints = {
        "equivalent": "/api/frontend/features/" + features.TOGGLE,
        "edge5": "/api/frontend",
    }
    for name, path in endpoints.items():
        with open(os.path.join(args.out, name + ".urls"), "w") as urls, open(
            os.path.join(args.out, name + ".paths"), "w"
        ) as paths:
            for n in range(1, args.count + 1):
                line = path + "?" + query(n)
                paths.write(line + "\n")
                urls.write(base_url + line + "\n")
    passing = sum(passes_constraints(SETS[n % len(SETS)]) for n in range(1, args.count + 1))
    meta = {
        "headers": {"Authorization": FRONTEND_TOKEN},
        "frontend_token": FRONTEND_TOKEN,
        "client_token": CLIENT_TOKEN,
        "base_url": base_url,
        "count": args.count,
        "endpoints": endpoints,
        "constraint_pass_fraction": passing / args.count,
    }
    with open(os.path.join(args.out, "requests.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(
        "%s: %d requests per list; constraints pass for %.1f%% (7/12 = 58.3%%)"
        % (args.out, args.count, 100 * passing / args.count)
    )


if __name__ == "__main__":
    main()
