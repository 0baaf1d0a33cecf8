#!/usr/bin/env python3
"""api-proxy.py: an HTTP proxy between dtagent and dtctld's agents' listener
that hands every answer to the answers' validator (munge-lib.sh).

    api-proxy.py PORTFILE UPSTREAM FIFO

Listens on a free port of 127.0.0.1 (written to PORTFILE once listening),
forwards each request (method, path, body, Authorization, Content-Type) to
UPSTREAM (http://HOST:PORT, the AgentPort) and sends its answer back as
is, and prints "METHOD PATH STATUS" of each on standard output.  Each
answer with a body is also written to a file next to FIFO
(FIFO's directory's answers/) and named on FIFO as "METHOD PATH STATUS
FILE", so that api-validate.py --serve checks it against
schemas/openapi.json.  A test points its agents here with ControllerURL,
so that the answers real agents receive are held to the description too.
"""
import http.client
import http.server
import os
import sys
import tempfile
import threading
import urllib.parse

FORWARD = ("Authorization", "Content-Type", "X-Munge-Credential")


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    portfile, upstream, fifo = argv[1:]
    up = urllib.parse.urlsplit(upstream)
    answers = os.path.join(os.path.dirname(fifo), "answers")
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def relay(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else None
            headers = {h: self.headers[h] for h in FORWARD if self.headers.get(h)}
            conn = http.client.HTTPConnection(up.hostname, up.port, timeout=30)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                r = conn.getresponse()
                data = r.read()
            except OSError:
                self.send_error(502)
                return
            finally:
                conn.close()
            self.send_response(r.status)
            for h in ("Content-Type", "Retry-After"):
                if r.getheader(h):
                    self.send_header(h, r.getheader(h))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            if data:
                fd, path = tempfile.mkstemp(dir=answers)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                line = "%s %s %d %s\n" % (self.command, self.path, r.status, path)
                with lock:
                    print(line.rsplit(" ", 1)[0], flush=True)
                    # Read and write: never blocks, even with no reader.
                    w = os.open(fifo, os.O_RDWR)
                    os.write(w, line.encode())
                    os.close(w)

        do_GET = do_POST = do_PUT = do_DELETE = relay

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(portfile + ".tmp", portfile)
    srv.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
