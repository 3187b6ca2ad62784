#!/usr/bin/python3
"""A minimal agent loop against deskgate, in the Anthropic computer-use
shape: it creates a session, sends the tool_use blocks a model would send,
and appends each tool_result deskgate answers to the conversation as-is.

usage: anthropic_loop.py BASE_URL TOKEN [--profile xterm|browser]
Prints one JSON line per step with what came back (image sizes, errors).
"""
import asyncio, base64, json, sys, urllib.error, urllib.request

import websockets


def create_session(base, token, profile, display=None):
    body = {"profile": profile}
    if display:
        body["display"] = {"width": display[0], "height": display[1]}
    req = urllib.request.Request(base + "/v1/sessions", data=json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + token,
                                          "Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        raise SystemExit("POST /v1/sessions: %d %s" % (e.code, e.read().decode(errors="replace")))


def delete_session(base, token, sid):
    req = urllib.request.Request(base + "/v1/sessions/" + sid, method="DELETE",
                                 headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


async def run(base, token, steps, profile="xterm", display=None):
    sess = create_session(base, token, profile, display)
    results = []
    async with websockets.connect(sess["ws_url"], subprotocols=["deskgate.v1", "bearer." + token],
                                  max_size=64 * 1024 * 1024) as ws:
        hello = json.loads(await ws.recv())
        assert hello["type"] == "hello", hello
        for i, tool_input in enumerate(steps):
            block = {"type": "tool_use", "id": "toolu_%02d" % i, "name": "computer",
                     "input": tool_input}
            await ws.send(json.dumps(block))
            answer = json.loads(await ws.recv())
            results.append(answer)
    delete_session(base, token, sess["id"])
    return sess, results


def summarize(answer):
    out = {"tool_use_id": answer.get("tool_use_id"), "is_error": answer.get("is_error")}
    for c in answer.get("content", []):
        if c["type"] == "image":
            png = base64.b64decode(c["source"]["data"])
            out["png_bytes"] = len(png)
            out["png_ok"] = png[:8] == b"\x89PNG\r\n\x1a\n"
        elif c["type"] == "text":
            out["text"] = c["text"]
    return out


if __name__ == "__main__":
    base, token = sys.argv[1], sys.argv[2]
    profile = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--profile" else "xterm"
    steps = [
        {"action": "screenshot"},
        {"action": "left_click", "coordinate": [640, 400]},
        {"action": "type", "text": "echo hello from the agent\n"},
        {"action": "key", "text": "ctrl+l"},
        {"action": "scroll", "coordinate": [640, 400], "scroll_direction": "down", "scroll_amount": 3},
        {"action": "left_click_drag", "start_coordinate": [100, 100], "coordinate": [300, 200]},
        {"action": "zoom", "region": [0, 0, 640, 400]},
        {"action": "cursor_position"},
    ]
    sess, results = asyncio.run(run(base, token, steps, profile))
    for step, answer in zip(steps, results):
        print(json.dumps({"step": step["action"], **summarize(answer)}))
