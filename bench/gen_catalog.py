#!/usr/bin/env python3
"""Generates the catalog of the HTTP load benchmark (docs/benchmarks.md), in D13's JSON shape.

Same shape and sizes as `crates/flowgate-testkit/src/scale.rs`: 10 workspaces, 100 apps,
5,000 placements, 1,000 flows with 2,000 versions of about 20 KB. Placement 0 of every app is
the "typical placement" of the single-resolve scenario instead of a small one: `onboarding`
with the rules of `crates/flowgate-contract-tests/data/typical_placement.json`, which the Rust
fixture (`fixtures::catalogs::realistic_catalog_json`) also reads: 10 audiences with mixed operators,
a 200-member saved group, a 3-variant experiment. No API keys: the
benchmark creates one with `flowgate keys create`.

With BENCH_STICKY=1, every app also has `onboarding_sticky`: the typical placement with an
experiment of its own ids that is sticky (D23), for bench/sticky.py.

Writes, into the folder given as the only argument:
- catalog.json: the catalog;
- change.json: a published change (flow 9 of app 0 goes back to publishing version 1, which
  placement.49 serves by default);
- meta.json: the ids the Lua scripts and the harness need.
"""

import json
import os
import sys

WORKSPACES = 10
APPS_PER_WORKSPACE = 10
FLOWS_PER_APP = 10
VERSIONS_PER_FLOW = 2
PLACEMENTS_PER_APP = 50
SCHEMA_BYTES = 20_000
PROBE_PLACEMENT = 49  # default flow (49 + 0) % 10 = flow 9 of its app
# BENCH_STICKY=1 (bench/sticky.py): every app also gets `onboarding_sticky`, the typical
# placement with its experiment sticky (D23).
STICKY = os.environ.get("BENCH_STICKY") == "1"


def uuid(kind, n):
    h = "%032x" % ((kind << 96) | 0x4000_8000_0000_0000 | n)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def flow_schema(seed):
    """A flow definition of about SCHEMA_BYTES: screens of text, image and button components."""
    parts = [
        '{"id":"flow-%d","theme":{"background":"#FFFFFF","accent":"#3355FF"},"screens":['
        % seed
    ]
    size = len(parts[0])
    i = 0
    while size < SCHEMA_BYTES:
        s = (
            ("," if i else "")
            + '{"id":"screen-%d","type":"page","components":[{"type":"text","text":"Welcome to step %d of flow %d: everything you need, nothing you do not.","style":{"font":"Inter","size":17,"weight":600,"color":"#1A1A1A"}},{"type":"image","url":"media/hero-%d-%d.webp","aspect":1.777},{"type":"button","label":"Continue","action":{"type":"next"},"style":{"radius":12}}]}'
            % (i, i, seed, seed, i)
        )
        parts.append(s)
        size += len(s)
        i += 1
    parts.append("]}")
    return "".join(parts)


FONTS = '[{"family":"Inter","weight":400,"style":"normal","url":"https://cdn.example.com/inter.woff2"}]'


def flow(app_n, f, published):
    n = app_n * FLOWS_PER_APP + f
    versions = []
    for v in range(VERSIONS_PER_FLOW):
        version = n * VERSIONS_PER_FLOW + v
        versions.append(
            '{"id":"%s","version":%d,"schema_version":1,"fonts":%s,"flow_schema":%s}'
            % (uuid(4, version), v + 1, FONTS, flow_schema(version))
        )
    return '{"id":"%s","name":"Flow %d","published_version":%d,"versions":[%s]}' % (
        uuid(3, n),
        n,
        published,
        ",".join(versions),
    )


# The typical placement, shared with the domain and handler benchmarks and their fixture
# (crates/flowgate-contract-tests/src/fixtures/catalogs.rs::realistic_catalog_json).
TYPICAL = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "crates", "flowgate-contract-tests", "data", "typical_placement.json",
)


def typical():
    with open(TYPICAL) as f:
        return json.load(f)


def typical_placement(app_n, flow_id, sticky=False):
    """typical_placement.json's 10 audiences (rule i shows flow i + 1), then its experiment
    (variants name flows by the same numbers; flow 0 is the default). `sticky`: the twin
    `onboarding_sticky`, whose experiment (ids of its own) is sticky (D23)."""
    t = typical()
    rules = [{"audience": a, "flow_id": flow_id(i + 1)} for i, a in enumerate(t["audiences"])]
    placement = app_n * PLACEMENTS_PER_APP
    e = t["experiment"]
    kind = 0xD if sticky else 5
    experiment = {"sticky": True} if sticky else {}
    rules.append(
        {
            "audience": e["audience"],
            "experiment": {
                "id": uuid(kind, placement),
                "name": e["name"],
                "status": e["status"],
                "coverage": e["coverage"],
                **experiment,
                "variants": [
                    {
                        "id": uuid(kind + 1, placement * 3 + i),
                        "name": v["name"],
                        "weight": v["weight"],
                        "flow_id": None if v["flow"] is None else flow_id(v["flow"]),
                    }
                    for i, v in enumerate(e["variants"])
                ],
            },
        }
    )
    return json.dumps(
        {"key": t["key"] + ("_sticky" if sticky else ""), "default_flow_id": flow_id(0), "rules": rules},
        separators=(",", ":"),
    )


def small_placement(app_n, p, flow_id):
    """As in the store's catalog benchmark: 2 rules, every fifth placement an experiment."""
    placement = app_n * PLACEMENTS_PER_APP + p
    out = (
        '{"key":"placement.%d","default_flow_id":"%s","rules":[{"audience":{"country":{"$in":["US","CA","GB"]},"app.version":{"$vgte":"2.1.0"}},"flow_id":"%s"},{"audience":{"email":{"$regex":"@example\\\\.(org|com)$"}},"flow_id":"%s"}'
        % (p, flow_id(0), flow_id(1), flow_id(2))
    )
    if p % 5 == 0:
        out += (
            ',{"audience":{},"experiment":{"id":"%s","name":"test %d","status":"running","coverage":0.9,"variants":[{"id":"%s","name":"control","weight":1,"flow_id":null},{"id":"%s","name":"new","weight":1,"flow_id":"%s"}]}}'
            % (uuid(5, placement), placement, uuid(6, placement * 3), uuid(6, placement * 3 + 1), flow_id(3))
        )
    return out + "]}"


def app_head(app_n):
    vip = json.dumps(["vip-%d" % i for i in range(typical()["vip_members"])])
    return (
        '{"id":"%s","name":"App %d","media_base_url":"https://cdn.example.com/%d/media/","icon_base_url":"https://cdn.example.com/%d/icons/","saved_groups":{"beta":["u-1","u-2","u-3"],"vip":%s},'
        % (uuid(2, app_n), app_n, app_n, app_n, vip)
    )


def catalog():
    workspaces = []
    app_n = 0
    for w in range(WORKSPACES):
        apps = []
        for _ in range(APPS_PER_WORKSPACE):
            flows = ",".join(flow(app_n, f, VERSIONS_PER_FLOW) for f in range(FLOWS_PER_APP))

            def flow_id(k, p=0, a=app_n):
                return uuid(3, a * FLOWS_PER_APP + (p + k) % FLOWS_PER_APP)

            placements = [typical_placement(app_n, flow_id)]
            if STICKY:
                placements.append(typical_placement(app_n, flow_id, sticky=True))
            for p in range(1, PLACEMENTS_PER_APP):
                placements.append(small_placement(app_n, p, lambda k, p=p: flow_id(k, p)))
            apps.append(
                app_head(app_n) + '"flows":[%s],"placements":[%s]}' % (flows, ",".join(placements))
            )
            app_n += 1
        workspaces.append(
            '{"id":"%s","name":"Workspace %d","apps":[%s]}' % (uuid(1, w), w, ",".join(apps))
        )
    return '{"workspaces":[%s]}' % ",".join(workspaces)


def change():
    """Workspace 0, app 0, only flow 9, now publishing version 1 instead of 2."""
    return '{"workspaces":[{"id":"%s","name":"Workspace 0","apps":[%s"flows":[%s],"placements":[]}]}]}' % (
        uuid(1, 0),
        app_head(0),
        flow(0, PROBE_PLACEMENT % FLOWS_PER_APP, 1),
    )


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    text = catalog()
    with open(os.path.join(out, "catalog.json"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "change.json"), "w") as f:
        f.write(change())
    probe_flow = PROBE_PLACEMENT % FLOWS_PER_APP
    meta = {
        "catalog_bytes": len(text.encode()),
        "workspace": uuid(1, 0),
        "apps": [uuid(2, a) for a in range(APPS_PER_WORKSPACE)],
        "placement_keys": ["onboarding"] + ["placement.%d" % p for p in range(1, PLACEMENTS_PER_APP)],
        "event_flow": uuid(3, 0),
        "event_flow_version": uuid(4, 0),
        "probe_placement": "placement.%d" % PROBE_PLACEMENT,
        "probe_before": uuid(4, probe_flow * VERSIONS_PER_FLOW + 1),
        "probe_after": uuid(4, probe_flow * VERSIONS_PER_FLOW),
    }
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print("catalog: %.1f MB" % (len(text) / 1e6))


if __name__ == "__main__":
    main()
