#!/usr/bin/python3
"""A minimal agent loop against deskgate, in the OpenAI computer-use shape:
it creates a session, sends the computer_call items a model would return
(batched "actions", with "keys" modifiers held during pointer actions), and
appends the items deskgate answers (a computer_call_output, plus a message
when something was refused) to the conversation as-is.

usage: openai_loop.py BASE_URL TOKEN [--profile xterm|browser]
Prints one JSON line per call with what came back. In browser sessions the
desktop shows a test page that writes every input it receives into its
title; the client reads the title back with deskgate's own cursor_position
action (canonical actions and computer_call items share the socket), so a
test can tell that each input arrived.
"""
import asyncio, base64, json, struct, sys, urllib.error, urllib.request

import websockets

# Every input it receives, in screen coordinates (the browser window is at
# 0,0), ends up in the title, numbered: "click:640,400,b0,d1,shift#3".
TEST_PAGE = (
    "data:text/html,<!doctype html><html><head><title>ready</title><style>"
    "html,body{margin:0;height:100%;background:%23c00}"
    "textarea{position:absolute;left:100px;top:400px;width:300px;height:150px}"
    "</style></head><body><textarea id=t></textarea><script>"
    "var n=0,drag=null,dragged=false;"
    "function T(s){document.title=s+'%23'+(++n)}"
    "function M(e){return(e.ctrlKey?',ctrl':'')+(e.shiftKey?',shift':'')+(e.altKey?',alt':'')}"
    "document.addEventListener('click',e=>{if(dragged){dragged=false;return}"
    "if(e.target.id!='t')T('click:'+e.screenX+','+e.screenY+',b'+e.button+',d'+e.detail+M(e))});"
    "document.addEventListener('dblclick',e=>T('dblclick:'+e.screenX+','+e.screenY));"
    "document.addEventListener('mousedown',e=>{drag=[e.screenX,e.screenY]});"
    "document.addEventListener('mouseup',e=>{if(drag&&(drag[0]!=e.screenX||drag[1]!=e.screenY))"
    "{dragged=true;T('drag:'+drag+'-'+e.screenX+','+e.screenY)}drag=null});"
    "document.addEventListener('wheel',e=>T('wheel:'+Math.sign(e.deltaY)+','+Math.sign(e.deltaX)));"
    "document.addEventListener('keydown',e=>{if(e.target.id!='t')T('key:'+(e.ctrlKey?'ctrl+':'')"
    "+(e.shiftKey?'shift+':'')+(e.altKey?'alt+':'')+e.key)});"
    "document.getElementById('t').addEventListener('input',e=>T('text:'+e.target.value));"
    "</script></body></html>")


def create_session(base, token, profile):
    req = urllib.request.Request(base + "/v1/sessions", data=json.dumps({"profile": profile}).encode(),
                                 headers={"Authorization": "Bearer " + token,
                                          "Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=90) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        raise SystemExit("POST /v1/sessions: %d %s" % (e.code, e.read().decode(errors="replace")))


def delete_session(base, token, sid):
    req = urllib.request.Request(base + "/v1/sessions/" + sid, method="DELETE",
                                 headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def computer_call(n, actions, safety_checks=()):
    """A computer_call output item as the Responses API returns it."""
    return {"type": "computer_call", "id": "cu_%02d" % n, "call_id": "call_%02d" % n,
            "actions": actions, "pending_safety_checks": list(safety_checks),
            "status": "completed"}


async def canonical(ws, action):
    """Runs one of deskgate's own actions; returns its result (the PNG frame
    that follows a result is read and dropped)."""
    await ws.send(json.dumps(action))
    while True:
        msg = await ws.recv()
        if isinstance(msg, bytes):
            continue
        res = json.loads(msg)
        if res.get("type") in ("event", "decision"):
            # An agent that asked for no events gets answers only.
            raise SystemExit("the agent's socket carried %s before the answer" % msg[:300])
        if "frame" in res:
            await ws.recv()
        return res


async def wait_title(ws, old, prefix, timeout=10.0):
    """The page's title once it changed from old and starts with prefix (the
    page updates it after the input; deskgate reports it after settling)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    title = ""
    while loop.time() < end:
        title = (await canonical(ws, {"type": "cursor_position"})).get("title", "")
        if title != old and title.startswith(prefix):
            break
        await asyncio.sleep(0.05)
    return title


def png_size(png):
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        return None
    return list(struct.unpack(">II", png[16:24]))


def summarize(call, answer):
    """What a test needs to know of deskgate's answer to one call."""
    out = {"call_id": call["call_id"], "actions": [a["type"] for a in call["actions"]]}
    items = answer if isinstance(answer, list) else [answer]
    first = items[0]
    out["item"] = first.get("type")
    out["call_id_echoed"] = first.get("call_id") == call["call_id"]
    out["acknowledged_safety_checks"] = [c["id"] for c in first.get("acknowledged_safety_checks", [])]
    output = first.get("output", {})
    out["output_type"] = output.get("type")
    url = output.get("image_url", "")
    prefix = "data:image/png;base64,"
    if url.startswith(prefix):
        out["png_size"] = png_size(base64.b64decode(url[len(prefix):]))
    # The URL comes in the user message after the output item (the item's
    # type has no URL field): a line "current_url: URL".
    texts = [c["text"] for m in items[1:] for c in m.get("content", [])]
    current = None
    messages = []
    for text in texts:
        lines = text.split("\n")
        urls = [l[len("current_url: "):] for l in lines if l.startswith("current_url: ")]
        current = urls[-1] if urls else current
        rest = "\n".join(l for l in lines if not l.startswith("current_url: "))
        if rest:
            messages.append(rest)
    out["current_url"] = current[:40] if current else current
    out["messages"] = messages
    return out


# (actions, the title prefix the page shows afterwards or None, safety checks)
BROWSER_STEPS = [
    ([{"type": "screenshot"}], None, ()),
    ([{"type": "click", "x": 640, "y": 400, "button": "left", "keys": ["SHIFT"]}], "click:", ()),
    ([{"type": "click", "x": 250, "y": 550, "button": "left"},
      {"type": "type", "text": "hi openai"}], "text:", ()),
    ([{"type": "click", "x": 640, "y": 250, "button": "left"},
      {"type": "keypress", "keys": ["CTRL", "SHIFT", "K"]}], "key:", ()),
    ([{"type": "scroll", "x": 640, "y": 400, "scroll_x": 0, "scroll_y": 300}], "wheel:", ()),
    ([{"type": "double_click", "x": 320, "y": 200}], "dblclick:", ()),
    ([{"type": "drag", "path": [{"x": 500, "y": 250}, {"x": 750, "y": 313}]}], "drag:", ()),
    ([{"type": "move", "x": 10, "y": 10}, {"type": "wait"}], None,
     ({"id": "cu_sc_1", "code": "malicious_instructions", "message": "check the page"},)),
    # an unknown key: the call is refused as a whole, before anything runs
    ([{"type": "click", "x": 640, "y": 300, "button": "left"},
      {"type": "keypress", "keys": ["CTLR"]},
      {"type": "type", "text": "never"}], None, ()),
]

XTERM_STEPS = [
    ([{"type": "screenshot"}], None, ()),
    ([{"type": "click", "x": 640, "y": 400, "button": "left"},
      {"type": "type", "text": "echo openai-$((6*7)) > /tmp/openai"},
      {"type": "keypress", "keys": ["ENTER"]}], None, ()),
    ([{"type": "keypress", "keys": ["CTRL", "L"]}], None, ()),
    ([{"type": "scroll", "x": 640, "y": 400, "scroll_x": 0, "scroll_y": -200, "keys": ["CTRL"]},
      {"type": "move", "x": 100, "y": 100},
      {"type": "drag", "path": [{"x": 100, "y": 100}, {"x": 300, "y": 200}]},
      {"type": "double_click", "x": 320, "y": 200}], None, ()),
]


async def run(base, token, profile):
    sess = create_session(base, token, profile)
    lines = []
    # The token can travel in the subprotocol list (as browsers must send it)
    # or in an Authorization header.
    async with websockets.connect(sess["ws_url"], subprotocols=["deskgate.v1", "bearer." + token],
                                  max_size=64 * 1024 * 1024) as ws:
        hello = json.loads(await ws.recv())
        assert hello["type"] == "hello", hello
        title = ""
        if profile == "browser":
            await canonical(ws, {"type": "navigate", "url": TEST_PAGE})
            title = await wait_title(ws, None, "ready")
        steps = BROWSER_STEPS if profile == "browser" else XTERM_STEPS
        for n, (actions, expect, checks) in enumerate(steps, 1):
            call = computer_call(n, actions, checks)
            await ws.send(json.dumps(call))
            answer = json.loads(await ws.recv())
            line = summarize(call, answer)
            if profile == "browser":
                if expect:
                    title = await wait_title(ws, title, expect)
                else:
                    title = (await canonical(ws, {"type": "cursor_position"})).get("title", "")
                line["title"] = title.rsplit("#", 1)[0]
            lines.append(line)
        # The preview form: one "action" instead of "actions".
        preview = {"type": "computer_call", "id": "cu_99", "call_id": "call_99",
                   "action": {"type": "screenshot"}, "pending_safety_checks": [],
                   "status": "completed"}
        await ws.send(json.dumps(preview))
        answer = json.loads(await ws.recv())
        lines.append(summarize({"call_id": "call_99", "actions": [preview["action"]]}, answer))
        if profile == "xterm":
            res = await canonical(ws, {"type": "exec", "argv": ["cat", "/tmp/openai"]})
            lines.append({"exec_stdout": res.get("exec", {}).get("stdout")})
    delete_session(base, token, sess["id"])
    return lines


if __name__ == "__main__":
    base, token = sys.argv[1], sys.argv[2]
    profile = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--profile" else "xterm"
    for line in asyncio.run(run(base, token, profile)):
        print(json.dumps(line))
