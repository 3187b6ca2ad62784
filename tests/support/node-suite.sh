#!/bin/bash
# The node suites (ctest: mcp/*, cdp/*, s3/*): each is PACKAGE_DIR/SUITE.js, run
# with node against the deskgate binary under test, driven by clients
# nobody here wrote (the official MCP TypeScript SDK, Playwright, Puppeteer,
# playwright-mcp: the package.json of PACKAGE_DIR).
#
#   tests/support/node-suite.sh PACKAGE_DIR DESKGATE_BINARY WORK_DIR SUITE
#
# SUITE names a .js file of PACKAGE_DIR without its extension (tests/mcp
# bridge: `deskgate mcp`, the stdio bridge, bridge.js). Installs the pinned
# npm dev dependencies (package-lock.json) into PACKAGE_DIR/node_modules
# when they are missing or older than the lock file. WORK_DIR (in the build
# directory) is created for what a suite writes. A suite needing more (root,
# Chromium) checks that itself. Fails loudly, exit 1, when node or npm is
# missing or too old, or the install fails.
set -euo pipefail

die() { echo "node suite: $*" >&2; exit 1; }

pkg=${1:-}
bin=${2:-}
work=${3:-}
suite=${4:-}
[ -n "$pkg" ] && [ -n "$bin" ] && [ -n "$work" ] && [ -n "$suite" ] ||
	die "usage: $0 PACKAGE_DIR DESKGATE_BINARY WORK_DIR SUITE"
[ -f "$pkg/package-lock.json" ] || die "$pkg has no package-lock.json"
here=$(cd "$pkg" && pwd)
[[ "$suite" =~ ^[a-z0-9][a-z0-9_-]*$ ]] && [ -f "$here/$suite.js" ] ||
	die "unknown suite \"$suite\": no $here/$suite.js"
[ -x "$bin" ] || die "$bin is not an executable"

command -v node >/dev/null || die "node is missing (apt-get install nodejs)"
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || die "node $(node --version) is too old: the MCP SDK needs node 20 or later"

# The suites may start side by side: one installs while the other waits.
exec 9>"/tmp/deskgate-node-suite-$(printf %s "$here" | sha256sum | cut -c1-16).lock"
flock 9
if [ ! -f "$here/node_modules/.package-lock.json" ] ||
   [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; then
	command -v npm >/dev/null || die "npm is missing (apt-get install npm) and $here/node_modules is not installed"
	echo "node suite: installing the pinned clients (npm ci) into $here/node_modules"
	(cd "$here" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed in $here"
fi

flock -u 9
exec 9>&-
mkdir -p "$work"
export NODE_PATH="$here/node_modules"
exec node "$here/$suite.js" "$bin" "$work"
