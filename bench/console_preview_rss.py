#!/usr/bin/env python3
"""The memory of console catalog previews (issue 49, docs/benchmarks.md).

    python3 bench/console_preview_rss.py          # BENCH_BIN, default target/release/flowgate

Starts `flowgate serve` on a fresh SQLite file with an admin token, writes a catalog file just
under the preview's 8 MiB upload limit (the load benchmark's generated catalog, cut to whole
workspaces), signs in to the console, then sends BENCH_PREVIEWS (default 12) previews of it at
once. Reports the server's resident memory before, its peak (VmHWM) after, how long the
previews took, their statuses, and the slowest `/readyz` answer meanwhile. Standard library
only.
"""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

BIN = os.environ.get("BENCH_BIN", "target/release/flowgate")
PREVIEWS = int(os.environ.get("BENCH_PREVIEWS", "12"))
LIMIT = 8 * 1024 * 1024
TOKEN = "bench-admin-Token-0123456789-abcdefghijkl"
HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def catalog_file(tmp):
    subprocess.run([sys.executable, os.path.join(HERE, "gen_catalog.py"), tmp], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(tmp, "catalog.json")) as f:
        catalog = json.load(f)
    # Whole apps, workspace by workspace, while the file stays under the limit.
    kept, apps, size = [], 0, 0
    for ws in catalog["workspaces"]:
        taken = dict(ws, apps=[])
        for app in ws["apps"]:
            grown = len(json.dumps(app)) + 2
            if size + grown > LIMIT - 256 * 1024:
                break
            taken["apps"].append(app)
            size += grown
            apps += 1
        if taken["apps"]:
            kept.append(taken)
        if len(taken["apps"]) < len(ws["apps"]):
            break
    text = json.dumps(dict(catalog, workspaces=kept)).encode()
    return text, apps


class Client:
    """A console client: cookies kept, one connection per request."""

    def __init__(self, port):
        self.port, self.cookies = port, {}

    def request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        headers = dict(headers or {})
        if self.cookies:
            headers["Cookie"] = "; ".join("%s=%s" % kv for kv in self.cookies.items())
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        for value in r.headers.get_all("Set-Cookie") or []:
            name, _, rest = value.partition("=")
            self.cookies[name.strip()] = rest.split(";")[0]
        conn.close()
        return r.status, data.decode("utf-8", "replace")


def csrf(page):
    m = re.search(r'name="csrf" value="([^"]+)"', page)
    return m.group(1) if m else None


def multipart(fields, file_name, file_bytes):
    boundary = "----flowgate-bench-boundary"
    parts = []
    for name, value in fields.items():
        parts.append(("--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n"
                      % (boundary, name, value)).encode())
    parts.append(("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n"
                  "Content-Type: application/json\r\n\r\n" % (boundary, file_name)).encode())
    parts.append(file_bytes + b"\r\n")
    parts.append(("--%s--\r\n" % boundary).encode())
    return b"".join(parts), "multipart/form-data; boundary=" + boundary


def main():
    tmp = tempfile.mkdtemp(prefix="flowgate-preview-rss-")
    db = os.path.join(tmp, "flowgate.db")
    api, admin = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWGATE")}
    env.update({
        "FLOWGATE__DATABASE__URL": "sqlite://" + db,
        "FLOWGATE__SERVER__LISTEN": "127.0.0.1:%d" % api,
        "FLOWGATE__ADMIN__LISTEN": "127.0.0.1:%d" % admin,
        "FLOWGATE__ADMIN__TOKEN": TOKEN,
        "FLOWGATE__LOG__LEVEL": "warn",
        "FLOWGATE__CATALOG__CACHE_PATH": db + ".cache.json",
    })
    text, apps = catalog_file(tmp)
    server = subprocess.Popen([BIN, "serve"], env=env, stdout=subprocess.DEVNULL)
    try:
        c = Client(admin)
        for _ in range(300):
            try:
                if c.request("GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        status, page = c.request("GET", "/console/sign-in")
        form = "csrf=%s&token=%s" % (csrf(page), TOKEN)
        status, _ = c.request("POST", "/console/sign-in", body=form.encode(),
                              headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert status in (302, 303), "sign-in: %d" % status
        _, page = c.request("GET", "/console/preview")
        body, ctype = multipart({"csrf": csrf(page)}, "catalog.json", text)
        before = rss_kb(server.pid, "VmRSS")
        statuses, worst = [], [0.0]
        done = threading.Event()

        def preview():
            statuses.append(c.request("POST", "/console/preview", body=body,
                                      headers={"Content-Type": ctype})[0])

        def readyz():
            probe = Client(admin)
            while not done.is_set():
                t = time.monotonic()
                probe.request("GET", "/readyz")
                worst[0] = max(worst[0], time.monotonic() - t)
                time.sleep(0.1)

        watcher = threading.Thread(target=readyz)
        watcher.start()
        t = time.monotonic()
        threads = [threading.Thread(target=preview) for _ in range(PREVIEWS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        took = time.monotonic() - t
        done.set()
        watcher.join()
        peak = rss_kb(server.pid, "VmHWM")
        print("flowgate %s; a %.1f MiB catalog (%d apps); %d previews at once" % (
            BIN, len(text) / 2 ** 20, apps, PREVIEWS))
        print("statuses %s in %.1f s; RSS before %.0f MiB, peak %.0f MiB; slowest /readyz %.0f ms"
              % (sorted(set(statuses)), took, before / 1024, peak / 1024, worst[0] * 1000))
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
