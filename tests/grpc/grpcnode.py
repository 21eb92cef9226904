"""tests/grpc/grpcnode.py - what the Python tests of `sluice serve
--grpc-listen` share (tests/test_serve_grpc.sh, test_serve_ratelimit.sh):
the check that tests/grpc's node_modules are installed, a serve node with
its gRPC port, calls by tests/grpc/client.js and POST /json, and the
descriptors of a RateLimitRequest."""

import json, os, re, subprocess, sys, time
import urllib.error, urllib.request

import harness

GRPC_DIR = os.path.dirname(os.path.abspath(__file__))


def need_node_modules():
    """Exits with a FAIL line when client.js cannot run."""
    if not os.path.isdir(os.path.join(GRPC_DIR, "node_modules", "@grpc", "grpc-js")):
        print("FAIL tests/grpc/node_modules is missing: run scripts/deps.sh --test "
              "(npm ci in tests/grpc)")
        sys.exit(1)


class GNode(harness.Node):
    """sluice serve with --grpc-listen on a port it picks (gport)."""

    def __init__(self, sluice, tmp, name, rules_path, *flags, threads=2):
        super().__init__(sluice, tmp, name, rules_path, "--threads", str(threads),
                         "--grpc-listen", "127.0.0.1:0", *flags)
        self.gport = None
        for _ in range(200):
            m = re.search(r"grpc listening on 127\.0\.0\.1:(\d+)", open(self.log).read())
            if m:
                self.gport = int(m.group(1))
                return
            time.sleep(0.025)
        raise SystemExit("%s: no 'grpc listening on' line" % name)

    def grpc(self, *ops):
        """Runs client.js with ops on one channel: its results."""
        p = subprocess.run(["node", os.path.join(GRPC_DIR, "client.js"),
                            "127.0.0.1:%d" % self.gport, json.dumps(ops)],
                           capture_output=True, text=True, timeout=180)
        if p.returncode != 0:
            raise SystemExit("client.js failed: %s" % p.stderr[-2000:])
        return json.loads(p.stdout)

    def rls(self, descriptors, hits=0, domain="test", **op):
        req = {"domain": domain, "descriptors": descriptors, "hits_addend": hits}
        return self.grpc(dict(op, op="rls", req=req))[0]

    def health(self, service=""):
        return self.grpc({"op": "health", "service": service})[0]

    def json(self, body):
        """POST /json of body: (status, body dict)."""
        req = urllib.request.Request(self.url("/json"), json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")


def d(key, value, hits=None, limit=None):
    """A RateLimitDescriptor of one entry, as client.js takes it."""
    out = {"entries": [{"key": key, "value": value}]}
    if hits is not None:
        out["hits_addend"] = {"value": hits}
    if limit is not None:
        out["limit"] = limit
    return out
