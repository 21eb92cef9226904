# tests/sh/harness.py - what the Python halves of the Redis shell tests
# (tests/test_serve_redis.sh, tests/test_proxy_redis.sh) share: PASS and
# FAIL lines, free loopback ports, a real redis-server that can be
# paused, killed and started again on the same port, sluice daemons on
# ports they pick, and concurrent storms of requests.

import os, re, shutil, signal, socket, subprocess, sys, threading, time
from concurrent.futures import ThreadPoolExecutor

failed = 0
procs = []  # everything started, killed by the test's finally


def ok(name):
    print("PASS", name, flush=True)


def bad(name, why):
    global failed
    failed = 1
    print("FAIL", name + ":", why, flush=True)


def check(name, cond, why=""):
    ok(name) if cond else bad(name, why)


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


class Redis:
    """redis-server on a free loopback port (and unix_socket, if given),
    without persistence; start() again after a kill reuses the port."""

    def __init__(self, unix_socket=None):
        self.port = free_port()
        self.unix_socket = unix_socket
        self.proc = None

    def start(self):
        if shutil.which("redis-server") is None:
            print("FAIL redis-server is not installed (scripts/deps.sh installs it)")
            sys.exit(1)
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no"]
        if self.unix_socket:
            argv += ["--unixsocket", self.unix_socket]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        procs.append(self.proc)
        wait_port(self.port)

    def kill(self):
        self.proc.kill()
        self.proc.wait()


def kill_all():
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


def wait_until(pred, secs=8):
    """Polls pred every 50 ms: True as soon as it holds, False after secs."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def storm(one, n, workers=24):
    """one(i) for i in range(n), `workers` at a time; the results in order."""
    with ThreadPoolExecutor(workers) as ex:
        return list(ex.map(one, range(n)))


class Daemon:
    """`sluice ARGV... --listen 127.0.0.1:0`, its stderr in LOGDIR/NAME.log
    and its port read from the 'listening on' line it prints."""

    def __init__(self, name, argv, logdir):
        self.name = name
        self.log = os.path.join(logdir, name + ".log")
        self.p = subprocess.Popen(argv + ["--listen", "127.0.0.1:0"],
                                  stderr=open(self.log, "w"))
        procs.append(self.p)
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

    def stop(self):
        """SIGTERM; the exit status, or None if it did not exit in 15 s."""
        self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(15)
        except subprocess.TimeoutExpired:
            return None


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
