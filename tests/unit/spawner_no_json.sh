#!/usr/bin/env bash
# tests/unit/spawner_no_json.sh CC SOURCE_DIR LIBDG_SPAWNER
#
# The spawner runs as root and faces the gateway, the less trusted peer:
# it parses no JSON (issue 15). Fails when a source file of desktop/spawner/
# names jansson, when one of them includes jansson.h or policy/policy.h
# (directly or through another header), or when the dg_spawner library
# calls any json_* function.
set -euo pipefail
cc=$1 src=$2 lib=$3
fail=0
if grep -rn jansson "$src/desktop/spawner"; then
	echo "FAIL: desktop/spawner/ names jansson (above)"
	fail=1
fi
for f in "$src"/desktop/spawner/*.c; do
	deps=$("$cc" -M -D_GNU_SOURCE -I"$src" "$f")
	if grep -Eo '[^ ]*(jansson[^ ]*\.h|policy/policy\.h)' <<<"$deps"; then
		echo "FAIL: ${f#"$src"/} includes the above"
		fail=1
	fi
done
if nm -u "$lib" | grep -E ' json_'; then
	echo "FAIL: $lib calls jansson (above)"
	fail=1
fi
((fail == 0)) && echo "ok: desktop/spawner/ includes, links and calls no jansson"
exit $fail
