# tests/proxy/adaptive_upstream.py PORT - the upstream of
# tests/test_proxy_adaptive.sh: answers every request after a delay that
# GET /__delay/MS sets (5 ms at start: steady enough that its median
# is not noise), so the test decides how healthy the
# upstream looks to the proxy's adaptive controller.  GET /__capacity/N
# lets at most N requests be served at once, the rest waiting in turn
# (0: no limit): with a delay, a capacity of N / delay a second, past
# which a queue builds as in a saturated service.  GET /__arrived: how
# many requests have arrived so far (counted before they wait).
import http.server, sys, threading, time
delay = 0.005
workers = None
arrived = 0
count_lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        global delay, workers, arrived
        if self.path == "/__arrived":
            body = b"%d\n" % arrived
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if not self.path.startswith("/__"):
            with count_lock:
                arrived += 1
        if self.path.startswith("/__delay/"):
            delay = int(self.path[len("/__delay/"):]) / 1000.0
        elif self.path.startswith("/__capacity/"):
            n = int(self.path[len("/__capacity/"):])
            workers = threading.Semaphore(n) if n > 0 else None
        elif workers is not None:
            with workers:
                time.sleep(delay)
        elif delay:
            time.sleep(delay)
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")
    def log_message(self, *args):
        pass
class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
Server(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
