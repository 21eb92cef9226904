# tests/proxy/adaptive_upstream.py PORT - the upstream of
# tests/test_proxy_adaptive.sh: answers every request after a delay that
# GET /__delay/MS sets (5 ms at start: steady enough that its median
# is not noise), so the test decides how healthy the
# upstream looks to the proxy's adaptive controller.
import http.server, sys, time
delay = 0.005
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        global delay
        if self.path.startswith("/__delay/"):
            delay = int(self.path[len("/__delay/"):]) / 1000.0
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
