# tests/proxy/upstream.py PORT LOG - the upstream of the proxy tests
# (tests/test_proxy.sh, tests/test_proxy_redis.sh): it echoes bodies under
# /files/ (with Content-Length, or chunked under /files/chunked), answers
# "upstream PATH" elsewhere, sleeps on /slow (3 s) and /wait (0.8 s), and
# logs every request it saw to LOG, one line each:
#   TIME METHOD PATH key=X-API-KEY xff=X-FORWARDED-FOR proto=... port=PEER-PORT sha=BODY-SHA256
import hashlib, http.server, sys, time
log = open(sys.argv[2], "a", buffering=1)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def body(self):
        if self.headers.get("Transfer-Encoding") == "chunked":
            out = b""
            while True:
                n = int(self.rfile.readline().strip(), 16)
                if n == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(n)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))
    def handle_one(self):
        body = self.body()
        log.write("%.6f %s %s key=%s xff=%s proto=%s port=%d sha=%s\n" % (
            time.time(), self.command, self.path, self.headers.get("X-Api-Key", "-"),
            (self.headers.get("X-Forwarded-For") or "-").replace(" ", ""),
            self.headers.get("X-Forwarded-Proto", "-"), self.client_address[1],
            hashlib.sha256(body).hexdigest()))
        if self.path.startswith("/slow"):
            time.sleep(3)
        if self.path.startswith("/wait"):
            time.sleep(0.8)
        if self.path.startswith("/files/chunked"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(body), 65536):
                piece = body[i:i + 65536]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
            return
        out = body if self.path.startswith("/files/") else ("upstream %s\n" % self.path).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(out)))
        self.send_header("Connection", "keep-alive, X-Hop")
        self.send_header("X-Hop", "must not pass")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)
    def handle_quietly(self):
        try:
            self.handle_one()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the proxy gave up on /slow (504): expected
    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = handle_quietly
    def log_message(self, *args):
        pass
class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # the default 5 drops connects under a storm
Server(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
