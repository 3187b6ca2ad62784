#!/usr/bin/env python3
"""Checks that the help and the docs list the same options (ctest: docs/help).

    tests/docs/check_help.py DESKGATE_BINARY SOURCE_DIR

For every command `deskgate help` lists, `deskgate CMD --help` must exit 0
and name its documentation page ("Documentation: docs/PAGE.md"); that page
must have exactly one section headed `deskgate CMD` (a Markdown heading
whose text starts with it, in backticks), and the options in that section's
option table (rows whose first cell starts with `-`) must be exactly the
options of `deskgate CMD --help` (-h/--help, which every command takes, is
left out of both). `deskgate CMD --no-such-option` must be a usage error
(exit 2), no help line may pass 80 columns, and `deskgate --version` must
print "deskgate X.Y.Z", optionally followed by " (git COMMIT)". Needs no
root: nothing here starts a jail.
"""

import os
import re
import subprocess
import sys

HEADING = re.compile(r"^(#{1,6})\s+`deskgate (\w+)")
ANY_HEADING = re.compile(r"^(#{1,6})\s")
OPTION_ROW = re.compile(r"^\|\s*`(-{1,2}[A-Za-z][\w-]*)")
HELP_OPTION = re.compile(r"^  (-{1,2}[A-Za-z][\w-]*)")
VERSION = re.compile(r"^deskgate \d+\.\d+\.\d+( \(git [0-9a-f]{7,40}\))?$")


def run(binary, *args):
    r = subprocess.run([binary, *args], capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout, r.stderr


def commands(binary):
    rc, out, err = run(binary, "help")
    if rc != 0:
        raise SystemExit(f"deskgate help: exit {rc}: {err}")
    names = []
    for line in out.splitlines():
        m = re.match(r"^  deskgate (\w+)", line)
        if m and m.group(1) != "help":
            names.append(m.group(1))
    return names


def help_options(text):
    """The options listed under "options:" in CMD --help, -h/--help left out."""
    opts, inside = set(), False
    for line in text.splitlines():
        if line == "options:":
            inside = True
            continue
        if inside and not line.strip():
            break
        m = HELP_OPTION.match(line) if inside else None
        if m and m.group(1) not in ("-h", "--help"):
            opts.add(m.group(1))
    return opts


def doc_sections(source):
    """{command: [(page, first line, option set)]} over README.md and docs/*.md."""
    pages = ["README.md"] + ["docs/" + n for n in sorted(os.listdir(os.path.join(source, "docs")))
                             if n.endswith(".md")]
    found = {}
    for page in pages:
        with open(os.path.join(source, page), encoding="utf-8") as f:
            lines = f.read().split("\n")
        fenced = False
        for i, line in enumerate(lines):
            if line.startswith("```"):
                fenced = not fenced
            m = None if fenced else HEADING.match(line)
            if not m:
                continue
            level, cmd, opts = len(m.group(1)), m.group(2), set()
            in_fence = False
            for later in lines[i + 1:]:
                if later.startswith("```"):
                    in_fence = not in_fence
                h = None if in_fence else ANY_HEADING.match(later)
                if h and len(h.group(1)) <= level:
                    break
                o = None if in_fence else OPTION_ROW.match(later)
                if o:
                    opts.add(o.group(1))
            found.setdefault(cmd, []).append((page, i + 1, opts))
    return found


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    binary, source = argv[1], argv[2]
    problems = []
    rc, out, _ = run(binary, "--version")
    if rc != 0 or not VERSION.match(out.strip()):
        problems.append(f"deskgate --version: exit {rc}, printed {out!r}")
    sections = doc_sections(source)
    cmds = commands(binary)
    if len(cmds) < 5:
        problems.append(f"deskgate help lists only {cmds}")
    for cmd in cmds:
        rc, out, err = run(binary, cmd, "--help")
        if rc != 0:
            problems.append(f"deskgate {cmd} --help: exit {rc}: {err.strip()}")
            continue
        m = re.search(r"^Documentation: (\S+)$", out, re.M)
        if not m:
            problems.append(f"deskgate {cmd} --help names no documentation page")
            continue
        page = m.group(1)
        secs = sections.get(cmd, [])
        if len(secs) != 1:
            where = ", ".join(f"{p}:{l}" for p, l, _ in secs) or "nowhere"
            problems.append(f"deskgate {cmd}: expected one section headed `deskgate {cmd}` in "
                            f"the docs, found {len(secs)} ({where})")
            continue
        doc_page, line, doc_opts = secs[0]
        if doc_page != page:
            problems.append(f"deskgate {cmd} --help points to {page}, but its section is "
                            f"{doc_page}:{line}")
        wide = [l for l in out.splitlines() if len(l) > 80]
        if wide:
            problems.append(f"deskgate {cmd} --help has lines over 80 columns: {wide[0]!r}")
        opts = help_options(out)
        for o in sorted(opts - doc_opts):
            problems.append(f"{doc_page}:{line}: `deskgate {cmd}` does not document {o} "
                            f"(in deskgate {cmd} --help)")
        for o in sorted(doc_opts - opts):
            problems.append(f"{doc_page}:{line}: `deskgate {cmd}` documents {o}, which "
                            f"deskgate {cmd} --help does not list")
        rc, _, err = run(binary, cmd, "--no-such-option")
        if rc != 2 or "unknown option --no-such-option" not in err:
            problems.append(f"deskgate {cmd} --no-such-option: exit {rc} (want 2), {err.strip()!r}")
    for p in problems:
        print("FAIL " + p)
    print(f"{len(cmds)} commands checked against their docs: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
