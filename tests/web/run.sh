#!/bin/bash
# The web tests (ctest: web/playwright): tests/web/web.test.js drives
# Debian's Chromium headless with playwright-core against a `deskgate serve`
# it starts (as root) with its own temporary config, state and recordings.
#
#   tests/web/run.sh DESKGATE_BINARY [TEST.js]
#
# TEST.js, a file of tests/web (default web.test.js; blast.test.js is the
# blast radius tried live, ctest web/blast; settle.test.js settling against
# pages that repaint late, ctest web/settle).
#
# Installs the npm dev dependencies (package-lock.json) into
# tests/web/node_modules when they are missing or older than the lock file.
# Fails loudly, exit 1, when node, npm, Chromium or root is missing.
# Page screenshots go to tests/web/screenshots/ beside the binary, in its
# build directory (build-asan/tests/web/screenshots/ under .ci/test;
# DG_WEB_SCREENSHOTS=DIR to put them elsewhere): never into the source tree.
set -euo pipefail

die() { echo "web tests: $*" >&2; exit 1; }

bin=${1:-}
[ -n "$bin" ] || die "usage: $0 DESKGATE_BINARY"
[ -x "$bin" ] || die "$bin is not an executable"
here=$(cd "$(dirname "$0")" && pwd)

[ "$(id -u)" = 0 ] || die "must run as root: deskgate serve starts as root (its spawner makes namespaces and cgroups)"
command -v node >/dev/null || die "node is missing (apt-get install nodejs)"
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || die "node $(node --version) is too old: playwright-core needs node 20 or later"
chromium=${DG_CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] || die "$chromium is missing (apt-get install chromium)"

if [ ! -f "$here/node_modules/.package-lock.json" ] ||
   [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; then
	command -v npm >/dev/null || die "npm is missing (apt-get install npm) and tests/web/node_modules is not installed"
	echo "web tests: installing playwright-core, pngjs and ws (npm ci) into $here/node_modules"
	(cd "$here" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed in $here"
fi

test=${2:-web.test.js}
case "$test" in */*|"") die "$test: name a file of $here";; esac
[ -f "$here/$test" ] || die "$here/$test is missing"
exec node "$here/$test" "$bin"
