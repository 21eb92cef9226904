# tests/proxy/adaptive_load.py PORT PATH RATE STOP [THREADS] - steady
# load for tests/test_proxy_adaptive*.sh: RATE requests a second of GET
# PATH over keep-alive connections (THREADS threads, 16 by default, each on
# its own schedule) until the file STOP exists.  Answers (200, 429...)
# are counted, not judged.
import http.client, os, sys, threading, time
port, path, rate, stop = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4]
THREADS = int(sys.argv[5]) if len(sys.argv) > 5 else 16
def run(k):
    conn = None
    t = time.monotonic() + k / rate
    while not os.path.exists(stop):
        now = time.monotonic()
        if t > now:
            time.sleep(t - now)
        t += THREADS / rate
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", path)
            conn.getresponse().read()
        except Exception:
            conn = None
for k in range(THREADS):
    threading.Thread(target=run, args=(k,), daemon=True).start()
while not os.path.exists(stop):
    time.sleep(0.1)
