"""tests/sh/harness.py - what the Python halves of the Redis shell tests
(tests/test_proxy_redis.sh, tests/test_serve_redis.sh,
tests/test_serve_redis_cluster.sh) share: PASS and FAIL lines, free
loopback ports, a real redis-server that can be paused, killed and started
again on the same port, sluice daemons on ports they pick (`sluice serve`
nodes with their HTTP calls), concurrent storms and loads of requests, and
the killing of everything a test started.  (It lives in tests/sh/ so that
CTest does not take it for a test.)"""

import json, os, re, shutil, signal, socket, subprocess, sys, threading, time
import urllib.error, urllib.request
from concurrent.futures import ThreadPoolExecutor

failed = 0
procs = []  # everything started, killed by the test's finally (kill_all)


# ---- PASS and FAIL ----

def ok(name):
    print("PASS", name, flush=True)


def bad(name, why):
    global failed
    failed = 1
    print("FAIL", name + ":", why, flush=True)


def check(name, cond, why=""):
    ok(name) if cond else bad(name, why)


def check_bound(label, secs, bound):
    """Checks that none of the times secs (seconds) is past bound."""
    worst = max(secs)
    check("%s: no request waits past timeout + margin (worst %.0f ms)" % (label, worst * 1000),
          worst <= bound, "worst %.3f s > %.3f s" % (worst, bound))


# ---- processes and ports ----

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port):
    """Waits up to 5 s for a server on a loopback port; exits if none."""
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            return
        except OSError:
            time.sleep(0.025)
    raise SystemExit("nothing listens on port %d" % port)


def start(argv, log, **kw):
    """Popen(argv) with stderr to log, killed by kill_all()."""
    p = subprocess.Popen(argv, stderr=open(log, "w"), **kw)
    procs.append(p)
    return p


def kill_all():
    """Kills everything the test started (its finally)."""
    for p in procs:
        try:
            p.kill()
        except Exception:
            pass
    for p in procs:
        try:
            p.wait(5)
        except Exception:
            pass


def rss_kb(pid, field="VmRSS"):
    """A process's resident memory (VmRSS), or another field of its
    /proc status (VmData: what it has allocated, touched or not), in kB."""
    return int(re.search(field + r":\s+(\d+)", open("/proc/%d/status" % pid).read()).group(1))


def unread_resp_clients(port, n=50, rounds=3):
    """n connections to a Redis-protocol port (receive buffers of 4 KiB)
    that each send rounds x 30,000 `COMMAND`s (9 bytes in, 842 out) over
    rounds / 2 s and read nothing: what replies nobody reads cost.  The
    open sockets, for the caller to close."""
    socks = []
    for _ in range(n):
        c = socket.create_connection(("127.0.0.1", port), 5)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.setblocking(False)
        socks.append(c)
    for _ in range(rounds):
        for c in socks:
            try:
                c.send(b"COMMAND\r\n" * 30000)
            except BlockingIOError:
                pass
        time.sleep(0.5)
    return socks


def wait_until(pred, secs=8):
    """Polls pred every 50 ms: True as soon as it holds, False after secs."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


class Redis:
    """redis-server on a free loopback port (and unix_socket, if given),
    without persistence, with the extra arguments given; start() again
    after a kill reuses the port."""

    def __init__(self, unix_socket=None, extra=()):
        self.port = free_port()
        self.unix_socket = unix_socket
        self.extra = list(extra)
        self.proc = None
        self.started = False

    def start(self):
        """A server that exits at once most likely lost its port to a
        test running beside this one, between free_port() and its bind:
        on its first start, it is started again on a new port."""
        if shutil.which("redis-server") is None:
            print("FAIL redis-server is not installed (scripts/deps.sh --test installs it)")
            sys.exit(1)
        for _ in range(3):
            argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no"]
            if self.unix_socket:
                argv += ["--unixsocket", self.unix_socket]
            self.proc = subprocess.Popen(argv + self.extra, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
            procs.append(self.proc)
            for _ in range(200):
                if self.proc.poll() is not None:
                    break
                try:
                    socket.create_connection(("127.0.0.1", self.port), 0.1).close()
                except OSError:
                    time.sleep(0.025)
                    continue
                # What answered may be the other test's server, ours about
                # to exit for want of the port: ours must live on.
                time.sleep(0.05)
                if self.proc.poll() is None:
                    self.started = True
                    return
            if self.proc.poll() is None or self.started:
                break
            self.port = free_port()
        raise SystemExit("redis-server did not start on port %d" % self.port)

    def kill(self):
        self.proc.kill()
        self.proc.wait()


# ---- load ----

def storm(one, n, workers=24):
    """one(i) for i in range(n), `workers` at a time; the results in order."""
    with ThreadPoolExecutor(workers) as ex:
        return list(ex.map(one, range(n)))


class Load:
    """`threads` threads calling one(i) -> (label, status, seconds) in a
    loop until stop(); then `worst` is the longest time seen and
    `statuses` the set of (label, status) pairs."""

    def __init__(self, one, threads=12):
        self.worst = 0.0
        self.statuses = set()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(one,))
                         for _ in range(threads)]
        for t in self._threads:
            t.start()

    def _run(self, one):
        i = 0
        while not self._stop.is_set():
            label, status, secs = one(i)
            with self._lock:
                self.worst = max(self.worst, secs)
                self.statuses.add((label, status))
            i += 1

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(15)

    def check(self, bound, may_refuse):
        """Stops, then checks that no call took longer than bound seconds
        and that every status was a decision: 200 or 429, or also 503
        (fail_closed) for the labels in may_refuse."""
        self.stop()
        check("under load: no request waited past the bound (worst %.0f ms)"
              % (self.worst * 1000), self.worst <= bound, self.worst)
        check("under load: only policy answers",
              all(s in ((200, 429, 503) if n in may_refuse else (200, 429))
                  for n, s in self.statuses), sorted(self.statuses))


# ---- sluice daemons ----

def metric(text, name):
    """The value of the sample `name` in a Prometheus text, or None."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


class Daemon:
    """`sluice ARGV... --listen 127.0.0.1:0`, its stderr in LOGDIR/NAME.log
    and its port read from the 'listening on' line it prints."""

    def __init__(self, name, argv, logdir):
        self.name = name
        self.log = os.path.join(logdir, name + ".log")
        self.p = start(argv + ["--listen", "127.0.0.1:0"], self.log)
        self.port = None
        for _ in range(200):
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", open(self.log).read())
            if m:
                self.port = int(m.group(1))
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.025)
        raise SystemExit("%s did not start: %s" % (name, open(self.log).read()))

    def door_port(self, name):
        """The port of its door NAME ("metrics"), from the line it prints."""
        for _ in range(200):
            m = re.search(r"%s listening on 127\.0\.0\.1:(\d+)" % name, open(self.log).read())
            if m:
                return int(m.group(1))
            time.sleep(0.025)
        raise SystemExit("%s: no %s listener: %s" % (self.name, name, open(self.log).read()))

    def stop(self):
        """SIGTERM; the exit status, or None if it did not exit in 15 s."""
        self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(15)
        except subprocess.TimeoutExpired:
            return None


def check_exit(daemons):
    """SIGTERM to each daemon in turn: it drains and exits 0 (sanitizer
    builds: no leak reports)."""
    for d in daemons:
        rc = d.stop()
        check("%s exits 0 on SIGTERM" % d.name, rc == 0,
              "status %s; log: %s" % (rc, open(d.log).read()[-2000:]))


# ---- sluice serve ----

ALGS = ["token_bucket", "gcra", "leaky_bucket", "fixed_window",
        "sliding_log", "sliding_window", "stepped_window"]


def rules_file(tmp, limit, extra=""):
    """TMP/rules.yaml, domain "test": per algorithm a rule of `limit`
    requests per hour keyed by the algorithm's name, then extra rules."""
    path = tmp + "/rules.yaml"
    with open(path, "w") as f:
        f.write("domain: test\ndescriptors:\n")
        for a in ALGS:
            f.write("  - key: %s\n    rate_limit: {algorithm: %s, unit: hour, "
                    "requests_per_unit: %d}\n" % (a, a, limit))
        f.write(extra)
    return path


class Node(Daemon):
    """`sluice serve --rules RULES FLAGS... --listen 127.0.0.1:0`, logging
    to TMP/NAME.log; requests are on domain "test"."""

    def __init__(self, sluice, tmp, name, rules, *flags):
        # Its metrics on a listener of their own (docs/server.md, "Metrics").
        super().__init__(name, [sluice, "serve", "--rules", rules] + list(flags) +
                         ["--metrics-listen", "127.0.0.1:0"], tmp)
        self.metrics_port = self.door_port("metrics")

    def url(self, path):
        # /metrics and the status page are on the metrics listener.
        private = path in ("/metrics", "/status", "/status.json")
        port = self.metrics_port if private else self.port
        return "http://127.0.0.1:%d%s" % (port, path)

    def post(self, descriptors, hits=None):
        """POST /v1/check: (status, body dict, headers, seconds)."""
        body = {"domain": "test", "descriptors": descriptors}
        if hits is not None:
            body["hits"] = hits
        req = urllib.request.Request(self.url("/v1/check"), json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                status, data, hdrs = r.status, r.read(), r.headers
        except urllib.error.HTTPError as e:
            status, data, hdrs = e.code, e.read(), e.headers
        return status, json.loads(data or b"{}"), hdrs, time.monotonic() - t0

    def check(self, key, value, hits=None):
        """POST /v1/check of one descriptor key=value (see post)."""
        return self.post([{"entries": [{"key": key, "value": value}]}], hits)

    def get(self, path):
        """GET path: (status, body text)."""
        try:
            with urllib.request.urlopen(self.url(path), timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def metric(self, name):
        return metric(self.get("/metrics")[1], name)

    def store_status(self):
        return json.loads(self.get("/readyz")[1]).get("store_status")

    def wait_status(self, want, secs=8):
        """True as soon as /readyz says store_status want, False after secs."""
        return wait_until(lambda: self.store_status() == want, secs)
