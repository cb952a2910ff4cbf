#!/usr/bin/env python3
"""Checks of the alert rules and the Grafana dashboard (run by deploy/validate.sh, step f).

- deploy/grafana/flowgate-dashboard.json parses, has the `datasource`, `job` and `instance`
  variables, every query goes through `${datasource}` and filters on `$job` and `$instance`,
  and no two panels overlap;
- deploy/prometheus/flowgate-alerts.yml: alert names `Flowgate...` in CamelCase and unique,
  `severity` page or ticket, `summary`, `description` (with a template) and `runbook_url`;
- deploy/prometheus/flowgate-alerts.test.yml tests every alert, each at least once firing and
  once not firing, and names no alert that does not exist;
- every metric name in the rules' and the dashboard's PromQL is one the code exports. The
  names are read from the Rust sources under crates/*/src, so that the check follows the code:
  string literals `"flowgate_..."` (their type from the `metric(out, NAME, KIND, ...)` or
  `histogram(out, NAME, ...)` call, a `# TYPE NAME KIND` line, or the `metric(out, name,
  KIND, ...)` loop that follows a table of names), and the names registered with
  prometheus-client under a `sub_registry_with_prefix` (flowgate_http_...), typed by their
  field. A counter is exported as NAME_total, a histogram as NAME_bucket, _sum and _count; a
  name of unknown type may take any of these forms.

With --promql-out FILE, writes the dashboard's queries (Grafana variables replaced) as
recording rules to FILE, for `promtool check rules` to parse them.

Prints one line per check and exits 1 when any fails. Needs PyYAML only.
"""

import json
import pathlib
import re
import sys

import yaml

DEPLOY = pathlib.Path(__file__).resolve().parent
ROOT = DEPLOY.parent
RULES = DEPLOY / "prometheus" / "flowgate-alerts.yml"
TESTS = DEPLOY / "prometheus" / "flowgate-alerts.test.yml"
DASHBOARD = DEPLOY / "grafana" / "flowgate-dashboard.json"
RUNBOOK = "https://example.invalid/flowgate/docs/operations.md#alerts"
# Series Prometheus itself makes for every target.
BUILTIN = {"up"}
SUFFIXES = {"counter": ["_total"], "gauge": [""], "histogram": ["_bucket", "_sum", "_count"],
            "summary": ["", "_sum", "_count"], "info": ["_info"], "unknown": ["", "_total", "_bucket", "_sum", "_count"]}

results = []


def check(name, ok, detail=""):
    results.append(bool(ok))
    print(f"  {'ok  ' if ok else 'FAIL'} {name}" + (f": {detail}" if detail and not ok else ""))
    return ok


# ---- metric names the code exports ----------------------------------------------------------
def exported_names():
    """{sample name: metric family} of every metric the Rust sources export, and the number of
    families of unknown type."""
    kinds = {}  # family -> kind

    def note(name, kind):
        kind = kind.lower()
        kind = kind if kind in SUFFIXES else "unknown"
        if kinds.get(name, "unknown") == "unknown":
            kinds[name] = kind

    for path in sorted(ROOT.glob("crates/*/src/**/*.rs")):
        text = path.read_text(encoding="utf-8")
        prefixes = set(re.findall(r'sub_registry_with_prefix\(\s*"(\w+)"\s*\)', text))
        for m in re.finditer(r'metric\(\s*\w+,\s*"(flowgate_\w+)",\s*"(\w+)"', text):
            note(m.group(1), m.group(2))
        for m in re.finditer(r'histogram\(\s*\w+,\s*"(flowgate_\w+)"', text):
            note(m.group(1), "histogram")
        for m in re.finditer(r"# TYPE (flowgate_\w+) (\w+)", text):
            note(m.group(1), m.group(2))
        # A table of (name, help, value) tuples fed to `metric(out, name, KIND, ...)` in a loop.
        for m in re.finditer(r'\(\s*"(flowgate_\w+)",\s*"', text):
            loop = re.compile(r'metric\(\s*\w+,\s*[a-z_]\w*,\s*"(\w+)"').search(text, m.end())
            if loop:
                note(m.group(1), loop.group(1))
        # prometheus-client registrations under a prefix, typed by the registered field.
        # Struct fields whose type names a metric type (`events_rejected: Family<_, Counter>`).
        fields = {}
        for field, ty in re.findall(r"^\s*(?:pub(?:\([\w:]+\))?\s+)?(\w+):\s*(.+?),\s*$", text, re.M):
            if re.search(r"\b(Counter|Gauge|Histogram)\b", ty):
                fields.setdefault(field, ty)
        for prefix in prefixes:
            for m in re.finditer(r'\.register\(\s*"(\w+)",.*?\w+\.(\w+)\.clone\(\)', text, re.S):
                ty = fields.get(m.group(2), "")
                kind = next((k for k in ("Histogram", "Counter", "Gauge") if k in ty), "unknown")
                note(f"{prefix}_{m.group(1)}", kind)
            # `register_with_unit(NAME, HELP, Unit::Seconds, field)`: the unit ends the name.
            for m in re.finditer(
                r'\.register_with_unit\(\s*"(\w+)",\s*"[^"]*",\s*Unit::(\w+),\s*\w+\.(\w+)\.clone\(\)',
                text, re.S):
                ty = fields.get(m.group(3), "")
                kind = next((k for k in ("Histogram", "Counter", "Gauge") if k in ty), "unknown")
                note(f"{prefix}_{m.group(1)}_{m.group(2).lower()}", kind)
            for m in re.finditer(r'encode_descriptor\(\s*"(\w+)",.*?MetricType::(\w+)', text, re.S):
                note(f"{prefix}_{m.group(1)}", m.group(2))
        for name in re.findall(r'"(flowgate_[a-z0-9_]*[a-z0-9])"', text):
            if name not in prefixes:
                note(name, "unknown")
    samples = {f"{n}{s}": n for n, k in kinds.items() for s in SUFFIXES[k]}
    return samples, kinds


# ---- PromQL ---------------------------------------------------------------------------------
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
            "bool", "offset", "atan2", "inf", "nan", "Inf", "NaN"}


def metric_names(expr):
    """Metric names an expression selects: identifiers outside strings, label matchers, ranges,
    label lists and function calls; plus plain names in `__name__` matchers."""
    names = set()
    for m in re.finditer(r'__name__\s*=~?\s*"([^"]*)"', expr):
        names |= {n for n in m.group(1).split("|") if re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", n)}
    e = re.sub(r"label_values\((.*),\s*\w+\s*\)\s*$", r"\1", expr.strip(), flags=re.S)
    e = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`', '""', e)
    e = re.sub(r"\$\{?\w+\}?", "", e)          # Grafana variables
    e = re.sub(r"\{[^{}]*\}", "", e)            # label matchers
    e = re.sub(r"\[[^\[\]]*\]", "", e)          # ranges, subqueries
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", " ", e)
    for m in re.finditer(r"(?<![\w.])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?", e):
        if not m.group(2) and m.group(1) not in KEYWORDS:
            names.add(m.group(1))
    return names


def grafana_to_promql(expr):
    """A dashboard query with Grafana's variables replaced, for promtool to parse."""
    e = re.sub(r"\$__(rate_interval|interval|range)\b", "5m", expr)
    return re.sub(r"\$\{?(\w+)\}?", "x", e)


# ---- files ----------------------------------------------------------------------------------
def rules_and_tests():
    print("alert rules (deploy/prometheus)")
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8")) or {}
    alerts = [r for g in rules.get("groups", []) for r in g.get("rules", []) if "alert" in r]
    names = [a["alert"] for a in alerts]
    check(f"{len(alerts)} alerts, names unique", alerts and len(names) == len(set(names)), str(names))
    for a in alerts:
        n = a["alert"]
        ann, lab = a.get("annotations", {}), a.get("labels", {})
        check(f"{n}: CamelCase name Flowgate...", re.fullmatch(r"Flowgate(?:[A-Z][a-z0-9]*)+", n))
        check(f"{n}: severity page or ticket", lab.get("severity") in ("page", "ticket"), str(lab))
        check(f"{n}: summary, description with a template, runbook_url",
              ann.get("summary") and "{{" in ann.get("description", "")
              and ann.get("runbook_url") == RUNBOOK, str(sorted(ann)))
    tests = yaml.safe_load(TESTS.read_text(encoding="utf-8")) or {}
    check("tests load the rule file", tests.get("rule_files") == [RULES.name], str(tests.get("rule_files")))
    firing, quiet = set(), set()
    cases = [c for t in tests.get("tests", []) for c in t.get("alert_rule_test", [])]
    for c in cases:
        (firing if c.get("exp_alerts") else quiet).add(c.get("alertname"))
    unknown = (firing | quiet) - set(names)
    check("tests name only existing alerts", not unknown, str(sorted(unknown)))
    for n in names:
        check(f"{n}: tested firing and not firing", n in firing and n in quiet,
              f"firing {n in firing}, not firing {n in quiet}")
    return [(f"rule {a['alert']}", str(a.get("expr", ""))) for a in alerts]


def dashboard():
    print("Grafana dashboard (deploy/grafana)")
    try:
        d = json.loads(DASHBOARD.read_text(encoding="utf-8"))
        check(f"{DASHBOARD.relative_to(ROOT)} parses", True)
    except (OSError, ValueError) as e:
        check(f"{DASHBOARD.relative_to(ROOT)} parses", False, str(e))
        return [], []
    check("uid, title, schemaVersion 39 or later",
          d.get("uid") and d.get("title") and d.get("schemaVersion", 0) >= 39, str(d.get("schemaVersion")))
    variables = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
    ds = variables.get("datasource", {})
    check("variable datasource: a Prometheus data source",
          ds.get("type") == "datasource" and ds.get("query") == "prometheus", str(ds))
    queries = []
    for name in ("job", "instance"):
        v = variables.get(name, {})
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        check(f"variable {name}: label_values query through ${{datasource}}, multi with All",
              v.get("type") == "query" and v.get("datasource", {}).get("uid") == "${datasource}"
              and str(q).startswith("label_values(") and v.get("multi") and v.get("includeAll"), str(v))
        queries.append((f"variable {name}", str(q)))
    panels = [p for p in d.get("panels", []) for p in [p] + p.get("panels", [])]
    ids = [p.get("id") for p in panels]
    check(f"{len(panels)} panels, ids unique", len(ids) == len(set(ids)), str(ids))
    cells = {}
    for p in panels:
        g = p.get("gridPos", {})
        for x in range(g.get("x", 0), g.get("x", 0) + g.get("w", 0)):
            for y in range(g.get("y", 0), g.get("y", 0) + g.get("h", 0)):
                cells.setdefault((x, y), []).append(p.get("id"))
    overlaps = {tuple(v) for v in cells.values() if len(v) > 1}
    check("panels inside 24 columns, none overlapping",
          not overlaps and all(x < 24 for x, _ in cells), str(sorted(overlaps)))
    promql = []
    for p in panels:
        if p.get("type") == "row":
            continue
        title = p.get("title", p.get("id"))
        targets = p.get("targets", [])
        srcs = [p.get("datasource", {})] + [t.get("datasource", {}) for t in targets]
        check(f"panel {title!r}: queries through ${{datasource}}",
              targets and all(s.get("uid") == "${datasource}" for s in srcs), str(srcs))
        exprs = [t.get("expr", "") for t in targets]
        check(f"panel {title!r}: every query filters on $job and $instance",
              all('job=~"$job"' in e and 'instance=~"$instance"' in e for e in exprs),
              str([e for e in exprs if '"$job"' not in e or '"$instance"' not in e]))
        for t in targets:
            queries.append((f"panel {title!r}", t.get("expr", "")))
            promql.append(grafana_to_promql(t.get("expr", "")))
    return queries, promql


def main(argv):
    out = None
    if len(argv) == 2 and argv[0] == "--promql-out":
        out = pathlib.Path(argv[1])
    elif argv:
        print("usage: observability.py [--promql-out FILE]", file=sys.stderr)
        return 2
    exprs = []
    for section in (rules_and_tests, dashboard):
        try:
            got = section()
            if section is dashboard:
                got, promql = got
                if out:
                    rules = [{"record": f"flowgate_dashboard_query_{i + 1}", "expr": e}
                             for i, e in enumerate(promql)]
                    out.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]},
                                                  sort_keys=False, width=1000))
            exprs += got
        except Exception as e:  # a structure so wrong that a check could not even look
            check(f"{section.__name__}: structure readable", False, repr(e))

    print("metric names (from crates/*/src)")
    samples, kinds = exported_names()
    unknown = sorted(n for n, k in kinds.items() if k == "unknown")
    check(f"{len(kinds)} metric families read from the Rust sources", len(kinds) >= 40,
          f"only {len(kinds)}: has the code's metrics module moved?")
    if unknown:
        print(f"  note {len(unknown)} of unknown type (any suffix allowed): {', '.join(unknown)}")
    used = set()
    for origin, expr in exprs:
        names = metric_names(expr)
        used |= names
        bad = sorted(n for n in names if n not in samples and n not in BUILTIN)
        check(f"{origin}: metric names exported by the code", names and not bad,
              f"not exported: {bad}" if bad else "selects no metric")
    print(f"metric and alert checks: {results.count(True)} passed, {results.count(False)} failed"
          f" ({len(used)} metric names used, {len(samples)} exported)")
    return 1 if False in results else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
