#!/usr/bin/env python3
"""Structural checks of deploy/ that no schema expresses (run by deploy/validate.sh).

Every YAML file must parse (duplicate keys are errors); configuration variables must be D14
keys with valid values; the Kubernetes manifests (the base deploy/k8s and the JetStream overlay
deploy/k8s-jetstream), the compose file, the Dockerfile and the systemd unit must agree with
the binary's facts: admin port 9090 serves /healthz and /readyz, the public port is 8080
(`serve` only: `ingest` has the admin port alone), `serve`, `ingest` and `migrate` are the
commands, the database URL comes from the Secret `flowgate-database` key `url`, every
termination budget exceeds the HTTP shutdown plus `events.drain_deadline_ms`, and with
events.sink = jetstream every process uses the same bus settings, with as many stream replicas
as NATS nodes.

Prints one line per check and exits 1 when any fails. Needs PyYAML only.
"""

import pathlib
import re
import sys

import yaml

DEPLOY = pathlib.Path(__file__).resolve().parent
ROOT = DEPLOY.parent

# D14's stable keys, the sink's tuning keys documented in docs/operations.md, the event bus's
# keys (D16), and (below) every key of config/default.toml.
KNOWN_KEYS = {
    "server.listen", "admin.listen",
    "database.url", "database.auto_migrate",
    "auth.key_environment",
    "catalog.refresh_interval_ms", "resolve.cache_ttl_seconds",
    "rate_limit.per_key_rps", "rate_limit.per_key_burst",
    "rate_limit.per_ip_rps", "rate_limit.per_ip_burst", "rate_limit.trusted_proxies",
    "events.queue_capacity", "events.batch_size", "events.flush_interval_ms",
    "events.drain_deadline_ms", "events.record_resolve_no_flow",
    "events.writers", "events.write_timeout_ms", "events.retry_base_ms", "events.retry_max_ms",
    "log.format", "log.level",
    "events.sink", "events.ack", "events.ack_timeout_ms",
    "events.jetstream.url", "events.jetstream.stream", "events.jetstream.subject",
    "events.jetstream.replicas", "events.jetstream.consumer", "events.jetstream.max_deliveries",
    "events.jetstream.ack_wait_ms", "events.jetstream.connect_timeout_ms",
}

def _default_toml_keys():
    """Every key of config/default.toml (the binary's defaults) as `section.key`, or
    `section.table.key` in nested tables (`events.jetstream.url`), when it exists."""
    path = ROOT / "config" / "default.toml"
    try:
        import tomllib  # Python 3.11+
    except ImportError:
        return set()
    if not path.is_file():
        return set()
    with open(path, "rb") as f:
        data = tomllib.load(f)

    def keys(prefix, table):
        for k, v in table.items():
            if isinstance(v, dict):
                yield from keys(f"{prefix}{k}.", v)
            elif prefix:
                yield f"{prefix}{k}"

    return set(keys("", data))


KNOWN_KEYS |= _default_toml_keys()
ENVIRONMENTS = {"development", "staging", "production"}
# log.level's levels (crates/flowgate/src/config.rs LOG_LEVELS), alone or as target=level.
LOG_LEVELS = {"trace", "debug", "info", "warn", "error", "off"}
# Tables whose keys the operator chooses: a currency code, in any case (config.rs OPERATOR_KEYED).
OPERATOR_KEYED = {"experiments.exchange_rates"}
# The sink's built-in default (crates/flowgate-analytics/src/config.rs), used where a file
# does not set the deadline itself: the conservative choice.
DEFAULT_DRAIN_MS = 20_000
# Allowance for the HTTP listeners to finish in-flight requests before and beside the drain.
HTTP_SHUTDOWN_S = 5
ADMIN_PORT = 9090
PUBLIC_PORT = 8080
# Shortest grace for `flowgate ingest`: it finishes the batch it holds (seconds), and a kill
# loses nothing (unacknowledged messages are delivered again).
INGEST_GRACE_S = 30
NATS_URL = re.compile(r"(nats|tls)://([A-Za-z0-9.-]+):(\d+)")

results = []


def check(name, ok, detail=""):
    results.append(bool(ok))
    print(f"  {'ok  ' if ok else 'FAIL'} {name}" + (f": {detail}" if detail and not ok else ""))
    return ok


class UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys (PyYAML keeps the last silently)."""


def _construct_mapping(loader, node, deep=False):
    loader.flatten_mapping(node)  # resolve `<<` merges first: overriding merged keys is fine
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep)


UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_all(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.load_all(f, Loader=UniqueKeyLoader) if d is not None]


def check_env(origin, env):
    """Variables of one environment block: names are D14 keys, values are valid."""
    bad = []
    for name, value in env.items():
        value = "" if value is None else str(value)
        if name == "FLOWGATE_ENV":
            if value not in ENVIRONMENTS:
                bad.append(f"FLOWGATE_ENV={value}")
            continue
        if not name.startswith("FLOWGATE"):
            continue
        parts = name.split("__")
        if len(parts) < 3 or parts[0] != "FLOWGATE" or not all(parts[1:]):
            bad.append(f"{name}: not FLOWGATE__SECTION__KEY (or FLOWGATE__SECTION__TABLE__KEY)")
            continue
        key = ".".join(p.lower() for p in parts[1:])
        table, _, code = key.rpartition(".")
        if table in OPERATOR_KEYED:
            if not re.fullmatch(r"[a-z]{3}", code):
                bad.append(f"{name}: {code.upper()} is not a three-letter currency code")
            try:
                rate_ok = float(value) > 0
            except ValueError:
                rate_ok = False
            if not rate_ok:
                bad.append(f"{name}={value}: not a positive rate")
            continue
        if key not in KNOWN_KEYS:
            bad.append(f"{name}: unknown key {key}")
        if key == "log.level":
            directives = [d.strip() for d in value.split(",") if d.strip()]
            if not directives or any(d.rpartition("=")[2].lower() not in LOG_LEVELS
                                     for d in directives):
                bad.append(f"{name}={value}: not a level ({', '.join(sorted(LOG_LEVELS))}) "
                           "or target=level directives")
        if key == "database.sqlite_synchronous" and value not in {"full", "normal"}:
            bad.append(f"{name}={value}: not full or normal")
        if key == "log.format" and value not in {"json", "pretty"}:
            bad.append(f"{name}={value}")
        if key == "auth.key_environment" and value not in {"live", "test"}:
            bad.append(f"{name}={value}")
        if key in {"server.listen", "admin.listen"} and not re.fullmatch(r"[0-9.:\[\]a-f]+:\d+", value):
            bad.append(f"{name}={value}: not HOST:PORT")
        if key.endswith(("_ms", "_rps", "_burst", "_capacity", "_size", "_seconds")) and not value.isdigit():
            bad.append(f"{name}={value}: not an integer")
        if key == "database.url" and not re.match(r"(postgres|postgresql|sqlite)://", value):
            bad.append(f"{name}: not a postgres:// or sqlite:// URL")
        if key == "events.sink" and value not in {"store", "jetstream"}:
            bad.append(f"{name}={value}: not store or jetstream")
        if key == "events.ack" and value not in {"stored", "buffered"}:
            bad.append(f"{name}={value}: not stored or buffered")
        if key == "events.jetstream.replicas" and value not in {"1", "3", "5"}:
            bad.append(f"{name}={value}: not 1, 3 or 5")
        if key in {"events.writers", "events.jetstream.max_deliveries"} and not value.isdigit():
            bad.append(f"{name}={value}: not an integer")
        if key == "events.jetstream.url":
            urls = value.split(",")
            if not value or not all(NATS_URL.fullmatch(u.strip()) for u in urls):
                bad.append(f"{name}={value}: not a comma-separated list of nats://HOST:PORT "
                           "(credentials belong in a Secret)")
        if key in {"events.jetstream.stream", "events.jetstream.consumer"} \
                and not re.fullmatch(r"[A-Za-z0-9_-]+", value):
            bad.append(f"{name}={value}: not a NATS stream or consumer name")
        if key == "events.jetstream.subject" and not re.fullmatch(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*", value):
            bad.append(f"{name}={value}: not a subject without wildcards")
    if env.get("FLOWGATE_ENV") == "production" and str(env.get("FLOWGATE__AUTH__KEY_ENVIRONMENT", "live")) != "live":
        bad.append("production with a key environment other than live")
    check(f"{origin}: configuration variables are D14 keys with valid values", not bad, "; ".join(bad))


def drain_seconds(env):
    return int(env.get("FLOWGATE__EVENTS__DRAIN_DEADLINE_MS", DEFAULT_DRAIN_MS)) / 1000


def port_of(listen):
    return int(str(listen).rsplit(":", 1)[1])


def labels_match(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def duration_seconds(text):
    m = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", str(text))
    if not m or not any(m.groups()):
        return None
    return int(m.group(1) or 0) * 60 + int(m.group(2) or 0)


def bus_settings(env):
    """The FLOWGATE__EVENTS__* variables that must be equal in every process of a deployment."""
    return {k: v for k, v in env.items() if k.startswith("FLOWGATE__EVENTS__JETSTREAM__")
            or k == "FLOWGATE__EVENTS__SINK"}


def nats_hosts(env):
    url = env.get("FLOWGATE__EVENTS__JETSTREAM__URL", "nats://127.0.0.1:4222")
    return [m.group(2) for m in (NATS_URL.fullmatch(u.strip()) for u in url.split(",")) if m]


def literal_env(container):
    """A container's `env` entries with a literal value."""
    return {e["name"]: str(e["value"]) for e in container.get("env", []) if "value" in e}


# --------------------------------------------------------------------------------------------
def yaml_files():
    print("YAML")
    docs = {}
    for path in sorted(DEPLOY.rglob("*.y*ml")):
        rel = path.relative_to(ROOT)
        try:
            docs[path.relative_to(DEPLOY).as_posix()] = load_all(path)
            check(f"{rel} parses", True)
        except yaml.YAMLError as e:
            check(f"{rel} parses", False, str(e).replace("\n", " "))
    return docs


def container_checks(origin, c, expect_args):
    sc = c.get("securityContext", {})
    check(f"{origin}: args {expect_args}", c.get("args") == expect_args, str(c.get("args")))
    check(f"{origin}: securityContext non-root, read-only root, no privilege escalation, drop ALL",
          sc.get("runAsNonRoot") is True and sc.get("readOnlyRootFilesystem") is True
          and sc.get("allowPrivilegeEscalation") is False
          and sc.get("capabilities", {}).get("drop") == ["ALL"], str(sc))
    refs = [e for e in c.get("env", []) if e.get("name") == "FLOWGATE__DATABASE__URL"]
    ref = refs[0].get("valueFrom", {}).get("secretKeyRef", {}) if refs else {}
    check(f"{origin}: FLOWGATE__DATABASE__URL from Secret flowgate-database key url",
          ref.get("name") == "flowgate-database" and ref.get("key") == "url", str(ref))
    names = [f.get("configMapRef", {}).get("name") for f in c.get("envFrom", [])]
    check(f"{origin}: environment from ConfigMap flowgate", "flowgate" in names, str(names))
    res = c.get("resources", {})
    check(f"{origin}: resources requested and memory limited",
          "cpu" in res.get("requests", {}) and "memory" in res.get("requests", {})
          and "memory" in res.get("limits", {}), str(res))
    if literal_env(c):
        check_env(f"{origin} env", literal_env(c))


def kubernetes(docs):
    """The base (deploy/k8s). Returns what the overlay's checks compare with."""
    print("Kubernetes (deploy/k8s)")
    by_kind = {}
    for name, ds in docs.items():
        if not name.startswith("k8s/") or name == "k8s/kustomization.yaml":
            continue
        for d in ds:
            meta = d.get("metadata", {})
            check(f"{name}: apiVersion, kind, metadata.name",
                  d.get("apiVersion") and d.get("kind") and meta.get("name"))
            by_kind.setdefault(d.get("kind"), []).append((name, d))

    def one(kind):
        found = by_kind.get(kind, [])
        check(f"exactly one {kind}", len(found) == 1, f"{len(found)} found")
        return found[0][1] if found else {}

    cm, dep, svc, hpa, pdb, job, secret = (one(k) for k in (
        "ConfigMap", "Deployment", "Service", "HorizontalPodAutoscaler",
        "PodDisruptionBudget", "Job", "Secret"))
    env = {k: str(v) for k, v in cm.get("data", {}).items()}
    check_env("k8s/configmap.yaml", env)
    check("configmap: named flowgate", cm.get("metadata", {}).get("name") == "flowgate")
    check("configmap: production with live keys",
          env.get("FLOWGATE_ENV") == "production" and env.get("FLOWGATE__AUTH__KEY_ENVIRONMENT") == "live")
    check("configmap: PostgreSQL replicas do not migrate (database.auto_migrate false)",
          env.get("FLOWGATE__DATABASE__AUTO_MIGRATE") == "false")
    check("configmap: no database URL (it is a Secret)", "FLOWGATE__DATABASE__URL" not in env)
    admin = port_of(env.get("FLOWGATE__ADMIN__LISTEN", f"0.0.0.0:{ADMIN_PORT}"))
    public = port_of(env.get("FLOWGATE__SERVER__LISTEN", f"0.0.0.0:{PUBLIC_PORT}"))
    check("configmap: listeners bind every interface",
          env.get("FLOWGATE__SERVER__LISTEN", "").startswith("0.0.0.0:")
          and env.get("FLOWGATE__ADMIN__LISTEN", "").startswith("0.0.0.0:"))

    spec = dep.get("spec", {})
    tmpl = spec.get("template", {})
    pod = tmpl.get("spec", {})
    labels = tmpl.get("metadata", {}).get("labels", {})
    check("deployment: replicas 3", spec.get("replicas") == 3, str(spec.get("replicas")))
    check("deployment: selector matches the pod labels",
          labels_match(spec.get("selector", {}).get("matchLabels"), labels))
    containers = pod.get("containers", [])
    check("deployment: one container", len(containers) == 1)
    c = containers[0] if containers else {}
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    check("deployment: ports http=server.listen, admin=admin.listen",
          ports.get("http") == public and ports.get("admin") == admin, str(ports))

    def probe(kind, path):
        p = c.get(kind, {}).get("httpGet", {})
        port = ports.get(p.get("port"), p.get("port"))
        check(f"deployment: {kind} GET {path} on the admin port {admin}",
              p.get("path") == path and port == admin, str(p))

    probe("readinessProbe", "/readyz")
    probe("livenessProbe", "/healthz")
    container_checks("deployment", c, ["serve"])
    psc = pod.get("securityContext", {})
    check("deployment: pod runs as non-root uid", psc.get("runAsNonRoot") is True
          and isinstance(psc.get("runAsUser"), int) and psc.get("runAsUser") > 0, str(psc))
    grace = pod.get("terminationGracePeriodSeconds", 30)
    pre = c.get("lifecycle", {}).get("preStop", {})
    pre_s = pre.get("sleep", {}).get("seconds", 0)
    check("deployment: terminationGracePeriodSeconds 30", grace == 30, str(grace))
    check("deployment: preStop sleep action (no sleep binary in distroless)", pre_s > 0, str(pre))
    budget = pre_s + HTTP_SHUTDOWN_S + drain_seconds(env)
    check(f"deployment: grace {grace} s > preStop {pre_s} s + HTTP {HTTP_SHUTDOWN_S} s + drain "
          f"{drain_seconds(env):g} s", grace > budget, f"budget {budget:g} s")
    check("deployment: /tmp is a writable emptyDir (read-only root)",
          any(m.get("mountPath") == "/tmp" for m in c.get("volumeMounts", [])))

    ss = svc.get("spec", {})
    check("service: selector matches the pod labels", labels_match(ss.get("selector"), labels))
    for p in ss.get("ports", []):
        tp = p.get("targetPort")
        check(f"service: port {p.get('name')} targets a container port",
              tp in ports or tp in ports.values(), str(tp))
    check("service: the public port is exposed",
          any(p.get("targetPort") in ("http", public) for p in ss.get("ports", [])))

    hs = hpa.get("spec", {})
    ref = hs.get("scaleTargetRef", {})
    check("hpa: autoscaling/v2 on the Deployment",
          hpa.get("apiVersion") == "autoscaling/v2" and ref.get("kind") == "Deployment"
          and ref.get("name") == dep.get("metadata", {}).get("name"), str(ref))
    check("hpa: scales on CPU", any(m.get("resource", {}).get("name") == "cpu"
                                    for m in hs.get("metrics", [])))
    check("hpa: minReplicas <= replicas <= maxReplicas",
          hs.get("minReplicas", 1) <= spec.get("replicas", 1) <= hs.get("maxReplicas", 0))

    ps = pdb.get("spec", {})
    check("pdb: selector matches the pod labels",
          labels_match(ps.get("selector", {}).get("matchLabels"), labels))
    check("pdb: exactly one of minAvailable, maxUnavailable",
          ("minAvailable" in ps) != ("maxUnavailable" in ps))
    if "minAvailable" in ps and isinstance(ps["minAvailable"], int):
        check("pdb: minAvailable below minReplicas (else drains block)",
              ps["minAvailable"] < hs.get("minReplicas", 1))

    jpod = job.get("spec", {}).get("template", {}).get("spec", {})
    jc = (jpod.get("containers") or [{}])[0]
    check("migrate job: restartPolicy Never or OnFailure",
          jpod.get("restartPolicy") in ("Never", "OnFailure"))
    container_checks("migrate job", jc, ["migrate"])
    check("migrate job: same image as the Deployment", jc.get("image") == c.get("image"))

    check("secret.example: Secret flowgate-database with key url",
          secret.get("metadata", {}).get("name") == "flowgate-database"
          and "url" in {**secret.get("stringData", {}), **secret.get("data", {})})
    url = secret.get("stringData", {}).get("url", "")
    check("secret.example: a placeholder PostgreSQL URL with sslmode=require",
          url.startswith("postgres") and "sslmode=require" in url and "CHANGE_ME" in url, url)

    kust = (docs.get("k8s/kustomization.yaml") or [{}])[0]
    res = kust.get("resources", [])
    missing = [r for r in res if not (DEPLOY / "k8s" / r).is_file()]
    check("kustomization: every resource exists", not missing, str(missing))
    expected = {"configmap.yaml", "deployment.yaml", "service.yaml", "hpa.yaml", "pdb.yaml"}
    check("kustomization: lists the server's manifests, not the Secret template or the Job",
          set(res) == expected, str(sorted(res)))
    names = {i.get("name") for i in kust.get("images", [])}
    check("kustomization: images override the container image",
          c.get("image", "").split(":")[0] in names, str(names))
    return {"env": env, "image": c.get("image"), "labels": labels,
            "selectors": {"deployment": spec.get("selector", {}).get("matchLabels"),
                          "service": ss.get("selector"),
                          "pdb": ps.get("selector", {}).get("matchLabels")}}


def strategic_merge(base, patch):
    """Maps merged key by key (what kustomize does to a ConfigMap's metadata and data)."""
    out = dict(base)
    for k, v in patch.items():
        out[k] = strategic_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def kubernetes_jetstream(docs, base):
    """The overlay deploy/k8s-jetstream: the base with events.sink = jetstream, plus ingest."""
    print("Kubernetes (deploy/k8s-jetstream)")
    prefix = "k8s-jetstream/"
    kust = (docs.get(prefix + "kustomization.yaml") or [{}])[0]
    res = kust.get("resources", [])
    here = DEPLOY / "k8s-jetstream"
    check("kustomization: the base ../k8s is a resource",
          any((here / r).resolve() == DEPLOY / "k8s" for r in res), str(res))
    missing = [r for r in res if not (here / r).exists()]
    check("kustomization: every resource exists", not missing, str(missing))
    patches = [p.get("path") for p in kust.get("patches", [])]
    missing = [p for p in patches if not p or not (here / p).is_file()]
    check("kustomization: every patch file exists", patches and not missing, str(patches))
    names = {i.get("name") for i in kust.get("images", [])}
    check("kustomization: images override the container image (base and ingest)",
          str(base["image"]).split(":")[0] in names, str(names))

    by_kind = {}
    for r in res:
        if (here / r).is_file():
            for d in docs.get(prefix + r, []):
                check(f"{r}: apiVersion, kind, metadata.name",
                      d.get("apiVersion") and d.get("kind") and d.get("metadata", {}).get("name"))
                by_kind.setdefault(d.get("kind"), []).append(d)
    patch_docs = [d for p in patches if p for d in docs.get(prefix + p, [])]
    cm_patches = [d for d in patch_docs
                  if d.get("kind") == "ConfigMap" and d.get("metadata", {}).get("name") == "flowgate"]
    check("patch: the ConfigMap flowgate", len(cm_patches) == 1 and len(patch_docs) == 1,
          f"{len(patch_docs)} patches, {len(cm_patches)} of ConfigMap flowgate")
    patch = cm_patches[0] if cm_patches else {}
    env = strategic_merge(base["env"], {k: str(v) for k, v in patch.get("data", {}).items()})
    check_env("merged ConfigMap", env)
    check("merged ConfigMap: events.sink jetstream", env.get("FLOWGATE__EVENTS__SINK") == "jetstream")
    hosts = nats_hosts(env)
    check("merged ConfigMap: NATS URL names a cluster address, not loopback",
          hosts and not any(h in ("localhost", "127.0.0.1") for h in hosts), str(hosts))
    check("merged ConfigMap: stream replicas 3 (the 3-node NATS cluster)",
          env.get("FLOWGATE__EVENTS__JETSTREAM__REPLICAS") == "3")
    check("patch: labelled app.kubernetes.io/component=config (applied alone before migrate)",
          patch.get("metadata", {}).get("labels", {}).get("app.kubernetes.io/component") == "config")

    deps = by_kind.get("Deployment", [])
    check("exactly one Deployment (ingest)", len(deps) == 1, f"{len(deps)} found")
    dep = deps[0] if deps else {}
    spec = dep.get("spec", {})
    tmpl = spec.get("template", {})
    pod = tmpl.get("spec", {})
    labels = tmpl.get("metadata", {}).get("labels", {})
    check("ingest: Deployment flowgate-ingest, 2 replicas",
          dep.get("metadata", {}).get("name") == "flowgate-ingest" and spec.get("replicas") == 2,
          f"{dep.get('metadata', {}).get('name')} x {spec.get('replicas')}")
    check("ingest: selector matches the pod labels",
          labels_match(spec.get("selector", {}).get("matchLabels"), labels))
    for what, sel in base["selectors"].items():
        check(f"ingest: the base {what} does not select ingest pods", not labels_match(sel, labels))
    check("ingest: its selector does not select the server's pods",
          not labels_match(spec.get("selector", {}).get("matchLabels"), base["labels"]))
    containers = pod.get("containers", [])
    check("ingest: one container", len(containers) == 1)
    c = containers[0] if containers else {}
    admin = port_of(env.get("FLOWGATE__ADMIN__LISTEN", f"0.0.0.0:{ADMIN_PORT}"))
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    check(f"ingest: the admin port {admin} only (no public API)", ports == {"admin": admin}, str(ports))
    for kind, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        p = c.get(kind, {}).get("httpGet", {})
        check(f"ingest: {kind} GET {path} on the admin port",
              p.get("path") == path and ports.get(p.get("port"), p.get("port")) == admin, str(p))
    container_checks("ingest", c, ["ingest"])
    check("ingest: same image as the server", c.get("image") == base["image"], str(c.get("image")))
    psc = pod.get("securityContext", {})
    check("ingest: pod runs as non-root uid", psc.get("runAsNonRoot") is True
          and isinstance(psc.get("runAsUser"), int) and psc.get("runAsUser") > 0, str(psc))
    grace = pod.get("terminationGracePeriodSeconds", 30)
    check(f"ingest: terminationGracePeriodSeconds >= {INGEST_GRACE_S} (the batch in hand is stored)",
          grace >= INGEST_GRACE_S, str(grace))
    check("ingest: /tmp is a writable emptyDir (read-only root)",
          any(m.get("mountPath") == "/tmp" for m in c.get("volumeMounts", [])))

    pdbs = by_kind.get("PodDisruptionBudget", [])
    check("exactly one PodDisruptionBudget (ingest)", len(pdbs) == 1, f"{len(pdbs)} found")
    ps = (pdbs[0] if pdbs else {}).get("spec", {})
    check("ingest pdb: selector matches the ingest pods",
          labels_match(ps.get("selector", {}).get("matchLabels"), labels))
    check("ingest pdb: exactly one of minAvailable, maxUnavailable",
          ("minAvailable" in ps) != ("maxUnavailable" in ps))
    if isinstance(ps.get("minAvailable"), int):
        check("ingest pdb: minAvailable below replicas (else drains block)",
              ps["minAvailable"] < spec.get("replicas", 1))

    for svc in by_kind.get("Service", []):
        ss = svc.get("spec", {})
        name = svc.get("metadata", {}).get("name")
        check(f"service {name}: selects the ingest pods", labels_match(ss.get("selector"), labels))
        for p in ss.get("ports", []):
            tp = p.get("targetPort")
            check(f"service {name}: port {p.get('name')} targets a container port",
                  tp in ports or tp in ports.values(), str(tp))


def compose(docs):
    print("Compose (deploy/docker-compose.yml)")
    d = (docs.get("docker-compose.yml") or [{}])[0]
    services = d.get("services", {})
    check("services postgres, migrate, flowgate, ingest",
          {"postgres", "migrate", "flowgate", "ingest"} <= set(services))
    pg, mig, fg, ing = (services.get(n, {}) for n in ("postgres", "migrate", "flowgate", "ingest"))
    check("postgres: 16 with a healthcheck and a volume",
          str(pg.get("image", "")).startswith("postgres:16") and "test" in pg.get("healthcheck", {})
          and pg.get("volumes"))
    for n in pg.get("volumes", []):
        vol = str(n).split(":")[0]
        check(f"postgres: volume {vol} declared", vol.startswith(("/", ".")) or vol in d.get("volumes", {}))
    check("migrate: runs `migrate` once after postgres is healthy",
          mig.get("command") == ["migrate"] and str(mig.get("restart")) == "no"
          and mig.get("depends_on", {}).get("postgres", {}).get("condition") == "service_healthy")
    for name, svc, cmd in (("flowgate", fg, "serve"), ("ingest", ing, "ingest")):
        check(f"{name}: runs `{cmd}` after migrate completed successfully",
              svc.get("command") == [cmd]
              and svc.get("depends_on", {}).get("migrate", {}).get("condition")
              == "service_completed_successfully")
    envs = {}
    for name in ("migrate", "flowgate", "ingest"):
        env = envs[name] = {k: str(v) for k, v in services.get(name, {}).get("environment", {}).items()}
        check_env(f"compose {name}", env)
        check(f"compose {name}: staging (accepts the demo's test keys)",
              env.get("FLOWGATE_ENV") == "staging")
        url = env.get("FLOWGATE__DATABASE__URL", "")
        host = re.sub(r"^[a-z]+://([^@]*@)?", "", url).split(":")[0].split("/")[0]
        check(f"compose {name}: database URL names the postgres service", host == "postgres", url)
    env = envs["flowgate"]
    published = {str(p).rsplit(":", 1)[-1] for p in fg.get("ports", [])}
    check("flowgate: publishes 8080 and 9090",
          {str(port_of(env.get("FLOWGATE__SERVER__LISTEN", ":8080"))),
           str(port_of(env.get("FLOWGATE__ADMIN__LISTEN", ":9090")))} <= published, str(published))
    grace = duration_seconds(fg.get("stop_grace_period", "10s"))
    check(f"flowgate: stop_grace_period > HTTP {HTTP_SHUTDOWN_S} s + drain {drain_seconds(env):g} s",
          grace is not None and grace > HTTP_SHUTDOWN_S + drain_seconds(env), str(grace))
    for name, svc in (("flowgate", fg), ("ingest", ing)):
        check(f"{name}: no container healthcheck (distroless has no client)",
              "healthcheck" not in svc or svc["healthcheck"].get("disable") is True)

    # ingest: the admin port alone, on loopback.
    admin = str(port_of(envs["ingest"].get("FLOWGATE__ADMIN__LISTEN", ":9090")))
    ports = [str(p) for p in ing.get("ports", [])]
    check(f"ingest: publishes only its admin port {admin}, on 127.0.0.1",
          ports and all(p.startswith("127.0.0.1:") and p.rsplit(":", 1)[-1] == admin for p in ports),
          str(ports))
    grace = duration_seconds(ing.get("stop_grace_period", "10s"))
    check(f"ingest: stop_grace_period >= {INGEST_GRACE_S} s (the batch in hand is stored)",
          grace is not None and grace >= INGEST_GRACE_S, str(grace))

    # The bus: every process the same settings; a NATS service per URL; replicas = nodes.
    bus = {name: bus_settings(e) for name, e in envs.items()}
    check("migrate, flowgate, ingest: the same FLOWGATE__EVENTS__SINK and JETSTREAM settings",
          bus["migrate"] == bus["flowgate"] == bus["ingest"], str(bus))
    if env.get("FLOWGATE__EVENTS__SINK") != "jetstream":
        check("events.sink jetstream (the compose file runs the event bus)", False,
              env.get("FLOWGATE__EVENTS__SINK", "store (default)"))
        return
    nats = sorted(n for n in services if re.fullmatch(r"nats\d+", n))
    hosts = nats_hosts(env)
    check("NATS URL lists every nats service, at 4222", sorted(hosts) == nats
          and all(u.strip().endswith(":4222") for u in env["FLOWGATE__EVENTS__JETSTREAM__URL"].split(",")),
          f"{hosts} vs {nats}")
    check(f"stream replicas = NATS nodes ({len(nats)})",
          env.get("FLOWGATE__EVENTS__JETSTREAM__REPLICAS") == str(len(nats)) and len(nats) in (3, 5))
    check("migrate: starts once every NATS node is healthy",
          all(mig.get("depends_on", {}).get(n, {}).get("condition") == "service_healthy" for n in nats))
    for n in nats:
        svc = services[n]
        cmd = [str(a) for a in svc.get("command", [])]
        arg = lambda flag: cmd[cmd.index(flag) + 1] if flag in cmd[:-1] else None
        check(f"{n}: nats:2.10-alpine with a healthcheck on the monitoring port's /healthz",
              str(svc.get("image")) == "nats:2.10-alpine"
              and "/healthz" in " ".join(map(str, svc.get("healthcheck", {}).get("test", [])))
              and arg("--http_port") == "8222")
        check(f"{n}: JetStream on, server_name {n}, cluster flowgate",
              "--jetstream" in cmd and arg("--server_name") == n and arg("--cluster_name") == "flowgate")
        routes = sorted(re.findall(r"nats://(\w+):6222", arg("--routes") or ""))
        check(f"{n}: routes to the other nodes", routes == [o for o in nats if o != n], str(routes))
        vols = {str(v).split(":")[0]: str(v).split(":")[1] for v in svc.get("volumes", []) if ":" in str(v)}
        check(f"{n}: store_dir on a named volume",
              arg("--store_dir") in vols.values()
              and all(v in d.get("volumes", {}) for v, m in vols.items() if m == arg("--store_dir")),
              str(vols))


def dockerfile():
    print("Dockerfile (deploy/Dockerfile)")
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    lines = [l.strip() for l in re.sub(r"\\\n", " ", text).splitlines()
             if l.strip() and not l.strip().startswith("#")]
    froms = [l for l in lines if l.upper().startswith("FROM ")]
    check("multi-stage, builder rust:*-bookworm", len(froms) >= 2 and "rust:" in froms[0], str(froms))
    final_idx = lines.index(froms[-1])
    final = lines[final_idx:]
    base = froms[-1].split()[1]
    check("runtime distroless cc nonroot or debian slim",
          "distroless/cc" in base or "bookworm-slim" in base, base)
    check("dependency-caching step (cargo chef cook before copying the sources)",
          any("cargo chef cook" in l for l in lines))
    check("builds -p flowgate in release", any(re.search(r"cargo build --release.*(-p|--package) flowgate", l) for l in lines))
    users = [l.split()[1] for l in final if l.upper().startswith("USER ")]
    check("runtime USER is non-root", users and users[-1].split(":")[0] not in ("root", "0"), str(users))
    check("runtime WORKDIR with config/ beside it",
          any(l.upper().startswith("WORKDIR ") for l in final)
          and any(re.match(r"COPY\s+config/?\s", l) for l in final) and (ROOT / "config").is_dir())
    expose = {p for l in final if l.upper().startswith("EXPOSE ") for p in l.split()[1:]}
    check("EXPOSE 8080 9090", {"8080", "9090"} <= expose, str(expose))
    check('ENTRYPOINT ["flowgate"] and CMD ["serve"]',
          'ENTRYPOINT ["flowgate"]' in final and 'CMD ["serve"]' in final)
    has_hc = any(l.upper().startswith("HEALTHCHECK ") and "NONE" not in l.upper() for l in final)
    check("no HEALTHCHECK in a distroless image (nothing to run it with)",
          not (has_hc and "distroless" in base))
    env_line = " ".join(l for l in final if l.upper().startswith("ENV "))
    check("listeners bind 0.0.0.0 in the container",
          "FLOWGATE__SERVER__LISTEN=0.0.0.0:8080" in env_line
          and "FLOWGATE__ADMIN__LISTEN=0.0.0.0:9090" in env_line)
    ignore = ROOT / ".dockerignore"
    entries = ignore.read_text().split() if ignore.is_file() else []
    check(".dockerignore at the context root leaves out target/ and data/",
          any(e.strip("/") == "target" for e in entries) and any(e.strip("/") == "data" for e in entries))


def systemd():
    print("systemd (deploy/systemd)")
    unit = {}
    for line in (DEPLOY / "systemd" / "flowgate.service").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith(("#", ";")):
            k, v = line.split("=", 1)
            unit.setdefault(k.strip(), []).append(v.strip())
    get = lambda k: (unit.get(k) or [""])[-1]
    env = {}
    for line in (DEPLOY / "systemd" / "env.example").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            env[k] = v
    check_env("systemd/env.example", env)
    check("Type=exec (the binary does not speak sd_notify)", get("Type") == "exec")
    check("User=flowgate, WorkingDirectory=/opt/flowgate (config/ is read from it)",
          get("User") == "flowgate" and get("WorkingDirectory") == "/opt/flowgate")
    check("ExecStart runs `serve`", get("ExecStart") == "/opt/flowgate/flowgate serve")
    check("EnvironmentFile=-/etc/flowgate/env", "-/etc/flowgate/env" in unit.get("EnvironmentFile", []))
    stop = duration_seconds(get("TimeoutStopSec") if not get("TimeoutStopSec").isdigit()
                            else get("TimeoutStopSec") + "s")
    check(f"KillSignal=SIGTERM, TimeoutStopSec {stop} s > HTTP {HTTP_SHUTDOWN_S} s + drain "
          f"{drain_seconds(env):g} s", get("KillSignal") == "SIGTERM" and stop is not None
          and stop > HTTP_SHUTDOWN_S + drain_seconds(env))
    check("Restart=on-failure", get("Restart") == "on-failure")
    check("hardening: NoNewPrivileges, ProtectSystem=strict, PrivateTmp, ReadWritePaths data/",
          get("NoNewPrivileges") == "yes" and get("ProtectSystem") == "strict"
          and get("PrivateTmp") == "yes" and get("ReadWritePaths").lstrip("-") == "/opt/flowgate/data")


def main():
    docs = yaml_files()
    base = None
    for section in (kubernetes, kubernetes_jetstream, compose):
        try:
            if section is kubernetes:
                base = section(docs)
            elif section is kubernetes_jetstream:
                if base is None:
                    check("kubernetes_jetstream: the base is readable", False)
                else:
                    section(docs, base)
            else:
                section(docs)
        except Exception as e:  # a structure so wrong that a check could not even look
            check(f"{section.__name__}: structure readable", False, repr(e))
    dockerfile()
    systemd()
    failed = results.count(False)
    print(f"structural checks: {results.count(True)} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
