#!/usr/bin/env bash
# tests/fuzz/run.sh [SECONDS] [TARGET...]
#
# Builds the libFuzzer targets with clang (ASan+UBSan, -DDG_FUZZ=ON) into
# build-fuzz/ and runs each for SECONDS (default 30), or only the TARGETs
# named (fuzz_action, fuzz_cdp, ...). Each target starts from its working
# corpus build-fuzz/corpus/<target>/, into which the seeds of
# tests/fuzz/corpus/<target>/ are copied first; what a run finds stays
# there for the next run (remove the folder to start from the seeds
# again). Crash, leak, timeout and out-of-memory reproducers go to
# build-fuzz/artifacts/<target>-*, the full log of each run to
# build-fuzz/logs/<target>.log.
#
# Prints one line per target (executions, executions per second, corpus,
# coverage) and exits 1 when any target crashed or failed to run.
set -euo pipefail
source "$(dirname "$0")/../../.ci/setup.sh"

secs=${1:-30}
shift || true
if ! [[ $secs =~ ^[0-9]+$ ]] || ((secs < 1)); then
	echo "usage: tests/fuzz/run.sh [SECONDS] [TARGET...]" >&2
	exit 2
fi

dg_install_missing
dg_build_fuzz

build="$DG_ROOT/build-fuzz"
seeds="$DG_ROOT/tests/fuzz/corpus"
mkdir -p "$build/artifacts" "$build/logs" "$build/corpus"

if (($# == 0)); then
	set -- $(cd "$build/fuzz" && ls fuzz_* | sort)
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Targets run side by side, one per core (DG_FUZZ_JOBS overrides): each is
# single-threaded, and the suite's budget counts wall time. Each run writes
# its exit code beside its log; the lines are printed afterwards, in order.
jobs=${DG_FUZZ_JOBS:-$(nproc)}
run_one() {
	local t=$1 bin="$build/fuzz/$1" work="$build/corpus/$1" log="$build/logs/$1.log" rc=0
	mkdir -p "$work"
	if [[ -d $seeds/$t ]]; then
		cp -R "$seeds/$t"/. "$work"/
	fi
	(cd "$build" && "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
		-print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" "$work") \
		>"$log" 2>&1 || rc=$?
	echo "$rc" >"$log.rc"
}
failed=()
running=0
for t in "$@"; do
	rm -f "$build/logs/$t.log.rc"
	if [[ ! -x $build/fuzz/$t ]]; then
		continue
	fi
	if ((running >= jobs)); then
		wait -n || true
		running=$((running - 1))
	fi
	run_one "$t" &
	running=$((running + 1))
done
wait || true

printf '%-18s %-7s %12s %9s %8s %7s\n' target result executions exec/s corpus cov
for t in "$@"; do
	log="$build/logs/$t.log"
	if [[ ! -x $build/fuzz/$t ]]; then
		echo "run.sh: no fuzz target $t (have: $(cd "$build/fuzz" && echo fuzz_*))" >&2
		failed+=("$t")
		continue
	fi
	rc=$(cat "$log.rc" 2>/dev/null || echo "no exit code (the run did not finish)")
	# libFuzzer's last status line ("#N DONE cov: C ft: F corp: K/S ... exec/s: E")
	# and its final stats (stat::number_of_executed_units, stat::average_exec_per_sec).
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)
	last=$(grep -E '^#[0-9]+[[:space:]]+(DONE|NEW|REDUCE|pulse|INITED)' "$log" | tail -n1 || true)
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
	corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$last")
	if [[ -z $execs ]]; then
		execs=$(sed -n 's/^#\([0-9]*\).*/\1/p' <<<"$last")
	fi
	if [[ -z $rate ]]; then
		rate=$(sed -n 's/.* exec\/s: \([0-9]*\).*/\1/p' <<<"$last")
	fi
	result=ok
	if [[ $rc != 0 ]]; then
		result=FAILED
		failed+=("$t")
	fi
	printf '%-18s %-7s %12s %9s %8s %7s\n' "$t" "$result" "${execs:-?}" "${rate:-?}" \
		"${corp:-?}" "${cov:-?}"
	if [[ $rc != 0 ]]; then
		echo "---- $t exited with $rc; the end of $log:"
		grep -v '^#[0-9]' "$log" | tail -n 60
		echo "---- reproducers: $(ls "$build/artifacts" | grep "^$t-" | sed "s|^|build-fuzz/artifacts/|" | tr '\n' ' ')"
		echo "---- replay one: build-fuzz/fuzz/$t build-fuzz/artifacts/<file>"
	fi
done

if ((${#failed[@]})); then
	echo "run.sh: failed: ${failed[*]}" >&2
	exit 1
fi
