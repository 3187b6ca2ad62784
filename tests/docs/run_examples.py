#!/usr/bin/env python3
"""Runs every example marked runnable in README.md and docs/*.md (ctest: docs/examples).

    tests/docs/run_examples.py DESKGATE_BINARY SOURCE_DIR [FILE.md...]
    tests/docs/run_examples.py --list SOURCE_DIR [FILE.md...]

A fenced block is an example when its info string carries a tag after the
language (docs/development.md, "Examples that run"):

    ```sh run          bash -euo pipefail
    ```python run      /usr/bin/python3 (Debian's, which has python3-websockets)
    ```js run          node, as an ES module beside tests/mcp's node_modules
                       (the pinned MCP SDK; `npm ci` there when missing)
    ```json run        must parse as JSON
    ```json policy     must load as a policy (deskgate check --policy FILE)
    ```text output     right after a run block: each of its lines must match a
                       line of what the block printed ("..." matches anything)

Before the first example it starts `deskgate serve` as root with its own
configuration: a free port on 127.0.0.1, temporary state and recordings
directories, and tokens of its own (DESKGATE_AGENT_TOKEN and its siblings in
the gateway's environment only). Each example then runs with, in its
environment:

    DESKGATE_URL         http://127.0.0.1:PORT
    AGENT_TOKEN, VIEWER_TOKEN, ADMIN_TOKEN   the gateway's tokens
    DESKGATE_STATE_DIR, DESKGATE_RECORDINGS  the gateway's directories
    PATH                 a directory holding `deskgate` (the binary under
                         test), then Debian's default PATH

and, as its working directory, a fresh directory per Markdown file (shared by
that file's examples, in order) holding a symlink to each top-level entry of
the source tree, so `docs/examples/...` resolves and whatever an example
writes stays out of the tree. A failing example is reported with its file and
line; the exit status is 1 when any failed, 2 when the gateway did not start.

First, every http(s) or ws(s) URL at 127.0.0.1 in those files (examples or
prose, run or not) must name the port a default gateway listens on
(DG_CONFIG_DEFAULT_LISTEN in gateway/gateway.h): there the docs mean the
gateway, and a reader copies the command as written. Pages an example
serves itself are named otherwise (localhost, a test name).
"""

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

EXAMPLE_TIMEOUT_S = 120    # one example
SERVE_START_S = 60         # deskgate serve until "serving on"
OUTPUT_SHOWN = 3000        # bytes of a failing example's output in the report
PYTHON = "/usr/bin/python3"
DEBIAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([^`]*)$")
RUN_LANGS = {"sh": "sh", "bash": "sh", "python": "python", "json": "json", "js": "js"}


class Block:
    def __init__(self, path, line, lang, tags, text):
        self.path, self.line, self.lang, self.tags, self.text = path, line, lang, tags, text
        self.output = None  # the ```text output block that follows, if any

    def where(self):
        return f"{self.path}:{self.line}"

    def kind(self):
        if "policy" in self.tags and self.lang == "json":
            return "policy"
        if "run" in self.tags:
            return RUN_LANGS.get(self.lang, "unknown")
        return None


def blocks_of(path, rel):
    """Every fenced block of a Markdown file, with the line of its opening fence."""
    out, cur, fence, start, body = [], None, None, 0, []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        if fence is None:
            m = FENCE.match(line)
            if m:
                fence, start, body = m.group(1), n, []
                words = m.group(2).split()
                cur = (words[0].lower() if words else "", set(words[1:]))
            continue
        if line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
            out.append(Block(rel, start, cur[0], cur[1], "\n".join(body) + "\n"))
            fence = None
            continue
        body.append(line)
    if fence is not None:
        out.append(Block(rel, start, "unclosed", {"run"}, ""))
    return out


def examples_of(path, rel):
    """The runnable blocks, each with the output block that follows it."""
    found, last = [], None
    for b in blocks_of(path, rel):
        if "output" in b.tags:
            if last is None:
                b.tags = {"run"}
                b.lang = "output-without-example"
                found.append(b)
            else:
                last.output = b
            last = None
            continue
        if b.kind():
            found.append(b)
            last = b if b.kind() in ("sh", "python", "js") else None
        else:
            last = None
    return found


def output_matches(expected, actual):
    """Lines of expected that match no line of actual ("..." is a wildcard)."""
    got = [l.rstrip() for l in actual.splitlines()]
    missing = []
    for want in expected.splitlines():
        want = want.rstrip()
        if not want:
            continue
        pat = re.compile("^" + ".*".join(re.escape(p) for p in want.split("...")) + "$")
        if not any(pat.match(g) for g in got):
            missing.append(want)
    return missing


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gateway:
    """A `deskgate serve` of the test's own, stopped by stop()."""

    def __init__(self, binary, root):
        self.binary, self.root, self.proc = binary, root, None
        self.tokens = {r: secrets.token_urlsafe(32) for r in ("agent", "viewer", "admin")}
        self.state = os.path.join(root, "state")
        self.recordings = os.path.join(root, "recordings")
        self.log = os.path.join(root, "serve.log")

    def start(self):
        for _ in range(5):
            self.port = free_port()
            config = os.path.join(self.root, "config.json")
            with open(config, "w") as f:
                json.dump({"listen": f"127.0.0.1:{self.port}", "state_dir": self.state,
                           "recordings": self.recordings}, f)
            env = dict(os.environ)
            for role, tok in self.tokens.items():
                env[f"DESKGATE_{role.upper()}_TOKEN"] = tok
            with open(self.log, "wb") as log:
                self.proc = subprocess.Popen([self.binary, "serve", "--config", config],
                                             stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, env=env,
                                             start_new_session=True)
            end = time.monotonic() + SERVE_START_S
            while time.monotonic() < end:
                text = self.read_log()
                if "serving on" in text:
                    return
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
            self.stop()
            if "cannot listen" not in self.read_log():
                raise RuntimeError("deskgate serve did not start:\n" + self.read_log()[-2000:])
        raise RuntimeError("deskgate serve found no free port in 5 tries")

    def read_log(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def example_env(self, bindir):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("DESKGATE_") and k not in ("PYTHONPATH", "PYTHONHOME")}
        env.update({
            "PATH": bindir + ":" + DEBIAN_PATH,
            "DESKGATE_URL": f"http://127.0.0.1:{self.port}",
            "AGENT_TOKEN": self.tokens["agent"],
            "VIEWER_TOKEN": self.tokens["viewer"],
            "ADMIN_TOKEN": self.tokens["admin"],
            "DESKGATE_STATE_DIR": self.state,
            "DESKGATE_RECORDINGS": self.recordings,
        })
        return env


def workdir_for(root, source, rel):
    """A fresh working directory that looks like the source tree."""
    d = os.path.join(root, "work", re.sub(r"[^A-Za-z0-9]+", "-", rel))
    os.makedirs(d)
    for name in os.listdir(source):
        if name == ".git" or name.startswith("build"):
            continue
        os.symlink(os.path.join(source, name), os.path.join(d, name))
    return d


def node_modules_in(cwd):
    """Links tests/mcp's node_modules (installed with `npm ci` when missing)
    into cwd: None, or why it could not."""
    link = os.path.join(cwd, "node_modules")
    if os.path.islink(link):
        return None
    pkg = os.path.join(os.path.realpath(os.path.join(cwd, "tests")), "mcp")
    mods = os.path.join(pkg, "node_modules")
    lock = os.path.join(pkg, "package-lock.json")
    stamp = os.path.join(mods, ".package-lock.json")
    if not os.path.exists(stamp) or os.path.getmtime(lock) > os.path.getmtime(stamp):
        if not shutil.which("npm"):
            return "npm is missing (apt-get install npm) and tests/mcp/node_modules is not installed"
        r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=pkg,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=EXAMPLE_TIMEOUT_S * 3)
        if r.returncode != 0:
            return f"npm ci in {pkg} failed: {r.stderr.strip()[-OUTPUT_SHOWN:]}"
    os.symlink(mods, link)
    return None


def run_block(b, binary, env, cwd, root):
    """None when the example holds, else what went wrong."""
    kind = b.kind()
    if kind == "json":
        try:
            json.loads(b.text)
        except ValueError as e:
            return f"not valid JSON: {e}"
        return None
    if kind == "policy":
        path = os.path.join(root, f"policy-{b.line}.json")
        with open(path, "w") as f:
            f.write(b.text)
        r = subprocess.run([binary, "check", "--policy", path], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=EXAMPLE_TIMEOUT_S)
        return None if r.returncode == 0 else f"does not load as a policy: {r.stderr.strip()}"
    if kind not in ("sh", "python", "js"):
        return f"cannot run a block of language \"{b.lang}\" (sh, bash, python, js or json)"
    script = os.path.join(root, f"example-{os.getpid()}-{b.line}")
    if kind == "js":
        why = node_modules_in(cwd)
        if why:
            return why
        # An ES module finds its imports in the node_modules beside it.
        script = os.path.join(cwd, f"example-{os.getpid()}-{b.line}.mjs")
    with open(script, "w") as f:
        f.write(b.text)
    argv = {"sh": ["bash", "-euo", "pipefail", script], "python": [PYTHON, script],
            "js": ["node", script]}[kind]
    try:
        r = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=EXAMPLE_TIMEOUT_S, start_new_session=True)
    except subprocess.TimeoutExpired as e:
        out = (e.output or b"").decode(errors="replace")
        return f"timed out after {EXAMPLE_TIMEOUT_S} s; output:\n{out[-OUTPUT_SHOWN:]}"
    out = r.stdout.decode(errors="replace")
    if r.returncode != 0:
        return f"exit status {r.returncode}; output:\n{out[-OUTPUT_SHOWN:]}"
    if b.output:
        missing = output_matches(b.output.text, out)
        if missing:
            return (f"its output (shown at {b.output.where()}) does not match: no line like\n  "
                    + "\n  ".join(missing) + f"\nin what it printed:\n{out[-OUTPUT_SHOWN:]}")
    return None


def markdown_files(source, names):
    if names:
        return [(os.path.join(source, n), n) for n in names]
    files = [(os.path.join(source, "README.md"), "README.md")]
    docs = os.path.join(source, "docs")
    for n in sorted(os.listdir(docs)):
        if n.endswith(".md"):
            files.append((os.path.join(docs, n), "docs/" + n))
    return files


def default_listen(source):
    """DG_CONFIG_DEFAULT_LISTEN of gateway/gateway.h: "ADDR:PORT"."""
    with open(os.path.join(source, "gateway", "gateway.h"), encoding="utf-8") as f:
        m = re.search(r'^#define DG_CONFIG_DEFAULT_LISTEN "([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError("gateway/gateway.h: DG_CONFIG_DEFAULT_LISTEN not found")
    return m.group(1)


def wrong_gateway_urls(files, listen):
    """Each URL at 127.0.0.1 on another port than the default gateway's:
    "FILE:LINE: URL"."""
    out = []
    for path, rel in files:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                for m in re.finditer(r"\b(?:https?|wss?)://127\.0\.0\.1:(\d+)\S*", line):
                    if "127.0.0.1:" + m.group(1) != listen:
                        out.append(f"{rel}:{n}: {m.group(0)}")
    return out


def main(argv):
    if len(argv) >= 3 and argv[1] == "--list":
        for path, rel in markdown_files(argv[2], argv[3:]):
            for b in examples_of(path, rel):
                print(f"{b.where()}: {b.kind()}{' (+output)' if b.output else ''}")
        return 0
    if len(argv) < 3:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    binary, source = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    if os.geteuid() != 0:
        print("docs examples: must run as root (they start deskgate serve and desktops)",
              file=sys.stderr)
        return 2
    if not os.access(PYTHON, os.X_OK):
        print(f"docs examples: {PYTHON} is missing (apt-get install python3 python3-websockets)",
              file=sys.stderr)
        return 2
    files = markdown_files(source, argv[3:])
    listen = default_listen(source)
    wrong = wrong_gateway_urls(files, listen)
    for w in wrong:
        print(f"FAIL {w}: a default gateway listens on {listen} "
              "(DG_CONFIG_DEFAULT_LISTEN): the command would not reach it as written")
    examples = [(path, rel, examples_of(path, rel)) for path, rel in files]
    total = sum(len(e) for _, _, e in examples)
    if total == 0:
        print("docs examples: no example is marked runnable: the marker is broken",
              file=sys.stderr)
        return 1
    root = tempfile.mkdtemp(prefix="dg-docs-")
    os.chmod(root, 0o755)  # the gateway drops root: it must reach its directories inside
    gw = Gateway(binary, root)
    failed, t0 = [], time.monotonic()
    try:
        bindir = os.path.join(root, "bin")
        os.makedirs(bindir)
        os.symlink(binary, os.path.join(bindir, "deskgate"))
        try:
            gw.start()
        except RuntimeError as e:
            print(f"docs examples: {e}", file=sys.stderr)
            return 2
        env = gw.example_env(bindir)
        for path, rel, blocks in examples:
            if not blocks:
                continue
            cwd = workdir_for(root, source, rel)
            for b in blocks:
                t = time.monotonic()
                why = run_block(b, binary, env, cwd, root)
                took = time.monotonic() - t
                if why:
                    failed.append(b)
                    print(f"FAIL {b.where()}: {b.kind()} example: {why}\n")
                else:
                    print(f"ok   {b.where()}: {b.kind()} ({took:.1f} s)")
                if gw.proc.poll() is not None:
                    print(f"FAIL {b.where()}: deskgate serve died after this example:\n"
                          + gw.read_log()[-2000:])
                    failed.append(b)
                    return 1
    finally:
        gw.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"{total} examples in {len(files)} files, {len(failed)} failed "
          f"({time.monotonic() - t0:.0f} s); {len(wrong)} gateway URLs on another "
          f"port than {listen}")
    for b in failed:
        print(f"  failed: {b.where()}")
    return 1 if failed or wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
