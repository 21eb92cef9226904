# tests/sh/linger.py PORT STATUS HEAD SIZE - a client still sending when
# the server answers: HEAD (with \r\n escapes) and filler bytes up to SIZE
# in all, the first MB of it at once, then a shutdown of its side.  Passes
# (exit 0) when the answer is STATUS, arrives whole (its Content-Length),
# and the connection ends with the server's FIN after it read the rest
# (lingering close), not with a reset that can destroy the answer.
import socket, sys, threading
port, status, size = int(sys.argv[1]), sys.argv[2].encode(), int(sys.argv[4])
head = sys.argv[3].encode().decode("unicode_escape").encode("latin-1")
s = socket.create_connection(("127.0.0.1", port), timeout=10)
got, end = bytearray(), []
def reader():
    try:
        while True:
            d = s.recv(65536)
            if not d:
                end.append("eof")
                return
            got.extend(d)
    except OSError as e:
        end.append(repr(e))
t = threading.Thread(target=reader)
t.start()
first = head + b"x" * ((1 << 20) - len(head))
chunk = b"x" * 65536
try:
    s.sendall(first)
    for _ in range((size - len(first)) // len(chunk)):
        s.sendall(chunk)
    s.shutdown(socket.SHUT_WR)
except OSError as e:
    print("  send stopped: %r" % e)
t.join(10)
answer, _, body = bytes(got).partition(b"\r\n\r\n")
length = [int(l.split(b":")[1]) for l in answer.split(b"\r\n") if l.lower().startswith(b"content-length:")]
ok = answer.startswith(b"HTTP/1.1 " + status) and length == [len(body)] and end == ["eof"]
if not ok:
    print("  head %r, body %d bytes, end %r" % (answer[:60], len(body), end))
sys.exit(0 if ok else 1)
