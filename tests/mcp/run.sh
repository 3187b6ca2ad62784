#!/bin/bash
# The MCP suites (ctest: mcp/*): each is tests/mcp/SUITE.js, run with node
# against the deskgate binary under test, driven by clients nobody here
# wrote (the official MCP TypeScript SDK and the others of package.json).
#
#   tests/mcp/run.sh DESKGATE_BINARY WORK_DIR SUITE
#
# SUITE names a .js file of tests/mcp without its extension (bridge:
# `deskgate mcp`, the stdio bridge, bridge.js). Installs the pinned npm dev
# dependencies (package-lock.json) into tests/mcp/node_modules when they
# are missing or older than the lock file. WORK_DIR (in the build
# directory) is created for what a suite writes. A suite needing more (root,
# Chromium) checks that itself. Fails loudly, exit 1, when node or npm is
# missing or too old, or the install fails.
set -euo pipefail

die() { echo "mcp tests: $*" >&2; exit 1; }

bin=${1:-}
work=${2:-}
suite=${3:-}
[ -n "$bin" ] && [ -n "$work" ] && [ -n "$suite" ] || die "usage: $0 DESKGATE_BINARY WORK_DIR SUITE"
here=$(cd "$(dirname "$0")" && pwd)
[[ "$suite" =~ ^[a-z0-9][a-z0-9_-]*$ ]] && [ -f "$here/$suite.js" ] ||
	die "unknown suite \"$suite\": no $here/$suite.js"
[ -x "$bin" ] || die "$bin is not an executable"

command -v node >/dev/null || die "node is missing (apt-get install nodejs)"
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || die "node $(node --version) is too old: the MCP SDK needs node 20 or later"

# The suites may start side by side: one installs while the other waits.
exec 9>"/tmp/deskgate-mcp-npm-$(printf %s "$here" | sha256sum | cut -c1-16).lock"
flock 9
if [ ! -f "$here/node_modules/.package-lock.json" ] ||
   [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; then
	command -v npm >/dev/null || die "npm is missing (apt-get install npm) and tests/mcp/node_modules is not installed"
	echo "mcp tests: installing the pinned clients (npm ci) into $here/node_modules"
	(cd "$here" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed in $here"
fi

flock -u 9
exec 9>&-
mkdir -p "$work"
export NODE_PATH="$here/node_modules"
exec node "$here/$suite.js" "$bin" "$work"
