#!/bin/bash
# The SDK conformance suite (ctest: sdk/conformance): tests/sdk/conformance.js
# generates every computer-use action variant from the installed SDKs' type
# definitions, sends each to an xterm and a browser session of a
# `deskgate serve` it starts (as root), and type-checks every answer with
# tsc against the SDKs' own types.
#
#   tests/sdk/run.sh DESKGATE_BINARY WORK_DIR [SUITE]
#
# SUITE is conformance (the default: conformance.js) or browser (browser.js:
# the browser toolset against a real browser session).
#
# Installs the pinned npm dev dependencies (package-lock.json: @anthropic-ai/sdk,
# openai, typescript, ws) into tests/sdk/node_modules when they are missing
# or older than the lock file. WORK_DIR (in the build directory) gets the
# generated answers.ts and its tsconfig.json. Fails loudly, exit 1, when
# node, npm, Chromium or root is missing.
set -euo pipefail

die() { echo "sdk conformance: $*" >&2; exit 1; }

bin=${1:-}
work=${2:-}
suite=${3:-conformance}
[ -n "$bin" ] && [ -n "$work" ] || die "usage: $0 DESKGATE_BINARY WORK_DIR [conformance|browser]"
case "$suite" in conformance|browser) ;; *) die "unknown suite $suite (conformance, browser)" ;; esac
[ -x "$bin" ] || die "$bin is not an executable"
here=$(cd "$(dirname "$0")" && pwd)

[ "$(id -u)" = 0 ] || die "must run as root: deskgate serve starts as root (its spawner makes namespaces and cgroups)"
command -v node >/dev/null || die "node is missing (apt-get install nodejs)"
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || die "node $(node --version) is too old: the SDKs need node 20 or later"
[ -x "${DG_CHROMIUM:-/usr/bin/chromium}" ] || die "${DG_CHROMIUM:-/usr/bin/chromium} is missing (apt-get install chromium)"

if [ ! -f "$here/node_modules/.package-lock.json" ] ||
   [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; then
	command -v npm >/dev/null || die "npm is missing (apt-get install npm) and tests/sdk/node_modules is not installed"
	echo "sdk conformance: installing the SDKs and typescript (npm ci) into $here/node_modules"
	(cd "$here" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed in $here"
fi

# tests/web/lib/gateway.js (the gateway it starts) requires ws: from here.
export NODE_PATH="$here/node_modules"
exec node "$here/$suite.js" "$bin" "$work"
