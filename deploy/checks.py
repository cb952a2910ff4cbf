#!/usr/bin/env python3
"""Structural checks of deploy/ that no schema expresses (run by deploy/validate.sh).

Every YAML file must parse (duplicate keys are errors); configuration variables must be D14
keys with valid values; the Kubernetes manifests, the compose file, the Dockerfile and the
systemd unit must agree with the binary's facts: admin port 9090 serves /healthz and /readyz,
the public port is 8080, `serve` and `migrate` are the commands, the database URL comes from
the Secret `flowgate-database` key `url`, and every termination budget exceeds the HTTP
shutdown plus `events.drain_deadline_ms`.

Prints one line per check and exits 1 when any fails. Needs PyYAML only.
"""

import pathlib
import re
import sys

import yaml

DEPLOY = pathlib.Path(__file__).resolve().parent
ROOT = DEPLOY.parent

# D14's stable keys, the sink's tuning keys documented in docs/operations.md, and (below) every
# key of config/default.toml.
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
}

def _default_toml_keys():
    """Every `section.key` of config/default.toml (the binary's defaults), when it exists."""
    path = ROOT / "config" / "default.toml"
    try:
        import tomllib  # Python 3.11+
    except ImportError:
        return set()
    if not path.is_file():
        return set()
    with open(path, "rb") as f:
        data = tomllib.load(f)
    return {f"{s}.{k}" for s, table in data.items() if isinstance(table, dict) for k in table}


KNOWN_KEYS |= _default_toml_keys()
ENVIRONMENTS = {"development", "staging", "production"}
# The sink's built-in default (crates/flowgate-analytics/src/config.rs), used where a file
# does not set the deadline itself: the conservative choice.
DEFAULT_DRAIN_MS = 20_000
# Allowance for the HTTP listeners to finish in-flight requests before and beside the drain.
HTTP_SHUTDOWN_S = 5
ADMIN_PORT = 9090
PUBLIC_PORT = 8080

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
        if len(parts) != 3 or parts[0] != "FLOWGATE":
            bad.append(f"{name}: not FLOWGATE__SECTION__KEY")
            continue
        key = f"{parts[1].lower()}.{parts[2].lower()}"
        if key not in KNOWN_KEYS:
            bad.append(f"{name}: unknown key {key}")
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


# --------------------------------------------------------------------------------------------
def yaml_files():
    print("YAML")
    docs = {}
    for path in sorted(DEPLOY.rglob("*.y*ml")):
        rel = path.relative_to(ROOT)
        try:
            docs[path.name if path.parent.name != "k8s" else f"k8s/{path.name}"] = load_all(path)
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


def kubernetes(docs):
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


def compose(docs):
    print("Compose (deploy/docker-compose.yml)")
    d = (docs.get("docker-compose.yml") or [{}])[0]
    services = d.get("services", {})
    check("services postgres, migrate, flowgate", {"postgres", "migrate", "flowgate"} <= set(services))
    pg, mig, fg = (services.get(n, {}) for n in ("postgres", "migrate", "flowgate"))
    check("postgres: 16 with a healthcheck and a volume",
          str(pg.get("image", "")).startswith("postgres:16") and "test" in pg.get("healthcheck", {})
          and pg.get("volumes"))
    for n in pg.get("volumes", []):
        vol = str(n).split(":")[0]
        check(f"postgres: volume {vol} declared", vol.startswith(("/", ".")) or vol in d.get("volumes", {}))
    check("migrate: runs `migrate` once after postgres is healthy",
          mig.get("command") == ["migrate"] and str(mig.get("restart")) == "no"
          and mig.get("depends_on", {}).get("postgres", {}).get("condition") == "service_healthy")
    check("flowgate: runs `serve` after migrate completed successfully",
          fg.get("command") == ["serve"]
          and fg.get("depends_on", {}).get("migrate", {}).get("condition")
          == "service_completed_successfully")
    for name in ("migrate", "flowgate"):
        env = {k: str(v) for k, v in services.get(name, {}).get("environment", {}).items()}
        check_env(f"compose {name}", env)
        check(f"compose {name}: staging (accepts the demo's test keys)",
              env.get("FLOWGATE_ENV") == "staging")
        url = env.get("FLOWGATE__DATABASE__URL", "")
        host = re.sub(r"^[a-z]+://([^@]*@)?", "", url).split(":")[0].split("/")[0]
        check(f"compose {name}: database URL names the postgres service", host == "postgres", url)
    env = {k: str(v) for k, v in fg.get("environment", {}).items()}
    published = {str(p).rsplit(":", 1)[-1] for p in fg.get("ports", [])}
    check("flowgate: publishes 8080 and 9090",
          {str(port_of(env.get("FLOWGATE__SERVER__LISTEN", ":8080"))),
           str(port_of(env.get("FLOWGATE__ADMIN__LISTEN", ":9090")))} <= published, str(published))
    grace = duration_seconds(fg.get("stop_grace_period", "10s"))
    check(f"flowgate: stop_grace_period > HTTP {HTTP_SHUTDOWN_S} s + drain {drain_seconds(env):g} s",
          grace is not None and grace > HTTP_SHUTDOWN_S + drain_seconds(env), str(grace))
    check("flowgate: no container healthcheck (distroless has no client)",
          "healthcheck" not in fg or fg["healthcheck"].get("disable") is True)


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
    for section in (kubernetes, compose):
        try:
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
