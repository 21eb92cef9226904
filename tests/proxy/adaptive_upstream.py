# tests/proxy/adaptive_upstream.py PORT [LOG] - the upstream of
# tests/test_proxy_adaptive*.sh: answers every request after a delay that
# GET /__delay/MS sets (5 ms at start: steady enough that its median
# is not noise), so the test decides how healthy the
# upstream looks to the proxy's adaptive controller.  GET /__capacity/N
# lets at most N requests be served at once, the rest waiting in turn
# (0: no limit): with a delay, a capacity of N / delay a second, past
# which a queue builds as in a saturated service.  GET /__queue/N: with
# a capacity, at most N wait, and the rest are answered 503 at once (0:
# no bound).  GET /__arrived: how many requests have arrived so far
# (counted before they wait).  With LOG, each request served or shed
# appends a line to it: its arrival (monotonic seconds), status and time
# in ms.
import http.server, sys, threading, time
delay = 0.005
workers = None
queue_cap = 0
waiting = 0
arrived = 0
lock = threading.Lock()
log = open(sys.argv[2], "a", buffering=1) if len(sys.argv) > 2 else None
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        global delay, workers, queue_cap, waiting, arrived
        start, status = time.monotonic(), 200
        control = self.path.startswith("/__")
        if self.path == "/__arrived":
            body = b"%d\n" % arrived
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if not control:
            with lock:
                arrived += 1
        if self.path.startswith("/__delay/"):
            delay = int(self.path[len("/__delay/"):]) / 1000.0
        elif self.path.startswith("/__capacity/"):
            n = int(self.path[len("/__capacity/"):])
            workers = threading.Semaphore(n) if n > 0 else None
        elif self.path.startswith("/__queue/"):
            queue_cap = int(self.path[len("/__queue/"):])
        elif workers is not None:
            w = workers
            if not w.acquire(blocking=False):
                with lock:
                    full = queue_cap > 0 and waiting >= queue_cap
                    if not full:
                        waiting += 1
                if full:
                    status = 503
                else:
                    w.acquire()
                    with lock:
                        waiting -= 1
            if status == 200:
                time.sleep(delay)
                w.release()
        elif delay:
            time.sleep(delay)
        if log is not None and not control:
            with lock:
                log.write("%.6f %d %.3f\n" % (start, status, (time.monotonic() - start) * 1000))
        self.send_response(status)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")
    def log_message(self, *args):
        pass
class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
Server(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
