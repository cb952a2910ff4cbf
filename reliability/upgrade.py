#!/usr/bin/env python3
"""The upgrade test (D26): a rolling upgrade from the previous release to this one, and back,
on one PostgreSQL database and one NATS JetStream stream, as an operator does it.

    python3 reliability/upgrade.py PREVIOUS_BINARY CURRENT_BINARY

(reliability/upgrade.sh builds both.) Steps, with events sent all along through whichever
`serve` processes are up (each event's id kept when its request was answered 202):

1. the previous release migrates, serves (demo workspace, a key) and ingests;
2. the current release migrates the database while the previous one keeps serving: resolve
   200, events 202;
3. the current release serves beside it; the previous ingest stops and the current one
   consumes what the previous serve published; then the current ingest stops and the previous
   one consumes what the current serve published;
4. a dead letter the previous ingest set aside (a bus message whose event PostgreSQL cannot
   hold) is listed and replayed by the current binary;
5. the current release starts from the previous one's catalog cache file while the database is
   unreachable, and resolves;
6. rolled back: the previous release serves alone against the migrated schema;
7. every accepted event is stored exactly once: counted; a person the current release added
   in step 3 (D28) and its audit entry are still listed.

Needs PostgreSQL on 127.0.0.1:5432 (user postgres, trust; FLOWGATE_TEST_PG_URL's server),
psql, and nats-server. Exits non-zero with the step that failed; stops by itself.
"""

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

APP = "d0000000-0000-4000-8000-0000000000a1"
PERSON = "upgrade-editor@example.com"
WORKSPACE = "d0000000-0000-4000-8000-000000000001"
FLOW = "d0000000-0000-4000-8000-0000000000f1"
FLOW_VERSION = "d0000000-0000-4000-8000-0000000000e1"
PG = "postgres://postgres@127.0.0.1:5432"


def log(msg):
    print("upgrade: " + msg, flush=True)


def fail(msg):
    print("upgrade: FAILED: " + msg, file=sys.stderr, flush=True)
    raise SystemExit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def psql(sql, db="postgres"):
    out = subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", db, "-Atqc", sql],
                         capture_output=True, text=True)
    if out.returncode != 0:
        fail("psql %r: %s" % (sql, out.stderr))
    return out.stdout.strip()


def call(port, method, path, body=None, key=None, timeout=10):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


class World:
    """The database, the NATS server and the settings every process shares."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.db = "flowgate_upgrade_" + uuid.uuid4().hex[:12]
        psql("CREATE DATABASE " + self.db)
        self.nats_port = free_port()
        self.nats = subprocess.Popen(
            [shutil.which("nats-server") or "/usr/sbin/nats-server", "-a", "127.0.0.1",
             "-p", str(self.nats_port), "-js", "-sd", os.path.join(tmp, "nats")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs = []
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.nats_port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            fail("nats-server never listened on %d" % self.nats_port)

    def env(self, **extra):
        e = {k: v for k, v in os.environ.items() if not k.startswith("FLOWGATE")}
        e.update({
            "FLOWGATE__DATABASE__URL": "%s/%s" % (PG, self.db),
            "FLOWGATE__EVENTS__SINK": "jetstream",
            "FLOWGATE__EVENTS__JETSTREAM__URL": "nats://127.0.0.1:%d" % self.nats_port,
            "FLOWGATE__EVENTS__JETSTREAM__ACK_WAIT_MS": "2000",
            "FLOWGATE__LOG__LEVEL": "warn",
            "FLOWGATE__RATE_LIMIT__PER_IP_RPS": "100000",
            "FLOWGATE__RATE_LIMIT__PER_IP_BURST": "100000",
            "FLOWGATE__CATALOG__CACHE_PATH": os.path.join(self.tmp, "cache-%s.json" % uuid.uuid4().hex[:6]),
        })
        e.update(extra)
        return e

    def run(self, binary, *args, env=None):
        out = subprocess.run([binary, *args], env=with_config(binary, env or self.env()),
                             capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            fail("%s %s: exit %d: %s" % (os.path.basename(binary), " ".join(args),
                                         out.returncode, out.stderr[-2000:]))
        return out.stdout

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.nats.kill()
        self.nats.wait()
        psql("DROP DATABASE IF EXISTS %s WITH (FORCE)" % self.db)


class Process:
    """A `serve` or `ingest` process with its own listeners."""

    def __init__(self, world, binary, command, env=None, ready=("ready",)):
        self.world, self.binary, self.command = world, binary, command
        self.api, self.admin = free_port(), free_port()
        self.env = world.env(**{
            "FLOWGATE__SERVER__LISTEN": "127.0.0.1:%d" % self.api,
            "FLOWGATE__ADMIN__LISTEN": "127.0.0.1:%d" % self.admin,
        })
        self.env.update(env or {})
        self.env = with_config(binary, self.env)
        self.proc = subprocess.Popen([binary, command], env=self.env, stdout=subprocess.DEVNULL)
        world.procs.append(self.proc)
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                fail("%s %s exited with %s at start" % (binary, command, self.proc.returncode))
            try:
                status, body = call(self.admin, "GET", "/readyz")
                if any(('"status":"%s"' % r) in body.decode() for r in ready):
                    break
            except OSError:
                pass
            if time.time() > deadline:
                fail("%s %s never became %s" % (binary, command, "/".join(ready)))
            time.sleep(0.1)
        self.name = "%s %s" % (os.path.basename(binary), command)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            fail(self.name + " did not stop within 60 s")
        if code != 0:
            fail("%s stopped with exit code %d" % (self.name, code))


def event(event_id):
    return {
        "event_id": event_id, "app_id": APP, "flow_id": FLOW, "flow_version_id": FLOW_VERSION,
        "user_id": "upgrade-user", "session_id": "upgrade-session", "device_platform": "ios",
        "event_type": "screen_view", "screen_index": 1, "sdk_version": "2.0.0",
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


class Load:
    """Events, 5 a request, to the servers in `targets` in turn, until stopped."""

    def __init__(self, key):
        self.key, self.targets = key, []
        self.accepted, self.refused, self.statuses = [], 0, {}
        # What went wrong in the sending thread (a SystemExit there would end only the thread).
        self.error = None
        self.lock = threading.Lock()
        self.running = True
        self.thread = threading.Thread(target=self.loop)
        self.thread.start()

    def aim(self, *servers):
        with self.lock:
            self.targets = [s.api for s in servers]

    def loop(self):
        i = 0
        while self.running:
            with self.lock:
                targets = list(self.targets)
            if not targets:
                time.sleep(0.05)
                continue
            port = targets[i % len(targets)]
            i += 1
            ids = [str(uuid.uuid4()) for _ in range(5)]
            body = json.dumps([event(x) for x in ids]).encode()
            try:
                status, reply = call(port, "POST", "/v1/apps/%s/events" % APP, body, self.key)
            except OSError:
                status, reply = 0, b""
            with self.lock:
                self.statuses[status] = self.statuses.get(status, 0) + 1
                if status == 202:
                    try:
                        answer = json.loads(reply)
                    except ValueError:
                        answer = {}
                    if answer.get("accepted") != 5 and self.error is None:
                        self.error = "a 202 that did not accept all 5 valid events: %r" % reply
                    self.accepted.extend(ids)
                elif status:
                    self.refused += 1
            time.sleep(0.02)

    def count(self):
        with self.lock:
            if self.error:
                fail(self.error)
            return len(self.accepted)

    def accepted_now(self):
        with self.lock:
            return list(self.accepted)

    def stop(self):
        self.running = False
        self.thread.join()
        if self.error:
            fail(self.error)


def resolve_ok(server, key, what):
    body = json.dumps({"user_id": "u-%s" % uuid.uuid4().hex[:6], "session_id": "s",
                       "device_platform": "ios", "attributes": {"country": "US"}}).encode()
    status, reply = call(server.api, "POST", "/v1/apps/%s/placements/paywall/resolve" % APP,
                         body, key)
    if status != 200:
        fail("%s: resolve answered %d: %s" % (what, status, reply[:300]))


def events_flow(load, what, seconds=3):
    before = load.count()
    time.sleep(seconds)
    if load.count() <= before:
        fail("%s: no event accepted in %d s (statuses %s)" % (what, seconds, load.statuses))
    log("%s: %d events accepted so far" % (what, load.count()))


def all_stored(world, load, what, within=60):
    """Waits until every event accepted so far is stored: by the one ingest running now."""
    wanted = set(load.accepted_now())
    deadline = time.time() + within
    while True:
        missing = wanted - set(stored_ids(world))
        if not missing:
            log("%s: all %d accepted events stored" % (what, len(wanted)))
            return
        if time.time() > deadline:
            fail("%s: %d of %d accepted events not stored within %d s" % (
                what, len(missing), len(wanted), within))
        time.sleep(0.5)


def stored_ids(world):
    rows = psql("SELECT event_id::text FROM analytics_events WHERE app_id = '%s'" % APP,
                world.db)
    return rows.split("\n") if rows else []


def publish_raw(port, subject, headers, body):
    """One message on core NATS (the stream captures its subject): no client library needed."""
    s = socket.create_connection(("127.0.0.1", port), 5)
    s.recv(4096)  # INFO
    s.sendall(b'CONNECT {"verbose":false,"headers":true,"protocol":1}\r\n')
    head = "NATS/1.0\r\n" + "".join("%s: %s\r\n" % kv for kv in headers.items()) + "\r\n"
    head = head.encode()
    s.sendall(b"HPUB %s %d %d\r\n" % (subject.encode(), len(head), len(head) + len(body))
              + head + body + b"\r\nPING\r\n")
    reply = b""
    while b"PONG" not in reply and b"-ERR" not in reply:
        reply += s.recv(4096)
    s.close()
    if b"-ERR" in reply:
        fail("publishing to NATS: %s" % reply)


# Each release reads the configuration folder it shipped with, as a deployed one does (its
# image carries it): the previous release's `config/` refuses no key of its own, while this
# checkout's may hold sections the previous release does not know (its keys are refused).
CONFIG_DIRS = {}


def with_config(binary, env):
    env = dict(env)
    if binary in CONFIG_DIRS:
        env["FLOWGATE_CONFIG_DIR"] = CONFIG_DIRS[binary]
    return env


def main():
    if len(sys.argv) != 4:
        fail("usage: upgrade.py PREVIOUS_BINARY PREVIOUS_CONFIG_DIR CURRENT_BINARY")
    old, old_config, new = sys.argv[1], sys.argv[2], sys.argv[3]
    CONFIG_DIRS[old] = old_config
    log("from %s to %s" % (subprocess.run([old, "--version"], capture_output=True,
                                          text=True).stdout.strip(),
                           subprocess.run([new, "--version"], capture_output=True,
                                          text=True).stdout.strip()))
    tmp = tempfile.mkdtemp(prefix="flowgate-upgrade-")
    world = World(tmp)
    load = None
    try:
        # 1. The previous release alone.
        world.run(old, "migrate")
        demo = json.loads(world.run(old, "demo", "--json"))
        key = demo.get("key") or demo.get("sdk_key")
        if not key:
            fail("no key in the demo's answer: %s" % demo)
        serve_old = Process(world, old, "serve")
        deadline = time.time() + 30
        while call(serve_old.api, "POST", "/v1/apps/%s/placements/paywall/resolve" % APP,
                   b'{"user_id":"u","session_id":"s","device_platform":"ios"}', key)[0] != 200:
            if time.time() > deadline:
                fail("the previous release never served the new key")
            time.sleep(0.2)
        ingest_old = Process(world, old, "ingest")
        load = Load(key)
        load.aim(serve_old)
        events_flow(load, "previous release serving")

        # 2. The current release migrates while the previous one serves.
        applied = world.run(new, "migrate")
        log("current release migrated: %s" % (applied.strip().replace("\n", "; ") or "nothing to apply"))
        resolve_ok(serve_old, key, "previous release after the migration")
        events_flow(load, "previous release after the migration")

        # 3. Both serve; each ingest consumes the other's messages.
        serve_new = Process(world, new, "serve")
        load.aim(serve_old, serve_new)
        resolve_ok(serve_new, key, "current release beside the previous")
        events_flow(load, "both releases serving")
        # People and the audit log (D28), written by the current release; read again after
        # the rollback in step 7.
        person = json.loads(world.run(new, "users", "add", PERSON, "--role", "editor", "--json"))
        if person.get("email") != PERSON:
            fail("users add answered %s" % person)
        ingest_old.stop()
        ingest_new = Process(world, new, "ingest")
        events_flow(load, "current ingest consuming both releases' messages")
        all_stored(world, load, "current ingest alone")
        ingest_new.stop()
        load.aim(serve_new)
        ingest_old = Process(world, old, "ingest")
        events_flow(load, "previous ingest consuming the current release's messages")
        all_stored(world, load, "previous ingest alone")

        # 4. A dead letter of the previous release, listed and replayed by the current one.
        # As the bus carries stored events (D16); PostgreSQL's text cannot hold NUL.
        bad = {
            "event_id": str(uuid.uuid4()), "source": "sdk", "event_type": "screen_view",
            "app_id": APP, "flow_id": FLOW, "flow_version_id": FLOW_VERSION,
            "user_id": "nul\u0000user", "session_id": "s", "device_platform": "ios",
            "occurred_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "payload": {"screen_index": 1},
        }
        publish_raw(world.nats_port, "flowgate.events",
                    {"Flowgate-Format": "flowgate.events.v1+json", "Flowgate-Events": "1",
                     "Nats-Msg-Id": uuid.uuid4().hex},
                    json.dumps([bad]).encode())
        deadline = time.time() + 60
        while not json.loads(world.run(old, "events", "dead-letters", "list", "--json")):
            if time.time() > deadline:
                fail("the previous ingest set no dead letter aside")
            time.sleep(0.5)
        written = json.loads(world.run(old, "events", "dead-letters", "list", "--json"))
        listed = json.loads(world.run(new, "events", "dead-letters", "list", "--json"))
        if len(listed) != len(written) or bad["event_id"] not in json.dumps(listed):
            fail("the current release lists %s; the previous one wrote %s" % (listed, written))
        replay = subprocess.run([new, "events", "dead-letters", "replay", "--json"],
                                env=world.env(), capture_output=True, text=True, timeout=120)
        log("current release replayed the previous one's dead letters: exit %d, %s" % (
            replay.returncode, (replay.stdout or replay.stderr).strip()[:300]))
        # Tried (not skipped for its format), refused again by PostgreSQL, and kept.
        tried = json.loads(replay.stdout) if replay.stdout.strip() else {}
        refused_ids = {r.get("id") for r in tried.get("refused", [])}
        kept = json.loads(world.run(new, "events", "dead-letters", "list", "--json"))
        letter_ids = {l.get("id") for l in written}
        if replay.returncode != 1 or not letter_ids <= refused_ids or tried.get("skipped") \
                or bad["event_id"] not in json.dumps(kept):
            fail("the previous release's letter must be replayed, refused again and kept: "
                 "exit %d, %s" % (replay.returncode, replay.stdout[-1000:] or replay.stderr[-1000:]))

        # 5. The current release from the previous one's cache file, the database unreachable.
        cache = serve_old.env["FLOWGATE__CATALOG__CACHE_PATH"]
        if not os.path.exists(cache):
            fail("the previous release wrote no catalog cache file at %s" % cache)
        copy = os.path.join(tmp, "cache-from-previous.json")
        shutil.copy(cache, copy)
        cached = Process(world, new, "serve", env={
            # The same database (the cache file names it), refused: a role it does not have.
            "FLOWGATE__DATABASE__URL": "postgres://flowgate_no_such_role@127.0.0.1:5432/" + world.db,
            "FLOWGATE__DATABASE__CONNECT_TIMEOUT_MS": "500",
            "FLOWGATE__LOG__LEVEL": "off",
            "FLOWGATE__CATALOG__CACHE_PATH": copy,
            "FLOWGATE__EVENTS__SINK": "store",
        }, ready=("ready", "degraded"))
        resolve_ok(cached, key, "current release from the previous release's cache file")
        cached.stop()
        log("current release served from the previous release's catalog cache file")

        # 6. Rolled back: the previous release alone on the migrated schema.
        serve_new.stop()
        serve_old.stop()
        serve_back = Process(world, old, "serve")
        load.aim(serve_back)
        resolve_ok(serve_back, key, "previous release rolled back")
        events_flow(load, "previous release rolled back onto the migrated schema")
        load.stop()
        serve_back.stop()

        # 7. Every accepted event stored exactly once.
        ingest_new = Process(world, new, "ingest")
        accepted = set(load.accepted)
        deadline = time.time() + 120
        while True:
            stored = stored_ids(world)
            missing = accepted - set(stored)
            if not missing:
                break
            if time.time() > deadline:
                fail("%d of %d accepted events never stored (e.g. %s)" % (
                    len(missing), len(accepted), sorted(missing)[:3]))
            time.sleep(1)
        # Counted as stored rows per event id (the key holds app, id and time: an event stored
        # again with another time would be a second row).
        twice = len(stored) - len(set(stored))
        unknown = set(stored) - accepted
        if twice:
            fail("%d events stored twice" % twice)
        log("%d events accepted across the upgrade and the rollback, %d stored, each once; "
            "%d stored that were sent without a 202 answer; statuses %s" % (
                len(accepted), len(set(stored) & accepted), len(unknown), load.statuses))
        ingest_new.stop()
        ingest_old.stop()
        people = json.loads(world.run(new, "users", "list", "--json"))
        audit = json.loads(world.run(new, "audit", "list", "--json"))
        if PERSON not in json.dumps(people) or not any(
                e.get("action") == "person.add" and e.get("target") == PERSON for e in audit):
            fail("after the rollback the current release lists %s and audit %s" % (people, audit))
        log("a person and their audit entry, written by the current release, kept across the "
            "rollback")
        log("passed")
    finally:
        if load and load.running:
            load.running = False
        world.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
