"""Waits until a local cluster is ready (deploy/cluster/up): the balancer
answers GET /v1/health, every host's server in HAProxy's placement backend
is UP or drained by its agent, and the object store answers. Exit 0, or 1
naming what is not ready after 30 s.

    python3 ready.py HAPROXY_SOCKET HOSTS BALANCER_URL S3_URL
"""
import csv
import socket
import sys
import time
import urllib.error
import urllib.request


def servers(sock_path):
    """{(backend, server): (status, weight)} from HAProxy's admin socket."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2)
    s.connect(sock_path)
    s.sendall(b"show stat\n")
    s.shutdown(socket.SHUT_WR)
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    s.close()
    rows = csv.DictReader(out.decode().lstrip("# ").splitlines())
    return {(r["pxname"], r["svname"]): (r["status"], r["weight"]) for r in rows
            if r["svname"] not in ("FRONTEND", "BACKEND")}


def answers(url):
    try:
        urllib.request.urlopen(url, timeout=1).close()
        return True
    except urllib.error.HTTPError:
        return True  # s3rver answers 403 to an anonymous listing: it is up
    except OSError:
        return False


def main():
    sock_path, hosts, balancer, s3 = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    deadline = time.monotonic() + 30
    why = "nothing checked yet"
    while time.monotonic() < deadline:
        try:
            st = servers(sock_path)
            placed = [v for (b, _), v in st.items() if b == "place"]
            ready = [v for v in placed if v[0] == "UP" or v[0].startswith("DRAIN")]
            if len(placed) != hosts or len(ready) != hosts:
                why = f"haproxy's placement backend: {sorted(placed)}"
            elif not answers(balancer + "/v1/health"):
                why = f"{balancer}/v1/health does not answer"
            elif not answers(s3 + "/"):
                why = f"the object store at {s3} does not answer"
            else:
                return 0
        except OSError as e:
            why = f"haproxy's socket {sock_path}: {e}"
        time.sleep(0.1)
    print(f"cluster up: not ready after 30 s: {why}", file=sys.stderr)
    return 1


if __name__ == "__main__":  # tests/cluster/cluster.py imports servers()
    sys.exit(main())
