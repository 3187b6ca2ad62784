#!/bin/bash
# Copies noVNC's RFB client from the package pinned in package-lock.json
# (npm ci into a temporary directory: integrity checked) into this folder:
# core/, vendor/pako/ (its zlib), LICENSE.txt and the licences it names
# (licences/). web/embed.cmake embeds them into deskgate; the live page
# (web/live.js) imports core/rfb.js. Run it after changing the pinned
# version, then commit what changed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$here/package.json" "$here/package-lock.json" "$tmp/"
(cd "$tmp" && npm ci --no-audit --no-fund --loglevel=error)
pkg="$tmp/node_modules/@novnc/novnc"
rm -rf "$here/core" "$here/vendor" "$here/licences"
mkdir -p "$here/vendor" "$here/licences"
cp -r "$pkg/core" "$here/core"
cp -r "$pkg/vendor/pako" "$here/vendor/pako"
rm -f "$here/vendor/pako/README.md"
cp "$pkg/LICENSE.txt" "$here/LICENSE.txt"
cp "$pkg"/docs/LICENSE.* "$here/licences/"
echo "noVNC $(node -p "require('$pkg/package.json').version") copied into $here"
