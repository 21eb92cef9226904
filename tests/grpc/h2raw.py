"""tests/grpc/h2raw.py - a raw HTTP/2 client for the framing cases of
tests/test_serve_grpc.sh that a gRPC library will not produce: a message
split over many DATA frames, streams reset while they wait, streams beyond
the server's limit, a new stream after a GOAWAY notice, other content
types, garbage.  Frames are built and parsed one by one (Debian's
python3-hyperframe and python3-hpack, which python3-h2 brings); nothing
is sent that the test does not ask for, but SETTINGS acknowledgements
and (unless auto_ping is off) PING answers.

Also the few protobuf helpers the raw cases need: RateLimitRequest and
HealthCheckRequest bytes, and a generic decoder of a message's fields."""

import socket
import time

import hpack
from hyperframe.frame import (ContinuationFrame, DataFrame, Frame,
                              GoAwayFrame, HeadersFrame, PingFrame,
                              RstStreamFrame, SettingsFrame,
                              WindowUpdateFrame)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
RLS = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
HEALTH = "/grpc.health.v1.Health/Check"


# ---- protobuf, by hand ----

def varint(n):
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def field(num, wt, payload):
    """One field: payload is an int for wire type 0, bytes otherwise."""
    tag = varint(num << 3 | wt)
    if wt == 0:
        return tag + varint(payload)
    if wt == 2:
        return tag + varint(len(payload)) + payload
    return tag + payload  # 1 and 5: fixed 8 or 4 bytes


def rls_request(domain, descriptors, hits=0):
    """RateLimitRequest: descriptors as lists of (key, value)."""
    msg = field(1, 2, domain.encode())
    for entries in descriptors:
        d = b"".join(field(1, 2, field(1, 2, k.encode()) + field(2, 2, v.encode()))
                     for k, v in entries)
        msg += field(2, 2, d)
    if hits:
        msg += field(3, 0, hits)
    return msg


def health_request(service=""):
    return field(1, 2, service.encode()) if service else b""


def grpc_frame(msg, flag=0):
    return bytes([flag]) + len(msg).to_bytes(4, "big") + msg


def read_varint(msg, i):
    """The varint at msg[i]: (value, index after it)."""
    v = shift = 0
    while True:
        b = msg[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, i


def decode(msg):
    """A message's fields: {number: [int or bytes, ...]}."""
    out, i = {}, 0
    while i < len(msg):
        tag, i = read_varint(msg, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = read_varint(msg, i)
        else:
            n = {1: 8, 5: 4}.get(wt)
            if n is None:
                n, i = read_varint(msg, i)
            v = msg[i:i + n]
            i += n
        out.setdefault(num, []).append(v)
    return out


# ---- HTTP/2 ----

class Stream:
    def __init__(self):
        self.headers = None   # the first HEADERS' fields, a dict
        self.trailers = None  # a second HEADERS' fields
        self.data = b""
        self.ended = False    # END_STREAM came
        self.reset = None     # RST_STREAM's error code

    def done(self):
        return self.ended or self.reset is not None

    def grpc_status(self):
        """grpc-status from the trailers, or a trailers-only answer."""
        for h in (self.trailers, self.headers):
            if h and "grpc-status" in h:
                return int(h["grpc-status"])
        return None

    def message(self):
        """The answer's message, without its 5-byte prefix."""
        return self.data[5:] if len(self.data) >= 5 else None


class Conn:
    def __init__(self, port, auto_ping=True, preface=True):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.enc = hpack.Encoder()
        self.dec = hpack.Decoder()
        self.next_id = 1
        self.buf = b""
        self.streams = {}
        self.goaways = []     # (last stream id, error code)
        self.pings = []       # PINGs the server sent (not ACKs)
        self.settings = {}    # the server's last SETTINGS
        self.closed = False   # the server closed the connection
        self.auto_ping = auto_ping
        self._hblock = None   # (stream, bytes) of a HEADERS awaiting CONTINUATION
        if preface:
            self.send(PREFACE + SettingsFrame(0).serialize())

    def send(self, data):
        self.sock.sendall(data)

    def send_quiet(self, data):
        """send() of what the client owes the server (acks, window
        updates): a server that closed meanwhile is not an error here."""
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            self.closed = True

    def headers(self, path, ctype="application/grpc", method="POST",
                extra=(), end=False):
        sid = self.next_id
        self.next_id += 2
        fields = [(":method", method), (":scheme", "http"), (":path", path),
                  (":authority", "sluice"), ("te", "trailers")]
        if ctype is not None:
            fields.append(("content-type", ctype))
        f = HeadersFrame(sid, self.enc.encode(fields + list(extra)))
        f.flags.add("END_HEADERS")
        if end:
            f.flags.add("END_STREAM")
        self.streams[sid] = Stream()
        self.send(f.serialize())
        return sid

    def data(self, sid, payload, end=False):
        f = DataFrame(sid, payload)
        if end:
            f.flags.add("END_STREAM")
        self.send(f.serialize())

    def rst(self, sid, code=8):  # CANCEL
        self.send(RstStreamFrame(sid, error_code=code).serialize())

    def call(self, path, msg, split=None, extra=(), flag=0):
        """A unary call: its message framed, in DATA frames of `split`
        bytes (one frame if None).  The stream id."""
        sid = self.headers(path, extra=extra)
        body = grpc_frame(msg, flag)
        step = split or len(body)
        for i in range(0, len(body), step):
            self.data(sid, body[i:i + step], end=i + step >= len(body))
        return sid

    def _frame(self, f):
        if isinstance(f, SettingsFrame):
            if "ACK" not in f.flags:
                self.settings = dict(f.settings)
                self.send(SettingsFrame(0, flags=["ACK"]).serialize())
        elif isinstance(f, PingFrame):
            if "ACK" not in f.flags:
                self.pings.append(f.opaque_data)
                if self.auto_ping:
                    self.send(PingFrame(0, f.opaque_data, flags=["ACK"]).serialize())
        elif isinstance(f, GoAwayFrame):
            self.goaways.append((f.last_stream_id, f.error_code))
        elif isinstance(f, (HeadersFrame, ContinuationFrame)):
            block = (self._hblock[1] if self._hblock else b"") + f.data
            self._hblock = (f.stream_id, block)
            if isinstance(f, HeadersFrame) and "END_STREAM" in f.flags:
                self.streams.setdefault(f.stream_id, Stream()).ended = True
            if "END_HEADERS" in f.flags:
                fields = {k: v for k, v in self.dec.decode(block, raw=False)}
                self._hblock = None
                st = self.streams.setdefault(f.stream_id, Stream())
                if st.headers is None:
                    st.headers = fields
                else:
                    st.trailers = fields
        elif isinstance(f, DataFrame):
            st = self.streams.setdefault(f.stream_id, Stream())
            st.data += f.data
            if "END_STREAM" in f.flags:
                st.ended = True
            if f.flow_controlled_length:
                n = f.flow_controlled_length
                self.send_quiet(WindowUpdateFrame(0, window_increment=n).serialize())
                if not st.ended:
                    self.send_quiet(WindowUpdateFrame(f.stream_id, window_increment=n).serialize())
        elif isinstance(f, RstStreamFrame):
            self.streams.setdefault(f.stream_id, Stream()).reset = f.error_code

    def pump(self, secs):
        """Reads and handles frames for up to secs seconds."""
        self.sock.settimeout(max(secs, 0.001))
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.closed = True
            return
        self.buf += chunk
        while len(self.buf) >= 9:
            f, length = Frame.parse_frame_header(memoryview(self.buf[:9]))
            if len(self.buf) < 9 + length:
                break
            f.parse_body(memoryview(self.buf[9:9 + length]))
            self.buf = self.buf[9 + length:]
            self._frame(f)

    def wait(self, pred, secs=5):
        """Pumps until pred() holds (True) or secs pass (False)."""
        end = time.monotonic() + secs
        while not pred():
            left = end - time.monotonic()
            if left <= 0 or self.closed:
                return pred()
            self.pump(min(left, 0.2))
        return True

    def result(self, sid, secs=5):
        """The stream once it ended or was reset (None if not in secs)."""
        st = self.streams[sid]
        return st if self.wait(st.done, secs) else None

    def close(self):
        self.sock.close()


def announcing_conns(port, n, streams=100, announced=65536):
    """n connections, each with `streams` calls whose message prefix
    announces `announced` bytes and then sends one: requests that never
    come whole, the cheapest way to ask a server for memory."""
    conns = []
    for _ in range(n):
        c = Conn(port)
        for _ in range(streams):
            sid = c.headers(RLS)
            c.data(sid, b"\x00" + announced.to_bytes(4, "big") + b"x")
        conns.append(c)
    for c in conns:
        c.pump(0.02)
    return conns
