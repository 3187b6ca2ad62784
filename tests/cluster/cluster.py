"""cluster/haproxy (ctest): three deskgate hosts behind HAProxy, started by
deploy/cluster/up, driven through the balancer only (docs/scale-out.md).

    python3 cluster.py DESKGATE_BINARY WORK_DIR

Host 1 and 2 take sessions, host 3 is drained by its configuration. Host 1
starts with PRELOAD sessions made on it directly, so it has less free
capacity: HAProxy's weights must follow the free slots, and of the 30
sessions made through the balancer host 2 must get at least its share of
the free slots less PLACEMENT_MARGIN, both some, host 3 none. Each is
driven over its WebSocket (one action, its result and screenshot), one is
watched by an observer, 10 are ended: each owner uploads its recording to
the cluster's bucket (s3rver) and removes its local copy, and each is read
through the balancer from the bucket (sealed). Then the other paths the
template routes by id, on both open hosts: a browser session's CDP
(json/version names the balancer, Browser.getVersion answers through its
tunnel), an approval (its id names the host: its frame and its answer
reach it), and MCP (initialize placed, later calls carrying
Mcp-Session-Id reach the host that holds the session). Then host 1 is
killed (SIGKILL): its
WebSockets close, its sessions' requests get 503 naming it, its uploaded
recordings are served by host 2 from the bucket, new sessions land on
host 2, and host 2's WebSockets keep working. Restarted, host 1 seals the
recordings its death left open and uploads them. Everything runs under WORK_DIR (the build directory)
and is stopped by deploy/cluster/down, which stops only what up started.
"""
import asyncio
import importlib.util
import json
import os
import signal
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request

import websockets

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UP = os.path.join(ROOT, "deploy", "cluster", "up")
DOWN = os.path.join(ROOT, "deploy", "cluster", "down")
# deploy/cluster/ready.py reads HAProxy's admin socket: its servers() here too.
# Imported from deploy/: no __pycache__ left in the source tree.
sys.dont_write_bytecode = True
_spec = importlib.util.spec_from_file_location("ready", os.path.join(ROOT, "deploy", "cluster",
                                                                     "ready.py"))
ready = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ready)
SESSIONS = 30
PRELOAD = 10
MAX_SESSIONS = 22
ENDED = 10
# Sessions host 2 may fall short of its share of the 30 by the free slots
# (12 and 22 free: 19.4). leastconn picks an idle server first whatever its
# weight, so host 1 fills up (11-12, host 2 18-19, measured at load 1-6);
# without the agent's weights host 1 fills sooner and refuses the rest
# (12/11 with 7 refused, 12/15 with 3, measured), and with room for all an
# even split (15) is what leastconn alone gives: both fail.
PLACEMENT_MARGIN = 2
# The policy the CDP and approval sessions run under: everything allowed
# but "wait", which asks a human (docs/policy.md).
ASK_POLICY = {"version": 1, "default": "allow",
              "actions": {"allow": [], "ask": ["wait"], "deny": []}}
MCP_PROTOCOL = "2025-11-25"

failures = []


def check(what, ok, detail=""):
    detail = str(detail)
    print(("ok   " if ok else "FAIL ") + what +
          (f": {detail[:600]}{'...' if len(detail) > 600 else ''}" if detail and not ok else ""),
          flush=True)
    if not ok:
        failures.append(what)
    return ok


def read_env(path):
    env = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("=")
            env[k] = v.replace("\\ ", " ")
    return env


def request(method, url, token=None, body=None, timeout=60, headers=None):
    """(status, JSON, text or bytes, the answer's headers) of one request."""
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    req = urllib.request.Request(url, method=method, headers=h,
                                 data=json.dumps(body).encode() if body is not None else None)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw, got = r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        status, raw, got = e.code, e.read(), e.headers
    if raw.startswith(b"\x89PNG"):
        return status, raw, got
    try:
        return status, json.loads(raw), got
    except ValueError:
        return status, raw.decode(errors="replace"), got


def http(method, url, token=None, body=None, timeout=60):
    """(status, JSON or text) of one request."""
    return request(method, url, token, body, timeout)[:2]


def haproxy_weights(sock_path):
    """{server: weight} of HAProxy's placement backend, from its admin socket."""
    return {sv: int(w) for (b, sv), (_, w) in ready.servers(sock_path).items() if b == "place"}


def local_copy(cdir, names, s):
    return os.path.join(cdir, f"c{names.index(s['host']) + 1}", "recordings", s["id"])


async def wait_uploaded(cdir, names, sess, seconds):
    """How many of sess have no local copy left within seconds."""
    deadline = time.monotonic() + seconds
    while True:
        n = sum(not os.path.exists(local_copy(cdir, names, s)) for s in sess)
        if n == len(sess) or time.monotonic() > deadline:
            return n
        await asyncio.sleep(0.2)


def metric(url, token, name):
    """The value of one /metrics line (-1 when absent)."""
    st, body = http("GET", url + "/metrics", token)
    for line in body.splitlines() if st == 200 and isinstance(body, str) else []:
        if line.startswith(name + " "):
            return float(line.split()[1])
    return -1


async def wait_metric(urls, token, name, at_least, seconds=10):
    """The sum of one /metrics line over urls once it reaches at_least (the
    gateway counts an upload when it reaps its transfer child, every 200 ms,
    just after the child removed the local copy), or at the deadline."""
    deadline = time.monotonic() + seconds
    while True:
        total = sum(metric(u, token, name) for u in urls)
        if total >= at_least or time.monotonic() > deadline:
            return total
        await asyncio.sleep(0.2)


def read_from_bucket(B, V, sess, status):
    """How many of sess GET /v1/recordings/{id} through the balancer answers
    with the status, from the bucket (its host has no local copy left)."""
    ok = 0
    for s in sess:
        st, r = http("GET", f"{B}/v1/recordings/{s['id']}", V)
        good = st == 200 and r["verify"]["status"] == status and r.get("from_bucket") is True \
            and not r["live"]
        ok += good
        if not good:
            print(f"  {s['id']}: {st} {str(r)[:300]}", flush=True)
    return ok


async def create(env, n, parallel=6, body=None):
    """n sessions (xterm unless body says) through the balancer, at most
    `parallel` at once."""
    sem = asyncio.Semaphore(parallel)

    async def one():
        async with sem:
            return await asyncio.to_thread(http, "POST", env["BALANCER_URL"] + "/v1/sessions",
                                           env["AGENT_TOKEN"], body or {"profile": "xterm"})
    return await asyncio.gather(*(one() for _ in range(n)))


async def on_both(env, hosts, body, tries=4):
    """Sessions made through the balancer until both hosts have one: two at
    once, then one at a time (an idle server is leastconn's first pick, so
    the next goes to the host that had none). Returns one per host (the
    rest are ended) or what there was."""
    made = [s for st, s in await create(env, 2, body=body) if st == 201]
    while {s["host"] for s in made} != set(hosts) and len(made) < tries:
        made += [s for st, s in await create(env, 1, body=body) if st == 201]
    keep = [next(s for s in made if s["host"] == h) for h in hosts if
            any(s["host"] == h for s in made)]
    for s in made:
        if s not in keep:
            http("DELETE", f"{env['BALANCER_URL']}/v1/sessions/{s['id']}", env["AGENT_TOKEN"])
    return keep, made


async def cdp_through(B, A, s):
    """A browser session's CDP through the balancer: json/version names the
    balancer's tunnel, and a raw CDP command answers through it."""
    host = s["host"]
    st, v, h = request("GET", f"{B}/v1/sessions/{s['id']}/json/version", A)
    url = f"{B.replace('http', 'ws', 1)}/v1/sessions/{s['id']}/cdp"
    if not check(f"GET .../json/version through the balancer reaches {host} and names the "
                 "balancer's CDP URL", st == 200 and h.get("X-Deskgate-Host") == host and
                 isinstance(v, dict) and v.get("webSocketDebuggerUrl") == url, (st, v)):
        return
    answer = {}
    async with websockets.connect(url, extra_headers={"Authorization": "Bearer " + A},
                                  max_size=None, open_timeout=30) as ws:
        await ws.send(json.dumps({"id": 1, "method": "Browser.getVersion"}))
        deadline = time.monotonic() + 30
        while answer.get("id") != 1 and time.monotonic() < deadline:
            answer = json.loads(await asyncio.wait_for(ws.recv(), deadline - time.monotonic()))
    check(f"Browser.getVersion answered through the balancer's CDP tunnel to {host}",
          answer.get("id") == 1 and "Chrome/" in answer.get("result", {}).get("product", ""),
          answer)


async def approval_through(B, V, s):
    """An action the policy asks about: its approval's id names the host, and
    its frame and its answer, sent to the balancer, reach that host."""
    host = s["host"]
    ws = await agent_ws(s)
    await act(ws, 100)  # a screen for the approval to show (its frame)
    await ws.send(json.dumps({"type": "wait", "ms": 10}))
    pending = json.loads(await asyncio.wait_for(ws.recv(), 30))
    aid = pending.get("approval") or ""
    check(f"an asked action on {host} is pending, its approval id naming the host",
          pending.get("type") == "pending" and aid.startswith(host + "-") and
          len(aid) == len(host) + 33, pending)
    st, png, h = request("GET", f"{B}/v1/approvals/{aid}/frame", V)
    check(f"GET /v1/approvals/{{id}}/frame through the balancer reaches {host}",
          st == 200 and h.get("X-Deskgate-Host") == host and isinstance(png, bytes), (st, png))
    st, ans, h = request("POST", f"{B}/v1/approvals/{aid}", V, {"decision": "approve"})
    check(f"POST /v1/approvals/{{id}} through the balancer approves it at {host}",
          st == 200 and h.get("X-Deskgate-Host") == host and isinstance(ans, dict) and
          ans.get("decision") == "approved", (st, ans))
    res = json.loads(await asyncio.wait_for(ws.recv(), 30))
    check(f"the approved action ran on {host}", res.get("type") == "result" and
          res.get("ok") is True and res.get("approved_by") is not None and
          res.get("approved_by") == (ans.get("by") if isinstance(ans, dict) else ""), res)
    await ws.close()


def mcp_post(B, A, msg, sid=None):
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if sid:
        h.update({"Mcp-Session-Id": sid, "MCP-Protocol-Version": MCP_PROTOCOL})
    return request("POST", B + "/mcp", A, msg, headers=h)


def mcp_through(B, A, hosts, tries=4):
    """MCP sessions initialized through the balancer (placement) until both
    hosts hold one; each later request carries Mcp-Session-Id and must reach
    the host that holds it (another host answers 404: it has no such MCP
    session)."""
    sids = []
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": MCP_PROTOCOL, "capabilities": {},
                       "clientInfo": {"name": "cluster-test", "version": "1"}}}
    while {x[:-33] for x in sids} != set(hosts) and len(sids) < tries:
        st, r, h = mcp_post(B, A, init)
        if st == 200 and h.get("Mcp-Session-Id"):
            sids.append(h["Mcp-Session-Id"])
    check("MCP initialize through the balancer placed sessions on both open hosts",
          {x[:-33] for x in sids} == set(hosts), sids)
    for sid in sids:
        host = sid[:-33]
        st, r, h = mcp_post(B, A, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid)
        tools = [t.get("name") for t in r.get("result", {}).get("tools", [])] \
            if isinstance(r, dict) else []
        check(f"a later MCP call carrying Mcp-Session-Id reaches {host}",
              st == 200 and h.get("X-Deskgate-Host") == host and "exec" in tools, (st, r))
        st, _, h = request("DELETE", B + "/mcp", A,
                           headers={"Mcp-Session-Id": sid, "MCP-Protocol-Version": MCP_PROTOCOL})
        gone, _, _ = mcp_post(B, A, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, sid)
        check(f"DELETE /mcp through the balancer ends the MCP session at {host}",
              st < 300 and h.get("X-Deskgate-Host") == host and gone == 404, (st, gone))


async def agent_ws(s):
    ws = await websockets.connect(s["ws_url"], max_size=None, open_timeout=30,
                                  subprotocols=["deskgate.v1", "bearer." + s["session_token"]])
    hello = json.loads(await asyncio.wait_for(ws.recv(), 30))
    assert hello["type"] == "hello" and hello["id"] == s["id"], hello
    return ws


async def act(ws, x):
    """One action: its result, then its screenshot (a PNG)."""
    await ws.send(json.dumps({"type": "move", "x": x, "y": 20}))
    res = json.loads(await asyncio.wait_for(ws.recv(), 30))
    png = await asyncio.wait_for(ws.recv(), 30)
    return res.get("type") == "result" and res.get("ok") is True and \
        isinstance(png, bytes) and png[:8] == b"\x89PNG\r\n\x1a\n"


async def closed_within(ws, seconds):
    """Whether ws closes within seconds (anything received meanwhile is read)."""
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            await asyncio.wait_for(ws.recv(), deadline - time.monotonic())
    except websockets.ConnectionClosed:
        return True
    except asyncio.TimeoutError:
        return False
    return False


async def main(work):
    prefix = f"t{os.getpid() % 100000}-"
    cdir = os.path.join(work, "cluster")
    subprocess.run(["rm", "-rf", cdir], check=True)
    t0 = time.monotonic()
    policy = os.path.join(work, "ask-policy.json")
    with open(policy, "w") as f:
        json.dump(ASK_POLICY, f)
    subprocess.run([UP, "--max-sessions", str(MAX_SESSIONS), "--drain", "3", "--prefix", prefix,
                    "--policy", "ask=" + policy, "3", cdir], check=True)
    try:
        await scenario(read_env(os.path.join(cdir, "env")), cdir, prefix, t0)
    finally:
        subprocess.run([DOWN, cdir], check=False)
        env = read_env(os.path.join(cdir, "env"))
        pids = env["HOST_PIDS"].split() + [env["HAPROXY_PID"], env["S3_PID"]]
        time.sleep(0.5)
        alive = [p for p in pids if os.path.exists(f"/proc/{p}")]
        check("down stopped every process up started", not alive, f"still there: {alive}")


async def scenario(env, cdir, prefix, t0):
    B, A, V = env["BALANCER_URL"], env["AGENT_TOKEN"], env["VIEWER_TOKEN"]
    names = env["HOST_NAMES"].split()
    direct = env["HOST_URLS"].split()
    print(f"cluster up in {time.monotonic() - t0:.1f} s: {names} behind {B}", flush=True)
    mode = os.stat(os.path.join(cdir, "env")).st_mode
    check("DIR/env (the tokens) is root's alone, mode 0600", stat.S_IMODE(mode) == 0o600,
          oct(mode))

    # ---- health, as HAProxy and anyone see it (no token) ----
    st, h = http("GET", direct[2] + "/v1/health")
    check("a drained host reports itself full", st == 200 and h["full"] and h["draining"], h)
    st, h = http("GET", direct[0] + "/v1/health")
    check("/v1/health has counts and the host", st == 200 and h["host"] == names[0] and
          h["free_slots"] == MAX_SESSIONS and h["sessions"] == 0 and
          isinstance(h["mem_available_mb"], int), h)
    st, e = http("POST", direct[2] + "/v1/sessions", A, {"profile": "xterm"})
    check("the drained host refuses a session made on it directly (503)",
          st == 503 and names[2] in e["error"]["message"], (st, e))

    # ---- host 1 has less free capacity: PRELOAD sessions made on it directly ----
    pre = []
    for _ in range(PRELOAD):
        st, s = http("POST", direct[0] + "/v1/sessions", A, {"profile": "xterm"})
        check("a session made on host 1 directly", st == 201, (st, s))
        pre.append(s)
    await asyncio.sleep(1.2)  # the agents' weights are read every 500 ms
    free = [http("GET", u + "/v1/health")[1]["free_slots"] for u in direct[:2]]
    weights = haproxy_weights(env["HAPROXY_SOCKET"])
    # The agent's "up ready N%" scales the configured weight (MAX_SESSIONS).
    want = [MAX_SESSIONS * (f * 100 // MAX_SESSIONS) // 100 for f in free]
    check("HAProxy's placement weights follow the hosts' free slots",
          all(abs(weights[n] - w) <= 1 for n, w in zip(names, want)) and weights[names[2]] == 0,
          f"weights {weights}, free slots {free}")

    # ---- 30 sessions through the balancer ----
    t = time.monotonic()
    made = await create(env, SESSIONS)
    sessions = [s for st, s in made if st == 201]
    check(f"{SESSIONS} sessions created through the balancer", len(sessions) == SESSIONS,
          [m for m in made if m[0] != 201][:3])
    per = {n: sum(1 for s in sessions if s["host"] == n) for n in names}
    print(f"placement of {SESSIONS} ({time.monotonic() - t:.1f} s; host 1 had {PRELOAD} already): "
          f"{per}", flush=True)
    check("every id carries its host", all(s["id"].startswith(s["host"] + "-") and
                                           len(s["id"]) == len(s["host"]) + 33 for s in sessions))
    check("ws_url points at the balancer", all(s["ws_url"].startswith(B.replace("http", "ws"))
                                                for s in sessions))
    check("both open hosts got sessions", per[names[0]] > 0 and per[names[1]] > 0, per)
    share = SESSIONS * free[1] / (free[0] + free[1])
    check(f"host 2 got its share by free slots ({free[1]} of {free[0] + free[1]}: {share:.1f}) "
          f"less at most {PLACEMENT_MARGIN}", per[names[1]] >= share - PLACEMENT_MARGIN, per)
    check("the drained host got none", per[names[2]] == 0, per)

    # ---- each driven over its WebSocket through the balancer ----
    wss = await asyncio.gather(*(agent_ws(s) for s in sessions))
    oks = await asyncio.gather(*(act(ws, 10 + i) for i, ws in enumerate(wss)))
    check("every session answered an action and a screenshot through the balancer", all(oks),
          f"{oks.count(False)} failed")
    st, one = http("GET", f"{B}/v1/sessions/{sessions[0]['id']}", A)
    check("GET /v1/sessions/{id} reaches its host", st == 200 and one["host"] == sessions[0]["host"]
          and one["actions"] == 1, one)

    # ---- one watched by an observer ----
    w = sessions[1]
    watch = await websockets.connect(w["watch_url"], max_size=None,
                                     subprotocols=["deskgate.v1", "bearer." + V])
    hello = json.loads(await asyncio.wait_for(watch.recv(), 30))
    check("the observer's hello names the session", hello.get("id") == w["id"], hello)
    await act(wss[1], 300)
    seen = False
    deadline = time.monotonic() + 15
    while not seen and time.monotonic() < deadline:
        m = await asyncio.wait_for(watch.recv(), deadline - time.monotonic())
        if isinstance(m, str):
            ev = json.loads(m)
            seen = ev.get("type") == "action" and ev.get("canonical", {}).get("x") == 300
    check("the observer saw the action through the balancer", seen)
    await watch.close()

    # ---- 10 ended, their recordings read through the balancer ----
    idx = [i for i, s in enumerate(sessions) if s["host"] == names[0]][:ENDED // 2]
    idx += [i for i, s in enumerate(sessions) if s["host"] == names[1] and i not in idx]
    idx = idx[:ENDED]
    for i in idx:
        st, r = http("DELETE", f"{B}/v1/sessions/{sessions[i]['id']}", A)
        check(f"DELETE {sessions[i]['id']}", st == 200 and r.get("status") == "ended", (st, r))
    for i in idx:
        await closed_within(wss[i], 5)
    # Uploaded: keep_local is false, so the owner removes its local copy
    # only once the bucket's copy is confirmed (fetched back and verified).
    ended = [sessions[i] for i in idx]
    t = time.monotonic()
    gone = await wait_uploaded(cdir, names, ended, 60)
    check(f"{ENDED} ended sessions' recordings uploaded, their local copies gone",
          gone == ENDED, f"{gone} of {ENDED}")
    print(f"uploaded within {time.monotonic() - t:.1f} s", flush=True)
    uploads = 'deskgate_recording_uploads_total{result="ok"}'
    n = await wait_metric(direct[:2], V, uploads, ENDED)
    check("the owners count the uploads in /metrics", n == ENDED, n)
    sealed = read_from_bucket(B, V, ended, "sealed")
    check(f"{ENDED} ended sessions' recordings read through the balancer from the bucket, sealed",
          sealed == ENDED, f"{sealed} of {ENDED}")
    live = [i for i in range(len(sessions)) if i not in idx]

    # ---- CDP, approvals and MCP through the balancer, on both open hosts ----
    t = time.monotonic()
    ask = {"profile": "browser", "policy": "ask"}
    browsers, made = await on_both(env, names[:2], ask)
    check("browser sessions placed on both open hosts", len(browsers) == 2,
          [s["host"] for s in made])
    for s in browsers:
        await cdp_through(B, A, s)
        await approval_through(B, V, s)
    for s in browsers:
        http("DELETE", f"{B}/v1/sessions/{s['id']}", A)
    mcp_through(B, A, names[:2])
    # Uploaded before host 1 dies, so that its restart uploads its orphans only.
    gone = await wait_uploaded(cdir, names, made, 60)
    check(f"the {len(made)} browser sessions' recordings uploaded", gone == len(made),
          f"{gone} of {len(made)}")
    print(f"CDP, approvals and MCP on both hosts in {time.monotonic() - t:.1f} s", flush=True)

    # ---- host 1 killed ----
    victim = names[0]
    victim_pid = int(env["HOST_PIDS"].split()[0])
    on_victim = [i for i in live if sessions[i]["host"] == victim]
    others = [i for i in live if sessions[i]["host"] != victim]
    os.kill(victim_pid, signal.SIGKILL)
    t = time.monotonic()
    closed = await asyncio.gather(*(closed_within(wss[i], 10) for i in on_victim))
    check(f"the {len(on_victim)} WebSockets of the killed host closed", all(closed) and on_victim,
          closed)
    print(f"its WebSockets closed within {time.monotonic() - t:.1f} s", flush=True)
    # At once: a kept-alive connection to the dead host breaks (502), or a
    # new one is refused (503); both answers name the host.
    st, e = http("GET", f"{B}/v1/sessions/{sessions[on_victim[0]]['id']}", A)
    check("a request to its session at once: 502 or 503 naming the host as down",
          st in (502, 503) and isinstance(e, dict) and e["error"]["code"] == "host_down" and
          victim in e["error"]["message"], (st, e))
    try:
        await websockets.connect(sessions[on_victim[0]]["ws_url"], open_timeout=10,
                                 subprotocols=["deskgate.v1", "bearer." +
                                               sessions[on_victim[0]]["session_token"]])
        check("a new WebSocket to its session is refused", False)
    except websockets.InvalidStatusCode as ex:
        check("a new WebSocket to its session is refused (503)", ex.status_code == 503,
              ex.status_code)
    # The balancer's health check takes it out (fall 2 at 500 ms).
    await asyncio.sleep(1.5)
    for i in on_victim[:3]:
        st, e = http("GET", f"{B}/v1/sessions/{sessions[i]['id']}", A)
        check("a later request to its session: 503 naming the host as down",
              st == 503 and isinstance(e, dict) and e["error"]["code"] == "host_down" and
              victim in e["error"]["message"], (st, e))
    # Its recordings in the bucket are still read through the balancer:
    # with the owner down, another host fetches them from the bucket.
    mine = [s for s in ended if s["host"] == victim]
    fetched = 'deskgate_recording_fetches_total{result="ok"}'
    f0 = metric(direct[1], V, fetched)
    n_ok = read_from_bucket(B, V, mine, "sealed")
    f1 = metric(direct[1], V, fetched)
    check(f"the killed host's {len(mine)} uploaded recordings served by host 2 from the bucket",
          n_ok == len(mine) > 0 and f1 - f0 == len(mine), f"{n_ok} of {len(mine)}, fetches {f0}->{f1}")
    st, e = http("GET", f"{B}/v1/recordings/{victim}-{'0' * 32}", V)
    check("a recording in no bucket, its host down: 404 from another host",
          st == 404 and isinstance(e, dict) and "bucket" in e["error"]["message"], (st, e))
    after = await create(env, 4, parallel=2)
    hosts_after = [s.get("host") for st, s in after if st == 201]
    check("new sessions land on the remaining open host", hosts_after == [names[1]] * 4,
          [(st, s.get("host") if isinstance(s, dict) else s) for st, s in after])
    oks = await asyncio.gather(*(act(wss[i], 500) for i in others))
    check(f"the other host's {len(others)} sessions never noticed (their WebSockets work)",
          all(oks) and others, oks)
    for st, s in after:
        if st == 201:
            http("DELETE", f"{B}/v1/sessions/{s['id']}", A)

    # ---- host 1 restarted: its orphans sealed and uploaded ----
    # Its live sessions when it died: on_victim and the PRELOAD made on it.
    orphans = [sessions[i] for i in on_victim] + pre
    check(f"the killed host's {len(orphans)} orphaned recordings are on its disk only",
          all(os.path.exists(local_copy(cdir, names, s)) for s in orphans))
    subprocess.run([UP, "--restart", "1", cdir], check=True)
    env2 = read_env(os.path.join(cdir, "env"))
    check("the restarted host has a new pid in HOST_PIDS",
          env2["HOST_PIDS"].split()[0] != str(victim_pid), env2["HOST_PIDS"])
    t = time.monotonic()
    gone = await wait_uploaded(cdir, names, orphans, 60)
    check(f"the killed host's {len(orphans)} orphaned recordings uploaded after its restart",
          gone == len(orphans), f"{gone} of {len(orphans)}")
    print(f"orphans uploaded within {time.monotonic() - t:.1f} s of the restart", flush=True)
    n = await wait_metric(direct[:1], V, uploads, len(orphans))
    check("the restarted host counts their uploads in /metrics", n == len(orphans), n)
    ok = read_from_bucket(B, V, orphans, "sealed-after-crash")
    check(f"the killed host's {len(orphans)} orphaned recordings sealed, read from the bucket",
          ok == len(orphans), f"{ok} of {len(orphans)}")
    st, h = http("GET", direct[0] + "/v1/health")
    check("the restarted host is empty and open", st == 200 and h["sessions"] == 0 and
          not h["full"], h)
    for ws in wss:
        await ws.close()


def run():
    if len(sys.argv) != 3:
        print("usage: cluster.py DESKGATE_BINARY WORK_DIR", file=sys.stderr)
        return 2
    os.environ["DESKGATE"] = os.path.abspath(sys.argv[1])
    for tool in ("haproxy", "node", "curl", "openssl"):
        if subprocess.run(["sh", "-c", 'command -v "$1"', "sh", tool],
                          stdout=subprocess.DEVNULL).returncode != 0:
            print(f"cluster: {tool} is missing (.ci/setup.sh installs it)", file=sys.stderr)
            return 1
    work = os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    t = time.monotonic()
    asyncio.run(main(work))
    print(f"cluster: {len(failures)} failure(s) in {time.monotonic() - t:.0f} s", flush=True)
    return 1 if failures else 0


sys.exit(run())
