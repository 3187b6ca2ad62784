#!/usr/bin/python3
"""What HAProxy in front of deskgate costs per request (docs/scale-out.md,
docs/benchmarks.md): a local cluster of two hosts (deploy/cluster/up), one
xterm session, and the same requests sent directly to its host and through
the balancer, taking turns request by request so both see the same load:

  placement  GET /v1/health, which names no session: HAProxy's placement
             backend (leastconn over agent-check weights)
  pinned     GET /v1/sessions/{id}: routed by the host in the id
  websocket  a move action and its screenshot over the agent WebSocket,
             through the balancer's tunnel (timeout tunnel)

HTTP requests reuse one kept-alive connection per path. Prints p50, p90
and p99 in ms of each path and of the pairs' differences.

Usage (as root, after a build into build/):
    /usr/bin/python3 tests/bench/cluster.py [--http N] [--ws N] [DESKGATE_BINARY]
"""
import argparse
import asyncio
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse

import websockets

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def row(name, direct, balanced):
    diffs = [b - d for d, b in zip(direct, balanced)]
    f = lambda xs: " ".join(f"{pct(xs, p) * 1000:7.3f}" for p in (50, 90, 99))
    print(f"{name:10} n={len(direct):5}  direct p50/p90/p99 {f(direct)} ms   "
          f"haproxy {f(balanced)} ms   added {f(diffs)} ms", flush=True)
    return {"n": len(direct), "direct_p50_ms": pct(direct, 50) * 1000,
            "direct_p99_ms": pct(direct, 99) * 1000, "haproxy_p50_ms": pct(balanced, 50) * 1000,
            "haproxy_p99_ms": pct(balanced, 99) * 1000, "added_p50_ms": pct(diffs, 50) * 1000,
            "added_p99_ms": pct(diffs, 99) * 1000}


def timed_get(conn, path, token):
    t = time.perf_counter()
    conn.request("GET", path, headers={"Authorization": "Bearer " + token} if token else {})
    r = conn.getresponse()
    r.read()
    dt = time.perf_counter() - t
    if r.status != 200:
        raise RuntimeError(f"GET {path}: {r.status}")
    return dt


async def ws_two(url_direct, url_bal, token, n):
    """Round trips on two sessions, one reached directly and one through
    the balancer, alternating message by message."""
    a = await websockets.connect(url_direct[0], subprotocols=["deskgate.v1", "bearer." + url_direct[1]],
                                 max_size=None)
    b = await websockets.connect(url_bal[0], subprotocols=["deskgate.v1", "bearer." + url_bal[1]],
                                 max_size=None)
    await a.recv()
    await b.recv()
    out = ([], [])
    for i in range(n):
        for which, ws in enumerate((a, b)):
            t = time.perf_counter()
            await ws.send(json.dumps({"type": "move", "x": 10 + i % 500, "y": 30}))
            res = json.loads(await ws.recv())
            await ws.recv()
            out[which].append(time.perf_counter() - t)
            if res.get("ok") is not True:
                raise RuntimeError(f"action: {res}")
            # Stay under limits.actions_per_second (50) on each connection.
            await asyncio.sleep(0.02)
    await a.close()
    await b.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", type=int, default=2000)
    ap.add_argument("--ws", type=int, default=300)
    ap.add_argument("bin", nargs="?", default=os.path.join(ROOT, "build", "deskgate"))
    a = ap.parse_args()
    os.environ["DESKGATE"] = os.path.abspath(a.bin)
    work = tempfile.mkdtemp(prefix="dg-bench-cluster-")
    os.chmod(work, 0o755)  # the gateways drop to their own uid
    cdir = os.path.join(work, "cluster")
    subprocess.run([os.path.join(ROOT, "deploy/cluster/up"), "--prefix", f"b{os.getpid() % 100000}-",
                    "2", cdir], check=True)
    try:
        env = {}
        for line in open(os.path.join(cdir, "env")):
            k, _, v = line.rstrip("\n").partition("=")
            env[k] = v.replace("\\ ", " ")
        bal = urllib.parse.urlparse(env["BALANCER_URL"])
        hosts = dict(zip(env["HOST_NAMES"].split(), env["HOST_URLS"].split()))
        tok = env["AGENT_TOKEN"]

        def create(base):
            u = urllib.parse.urlparse(base)
            c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
            c.request("POST", "/v1/sessions", body=json.dumps({"profile": "xterm"}),
                      headers={"Authorization": "Bearer " + tok})
            r = c.getresponse()
            s = json.loads(r.read())
            c.close()
            if r.status != 201:
                raise RuntimeError(f"create: {r.status} {s}")
            return s
        s1 = create(env["BALANCER_URL"])
        s2 = create(env["BALANCER_URL"])
        direct_u = urllib.parse.urlparse(hosts[s1["host"]])
        d = http.client.HTTPConnection(direct_u.hostname, direct_u.port, timeout=30)
        b = http.client.HTTPConnection(bal.hostname, bal.port, timeout=30)
        for _ in range(50):  # warm both
            timed_get(d, "/v1/health", None)
            timed_get(b, "/v1/health", None)
        res = {}
        dt, bt = [], []
        for _ in range(a.http):
            dt.append(timed_get(d, "/v1/health", None))
            bt.append(timed_get(b, "/v1/health", None))
        res["placement"] = row("placement", dt, bt)
        dt, bt = [], []
        path = f"/v1/sessions/{s1['id']}"
        for _ in range(a.http):
            dt.append(timed_get(d, path, tok))
            bt.append(timed_get(b, path, tok))
        res["pinned"] = row("pinned", dt, bt)
        # The session reached directly uses its host's own address.
        ws_direct = hosts[s1["host"]].replace("http", "ws") + f"/v1/sessions/{s1['id']}/ws"
        dws, bws = asyncio.run(ws_two((ws_direct, s1["session_token"]),
                                      (s2["ws_url"], s2["session_token"]), tok, a.ws))
        res["websocket"] = row("websocket", dws, bws)
        print(json.dumps({"cluster": res, "load": os.getloadavg()[0]}))
    finally:
        subprocess.run([os.path.join(ROOT, "deploy/cluster/down"), cdir], check=False)
        subprocess.run(["rm", "-rf", work], check=False)


if __name__ == "__main__":
    sys.exit(main())
