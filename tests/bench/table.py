#!/usr/bin/python3
"""deskgate's benchmark table (issue #8).

Runs the C benchmarks of tests/bench (desktop, gateway, policy, jail_start)
and measures through a running `deskgate serve` what only the whole stack
shows: click to settled screenshot over the agent WebSocket, create to first
frame cold and warm, the recording's cost. Prints one table, each figure with
the baseline measured in the same run and the ratio, and writes it as JSON
(DG_BENCH_OUT, default build/bench/results.json) so runs can be compared.

Usage (as root, after a RelWithDebInfo build into build/):
    /usr/bin/python3 tests/bench/table.py [--quick]
Needs python3-websockets (Debian's), Xvnc, Chromium, Xvfb, xdotool, scrot.
The machine is noisy: read the ratios, not the absolute numbers.
"""
import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import websockets

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("DG_BUILD", os.path.join(ROOT, "build"))
DESKGATE = os.path.join(BUILD, "deskgate")
AGENT = "bench-agent-token-0123456789abcdef"
VIEWER = "bench-viewer-token-0123456789abcde"
GIB = 1024 ** 3
DENSITY_BUDGET = 20 * GIB
# Text only: a button would add its own pressed-state repaints (measured:
# settle 78 ms on a button, 47 ms beside it).
STATIC_PAGE = ("data:text/html,<title>bench</title><body style='margin:20px;font:16px sans-serif'>"
               "<h1>Static page</h1><p>for the click benchmark: nothing here reacts to a click.</p>")

rows = []


def row(figure, value, unit, baseline_label=None, baseline=None, target=None, better="lower",
        note=""):
    ratio = None
    if baseline is not None and value:
        ratio = baseline / value if better == "lower" else value / baseline
    met = None
    if target is not None:
        met = value <= target if better == "lower" else value >= target
    rows.append({"figure": figure, "value": value, "unit": unit, "baseline": baseline_label,
                 "baseline_value": baseline, "ratio": ratio, "target": target, "better": better,
                 "met": met, "note": note})


def fail(msg):
    print("bench table: " + msg, file=sys.stderr)
    sys.exit(2)


def run_json(name, env_extra=None):
    """Runs build/bench/NAME with DG_BENCH_JSON and returns (stdout, json)."""
    out = tempfile.NamedTemporaryFile(suffix=".json", delete=False)
    out.close()
    env = dict(os.environ, DG_BENCH_JSON=out.name, **(env_extra or {}))
    p = subprocess.run([os.path.join(BUILD, "bench", name)], env=env, capture_output=True,
                       text=True)
    sys.stdout.write(p.stdout)
    if p.returncode != 0:
        fail("%s failed (%d): %s" % (name, p.returncode, p.stderr[-2000:]))
    try:
        with open(out.name) as f:
            data = json.load(f)
    except (OSError, ValueError):
        data = None
    os.unlink(out.name)
    return p.stdout, data


# ---- a gateway of our own -----------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Gateway:
    def __init__(self, warm_xterm=0, warm_browser=0):
        self.dir = tempfile.mkdtemp(prefix="dg-bench-")
        os.chmod(self.dir, 0o755)
        self.port = free_port()
        cfg = {"listen": "127.0.0.1:%d" % self.port, "state_dir": self.dir + "/state",
               "recordings": self.dir + "/rec",
               "limits": {"max_sessions": 40, "warm_xterm": warm_xterm,
                          "warm_browser": warm_browser, "actions_per_second": 100000,
                          "recording_fsync_ms": 1000}}
        with open(self.dir + "/config.json", "w") as f:
            json.dump(cfg, f)
        env = dict(os.environ, DESKGATE_AGENT_TOKEN=AGENT, DESKGATE_VIEWER_TOKEN=VIEWER)
        self.log = open(self.dir + "/serve.log", "w")
        self.proc = subprocess.Popen([DESKGATE, "serve", "--config", self.dir + "/config.json"],
                                     env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                self.http("GET", "/healthz")
                break
            except OSError:
                time.sleep(0.05)
        else:
            fail("the gateway did not start; see " + self.dir + "/serve.log")
        self.warm_target = warm_xterm + warm_browser

    def http(self, method, path, body=None, token=AGENT):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": "Bearer " + token})
        with urllib.request.urlopen(req, timeout=120) as r:
            data = r.read()
            return json.loads(data) if r.headers.get_content_type() == "application/json" else data

    def metrics(self):
        text = self.http("GET", "/metrics", token=VIEWER).decode()
        out = {}
        for line in text.splitlines():
            m = re.match(r"^([a-z_]+(?:\{[^}]*\})?) ([0-9.e+-]+)$", line)
            if m:
                out[m.group(1)] = float(m.group(2))
        return out

    def wait_warm(self, profile_counts, timeout=120):
        """Waits until the pool holds what it should: warm desktops are
        jails of the spawner's; counted by their Xvnc processes."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if count_processes("Xvnc") >= profile_counts:
                time.sleep(1.0)  # let the worker pre-encode its first frame
                return
            time.sleep(0.2)
        fail("the warm pool did not fill in %d s" % timeout)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def count_processes(comm):
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/comm" % pid) as f:
                    n += f.read().strip() == comm
            except OSError:
                pass
    return n


async def open_ws(gw, body):
    t0 = time.perf_counter()
    j = gw.http("POST", "/v1/sessions", body)
    t_created = time.perf_counter()
    ws = await websockets.connect(j["ws_url"], subprotocols=["deskgate.v1",
                                                             "bearer." + j["session_token"]],
                                  max_size=None)
    await ws.recv()  # hello
    return j, ws, t0, t_created


async def act(ws, action):
    t0 = time.perf_counter()
    await ws.send(json.dumps(action))
    while True:
        m = await ws.recv()
        if isinstance(m, bytes):
            continue
        j = json.loads(m)
        if j.get("type") == "event":
            continue
        break
    if "frame" in j:
        await ws.recv()  # the PNG
    return j, (time.perf_counter() - t0) * 1000


async def create_to_first_frame(gw, profile, n):
    times = []
    warm = []
    for _ in range(n):
        j, ws, t0, _ = await open_ws(gw, {"profile": profile})
        await act(ws, {"type": "screenshot"})
        times.append((time.perf_counter() - t0) * 1000)
        warm.append(bool(j.get("warm")))
        await ws.close()
        gw.http("DELETE", "/v1/sessions/" + j["id"])
        if gw.warm_target:
            await asyncio.sleep(2.5 if profile == "browser" else 0.8)  # the pool refills
    return times, warm


async def clicks(gw, n):
    j, ws, _, _ = await open_ws(gw, {"profile": "browser"})
    r, _ = await act(ws, {"type": "navigate", "url": STATIC_PAGE})
    if not r.get("ok"):
        fail("navigate to the static page: " + json.dumps(r))
    m0 = gw.metrics()
    lat = []
    for i in range(n):
        _, ms = await act(ws, {"type": "click", "x": 700 + (i % 5) * 40, "y": 500 + (i % 3) * 30})
        lat.append(ms)
    m1 = gw.metrics()
    await ws.close()
    gw.http("DELETE", "/v1/sessions/" + j["id"])
    rec_s = m1.get("deskgate_recording_seconds_total", 0) - m0.get("deskgate_recording_seconds_total", 0)
    rec_ev = m1.get("deskgate_recording_events_total", 0) - m0.get("deskgate_recording_events_total", 0)
    rec_dir = os.path.join(gw.dir, "rec", j["id"])
    size = os.path.getsize(os.path.join(rec_dir, "events.jsonl"))
    actions = 0
    with open(os.path.join(rec_dir, "events.jsonl")) as f:
        for line in f:
            actions += '"type":"action"' in line
    return lat, rec_s * 1000 / n, rec_ev, size / max(actions, 1)


def median(v):
    return statistics.median(v) if v else float("nan")


def read_json(name):
    """A node benchmark's figures, written by .ci/bench before this runs
    (DG_BENCH_JSON); None when it did not run."""
    try:
        with open(os.path.join(BUILD, "bench", name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


# Published figures of a peer, as context: not measured here, no ratio.
ANCHORS = (
    ("Kernel (published): browser create p50, warm VM", 30.0, "ms"),
    ("Kernel (published): headful CDP screenshot", 94.0, "ms"),
    ("Kernel (published): mouse move", 15.6, "ms"),
)


def peer_rows():
    pc = read_json("peer_click.json")
    if pc:
        row("click -> screenshot, deskgate (agent WebSocket, settled)", pc["deskgate_p50_ms"], "ms",
            "Playwright + local Chromium: mouse.click + screenshot", pc["playwright_p50_ms"],
            target=pc["playwright_p50_ms"] / 4,
            note="target: 4x Playwright's in the same run; load %.1f" % pc["load"])
    cdp = read_json("cdp.json")
    if cdp:
        row("CDP round trip added by deskgate (Runtime.evaluate, p50 of pairs)", cdp["added_p50_ms"],
            "ms", target=0.3, note="direct pipe p50 %.3f ms, through deskgate %.3f ms; warm-up %.3f ms added" % (
                cdp["direct_p50_ms"], cdp["deskgate_p50_ms"], cdp["warm_added_p50_ms"]))
    for figure, value, unit in ANCHORS:
        row(figure, value, unit, note="context: published, not measured here")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args()
    if os.geteuid() != 0:
        fail("run as root: desktops need jails")
    if not os.path.exists(DESKGATE):
        fail("no %s: build first (bash .ci/bench does)" % DESKGATE)
    n = 5 if args.quick else 15

    # The C benchmarks: their own baselines in the same run.
    print("==== bench/desktop")
    _, desk = run_json("desktop", {"DG_BENCH_N": "4" if args.quick else "10"})
    drows = {r["id"]: r for r in (desk or {}).get("rows", [])}
    print("==== bench/policy")
    out, _ = run_json("policy")
    m = re.search(r"([0-9.]+) decisions/s, ([0-9.]+) ns per decision", out)
    print("==== bench/gateway")
    _, gwb = run_json("gateway", {"DG_BENCH_SECONDS": "3" if args.quick else "6"})

    # Through the whole gateway.
    print("==== gateway: cold create to first frame")
    gw = Gateway()
    try:
        cold = {p: asyncio.run(create_to_first_frame(gw, p, max(3, n // 3)))[0]
                for p in ("xterm", "browser")}
        print("==== gateway: click to settled screenshot, recording cost")
        lat, rec_ms_per_action, rec_events, bytes_per_action = asyncio.run(clicks(gw, n * 2))
    finally:
        gw.stop()
    print("==== gateway: warm create to first frame")
    gw = Gateway(warm_xterm=1, warm_browser=1)
    try:
        gw.wait_warm(2)
        warm = {}
        for p in ("xterm", "browser"):
            t, w = asyncio.run(create_to_first_frame(gw, p, max(3, n // 3)))
            warm[p] = [x for x, hit in zip(t, w) if hit]
    finally:
        gw.stop()

    click = drows.get("click_to_settled_screenshot", {})
    base_click = (click.get("baseline") or {}).get("median")
    row("click -> settled screenshot over the WebSocket (browser, static page)", median(lat), "ms",
        "Xvfb + xdotool click + scrot, same size", base_click, target=30.0)
    for p in ("xterm", "browser"):
        cs = drows.get("cold_start_%s_first_frame" % p, {})
        base = (cs.get("baseline") or {}).get("median")
        row("create -> first frame, cold, %s (POST to PNG received)" % p, median(cold[p]), "ms",
            "Xvnc by hand under unshare (RFB greeting)", base,
            target=150.0 if p == "xterm" else 1000.0)
        row("create -> first frame, warm, %s" % p, median(warm[p]) if warm[p] else float("nan"), "ms",
            "Xvnc by hand under unshare (RFB greeting)", base, target=10.0,
            note="" if warm[p] else "no warm hit")
    for p, target, issue_pss in (("xterm", 100, None), ("browser", 30, 420.0)):
        pr = drows.get("pss_idle_%s" % p, {})
        pss = pr.get("median")
        if pss:
            fits = int(DENSITY_BUDGET / (pss * 1024 * 1024))
            row("idle %s desktops within 20 GiB (PSS %.1f MiB each)" % (p, pss), fits, "desktops",
                "one Chromium desktop measured at 420 MiB PSS" if issue_pss else None,
                int(DENSITY_BUDGET / (issue_pss * 1024 * 1024)) if issue_pss else None,
                target=target, better="higher",
                note="warm pool desktops count like any other")
    if m:
        row("policy decision", float(m.group(2)), "ns", None, None, target=2000.0)
        row("policy decisions per second", float(m.group(1)), "/s", better="higher")
    for f in (gwb or {}).get("figures", []):
        if f.get("workload") == "move" and f.get("sessions") == 20:
            row("move actions per second, 20 sessions", f["actions_per_s"], "/s", better="higher",
                target=1000.0, note="p99 %.1f ms" % f["p99_ms"])
            row("move p99 latency, 20 sessions", f["p99_ms"], "ms")
    act_ms = median(lat)
    row("recording cost per action (events + frames)", rec_ms_per_action, "ms",
        "the action's own latency", act_ms, better="lower",
        note="%.1f%% of the action (target <= 5%%)" % (100 * rec_ms_per_action / act_ms if act_ms else 0))
    row("recording bytes per action event", bytes_per_action, "bytes")
    peer_rows()

    print()
    print("%-66s %12s %-6s %12s %8s %8s  %s" % ("figure", "value", "unit", "baseline", "ratio",
                                               "target", "met"))
    for r in rows:
        def fmt(v):
            return "-" if v is None else ("%.2f" % v if isinstance(v, float) else str(v))
        print("%-66s %12s %-6s %12s %8s %8s  %s" % (
            r["figure"][:66], fmt(r["value"]), r["unit"], fmt(r["baseline_value"]),
            "-" if r["ratio"] is None else "%.2fx" % r["ratio"], fmt(r["target"]),
            {True: "yes", False: "NO", None: "-"}[r["met"]] + ("  " + r["note"] if r["note"] else "")))
    print("ratio: how many times better than the baseline (baseline / value for times).")
    out = os.environ.get("DG_BENCH_OUT", os.path.join(BUILD, "bench", "results.json"))
    with open(out, "w") as f:
        json.dump({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "cpus": os.cpu_count(), "rows": rows}, f, indent=1)
    print("written: " + out)


if __name__ == "__main__":
    main()
