#!/usr/bin/env python3
"""Writes the Unleash Edge data sets of `make bench-peer` (client-API features documents, the
format `unleash-edge offline --bootstrap-file` reads), into the folder given as the only
argument:

- equivalent.json: ONE toggle, `onboarding`, the Edge counterpart of the typical placement
  (typical_placement.json, read through gen_catalog.TYPICAL) as the single-resolve benchmark
  serves it: a flexibleRollout strategy (rollout = the experiment's coverage, stickiness
  userId, groupId = the experiment's name) with three constraints (country IN a list, app
  version >= 2.0.0 like `$vgte`, sessions <= 50) and the experiment's three variants as
  strategy variants (weights 2:1:1 as 500/250/250, stickiness userId), each with a JSON
  payload of one ~20 KB flow built by bench/gen_catalog.py (the same bytes flowgate serves).
  The constraints pass for the same 7 of bench/lua/resolve.lua's 12 attribute sets that reach
  flowgate's experiment (the other 5 stop at one of its 10 audience rules).
- equivalent_mirror.json: the same toggle, shaped so that Edge serves the same mix of bodies as
  flowgate: the holdout variant has no payload (flowgate's holdout serves no flow), and a
  second, unconstrained strategy serves the placement's default flow (flowgate serves a flow
  to users outside the coverage and to those stopped by an audience rule). This is the file
  `make bench-peer` measures (bench/peer.py); equivalent.json stays for checks by hand.
- edge5.json: Edge's own small benchmark data set, 5 toggles with one strategy each (see
  EDGE5 below for where each comes from).

Python 3 standard library only. The flows come from bench/gen_catalog.py, imported, so a change
of SCHEMA_BYTES or of the flow shape there changes the payloads here too.
"""

import json
import os
import sys

sys.dont_write_bytecode = True  # imports below are scripts of bench/, not packages
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # bench/
import gen_catalog  # noqa: E402  (bench/gen_catalog.py)

TOGGLE = "onboarding"
# What the typical placement's experiment reads, rendered as Unleash constraints. Countries:
# those of resolve.lua's attribute sets whose users reach the experiment in flowgate (DE stops
# at rule 1, JP at rule 7, a missing country at rule 10); sessions <= 50 leaves out the sets
# that stop at rules 3 and 4 (sessions 120 and 80).
COUNTRIES = ["US", "CA", "GB", "FR", "IN", "BR"]
MIN_APP_VERSION = "2.0.0"  # `$vgte` 2.0.0 = NOT SEMVER_LT 2.0.0 (Unleash has no SEMVER_GTE)
MAX_SESSIONS = "50"
# Context property names, shared with edge_requests.py.
PROP_COUNTRY = "country"
PROP_APP_VERSION = "appVersion"
PROP_SESSIONS = "sessions"

APP = 0  # the flows of app 0 of bench/gen_catalog.py's catalog
# Variant -> flow index, as typical_placement.json says (control 1, annual 2, holdout none);
# equivalent.json gives the holdout flow 3 so that every variant carries a payload.
HOLDOUT_FLOW_WHEN_PAYLOAD = 3
DEFAULT_FLOW = 0


def flow_document(flow_index):
    """The document flowgate answers for the published version of flow `flow_index` of app 0,
    without the fields that depend on the request (cache TTL, experiment and variant ids),
    compact, as the variant's JSON payload."""
    n = APP * gen_catalog.FLOWS_PER_APP + flow_index
    v = gen_catalog.VERSIONS_PER_FLOW - 1  # the published version (the last one)
    version = n * gen_catalog.VERSIONS_PER_FLOW + v
    return (
        '{"flow_id":"%s","flow_version_id":"%s","flow_version":%d,"schema_version":1,'
        '"flow_schema":%s,"media_base_url":"https://cdn.example.com/%d/media/",'
        '"icon_base_url":"https://cdn.example.com/%d/icons/","fonts":%s,"renderer_mode":"web"}'
        % (
            gen_catalog.uuid(3, n),
            gen_catalog.uuid(4, version),
            v + 1,
            gen_catalog.flow_schema(version),
            APP,
            APP,
            gen_catalog.FONTS,
        )
    )


def constraint(name, operator, values=None, value=None, inverted=False):
    c = {"contextName": name, "operator": operator, "inverted": inverted, "caseInsensitive": False}
    if values is not None:
        c["values"] = values
    if value is not None:
        c["value"] = value
        c["values"] = []
    return c


def variant(name, weight, flow_index):
    v = {"name": name, "weight": weight, "weightType": "variable", "stickiness": "userId"}
    if flow_index is not None:
        v["payload"] = {"type": "json", "value": flow_document(flow_index)}
    return v


def feature(strategies):
    return {
        "name": TOGGLE,
        "type": "experiment",
        "description": "flowgate's typical placement: 3 constraints, then a 2:1:1 experiment",
        "enabled": True,
        "project": "default",
        "stale": False,
        "impressionData": False,
        "strategies": strategies,
        "variants": [],
    }


def experiment_strategy(mirror):
    t = gen_catalog.typical()
    e = t["experiment"]
    total = sum(v["weight"] for v in e["variants"])
    variants = []
    for v in e["variants"]:
        flow = v["flow"]
        if flow is None and not mirror:
            flow = HOLDOUT_FLOW_WHEN_PAYLOAD
        # Unleash weights are per mille: 2:1:1 -> 500/250/250.
        variants.append(variant(v["name"], v["weight"] * 1000 // total, flow))
    return {
        "name": "flexibleRollout",
        "sortOrder": 0,
        "parameters": {
            "rollout": str(round(e["coverage"] * 100)),
            "stickiness": "userId",
            "groupId": e["name"],
        },
        "constraints": [
            constraint(PROP_COUNTRY, "IN", values=COUNTRIES),
            constraint(PROP_APP_VERSION, "SEMVER_LT", value=MIN_APP_VERSION, inverted=True),
            constraint(PROP_SESSIONS, "NUM_LTE", value=MAX_SESSIONS),
        ],
        "variants": variants,
    }


def default_strategy():
    """equivalent_mirror.json's fallback: everybody the first strategy leaves out gets the
    placement's default flow (flowgate: outside the coverage, or stopped by a rule)."""
    return {
        "name": "flexibleRollout",
        "sortOrder": 1,
        "parameters": {"rollout": "100", "stickiness": "userId", "groupId": TOGGLE + "-default"},
        "constraints": [],
        "variants": [variant("default", 1000, DEFAULT_FLOW)],
    }


def document(features):
    return {
        "version": 2,
        "features": features,
        "segments": [],
        "query": {"environment": "development", "inlineSegmentConstraints": True},
    }


def equivalent():
    return document([feature([experiment_strategy(mirror=False)])])


def equivalent_mirror():
    return document([feature([experiment_strategy(mirror=True), default_strategy()])])


def toggle(name, strategy, enabled=True, project="default", kind="release", description=None):
    t = {
        "name": name,
        "type": kind,
        "enabled": enabled,
        "project": project,
        "stale": False,
        "impressionData": False,
        "strategies": [strategy],
        "variants": [],
    }
    if description is not None:
        t["description"] = description
    return t


def flexible(group_id, rollout, stickiness, constraints=()):
    return {
        "name": "flexibleRollout",
        "constraints": list(constraints),
        "parameters": {"groupId": group_id, "rollout": rollout, "stickiness": stickiness},
    }


def edge5():
    """Edge's docs/benchmarking.md (Unleash/unleash-edge, MIT) measures a "small dataset of 5
    features with one strategy on each" (about 2 kB) but the repository does not publish that
    file. This reconstructs it from the toggles Edge's repository does publish: the 3 toggles
    of its offline benchmark, benchmarks/context-enrichment/edge/features.json, and 2
    one-strategy toggles of examples/features2.json (`favorites`, `maintenance`)."""
    return {
        "version": 2,
        "features": [
            # benchmarks/context-enrichment/edge/features.json
            toggle(
                "enriched-country",
                flexible(
                    "enriched-country", "100", "userId",
                    [constraint("country", "IN", values=["ES", "NO"])],
                ),
            ),
            toggle("cohort-rollout", flexible("cohort-rollout", "50", "userId"), kind="experiment"),
            toggle("always-on", {"name": "default", "parameters": {}, "constraints": []}),
            # examples/features2.json
            toggle("favorites", flexible("favorites", "100", "default"), project="dx"),
            toggle(
                "maintenance",
                {"name": "default", "constraints": [], "parameters": {}},
                enabled=False,
                project="dx",
                kind="operational",
                description="This toggle enables if the maintenance features is enabled for customer.",
            ),
        ],
        "query": {"environment": "development", "inlineSegmentConstraints": True},
    }


def write(out, name, doc):
    path = os.path.join(out, name)
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    return path, os.path.getsize(path)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: edge_features.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, doc in (
        ("equivalent.json", equivalent()),
        ("equivalent_mirror.json", equivalent_mirror()),
        ("edge5.json", edge5()),
    ):
        path, size = write(out, name, doc)
        print("%s: %d bytes, %d toggle(s)" % (path, size, len(doc["features"])))
    payload = len(flow_document(1).encode())
    print("payload: %d bytes (flow_schema %d bytes)" % (payload, len(gen_catalog.flow_schema(3))))


if __name__ == "__main__":
    main()
