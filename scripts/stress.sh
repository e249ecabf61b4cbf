#!/usr/bin/env bash
# Runs the whole test suite N times, split as `make test` splits it (the
# packages that need no Temporal server with -race, the others without; see
# scripts/packages.sh), and prints each test that failed at least once with
# how often:
#   FAIL 2/5  TestFoo (github.com/troupe-dev/troupe/pkg)
# A failure that belongs to no test (a build error, a panic or timeout that
# killed the test binary, TestMain) counts against "(package)". Nothing is
# retried. Exits 1 when anything failed.
#   scripts/stress.sh [N]          N defaults to 5
# STRESS_DIR keeps the `go test -json` logs (default: a new temporary
# directory); STRESS_TIMEOUT is go test's -timeout (default 20m).
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local

n=${1:-5}
case "$n" in
'' | *[!0-9]* | 0)
	echo "usage: $0 [N], N a positive number of runs" >&2
	exit 2
	;;
esac
dir=${STRESS_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/troupe-stress.XXXXXX")}
mkdir -p "$dir"
timeout=${STRESS_TIMEOUT:-20m}

mapfile -t noserver < <(scripts/packages.sh noserver)
mapfile -t server < <(scripts/packages.sh server)

echo "stress: $n runs of the suite; logs in $dir"
# run LOG ARGS... runs go test -json ARGS into LOG.json (stderr in LOG.err)
# and records its exit status in LOG.status.
run() {
	local log=$1 rc=0
	shift
	go test -json "$@" >"$log.json" 2>"$log.err" || rc=$?
	echo "$rc" >"$log.status"
	return "$rc"
}
for i in $(seq 1 "$n"); do
	start=$(date +%s)
	status=ok
	# -count=1: every run runs every test (no cached results).
	run "$dir/run$i-noserver" -count=1 -race -timeout "$timeout" "${noserver[@]}" || status=FAIL
	run "$dir/run$i-server" -count=1 -timeout "$timeout" "${server[@]}" || status=FAIL
	echo "stress: run $i/$n: $status ($(($(date +%s) - start))s)"
done

# Count, per package and test, the times it ended (pass, fail or skip) and
# the failures. go test -json writes one event a line, its fields in a
# fixed order (Action before Package before Test before Output). A package
# that failed with no test failing (a build error, a crash, TestMain)
# counts as a failure of "(package)"; a go test that failed with no failing
# package at all, as one of "(go test)".
summary=$(
	for f in "$dir"/run*.json; do
		awk -v rc="$(cat "${f%.json}.status")" '
		function field(name,   re, v) {
			re = "\"" name "\":\"([^\"\\\\]|\\\\.)*\""
			if (!match($0, re)) return ""
			v = substr($0, RSTART + length(name) + 4, RLENGTH - length(name) - 5)
			gsub(/\\"/, "\"", v)
			gsub(/\\\\/, "\\", v)
			return v
		}
		/^{/ {
			action = field("Action")
			if (action != "pass" && action != "fail" && action != "skip") next
			pkg = field("Package")
			test = field("Test")
			if (test != "") {
				print action "\t" test "\t" pkg
				if (action == "fail") testFailed[pkg] = 1
				next
			}
			pkgs[pkg] = action
		}
		END {
			failures = 0
			for (pkg in pkgs) {
				if (pkgs[pkg] == "fail") failures++
				if (pkgs[pkg] == "fail" && !(pkg in testFailed)) print "fail\t(package)\t" pkg
				else print "pass\t(package)\t" pkg
			}
			print (rc != 0 && failures == 0 ? "fail" : "pass") "\t(go test)\tthe go command: see the .err logs"
		}
		' "$f"
	done | awk -F '\t' '
	{
		key = $2 "\t" $3
		ended[key]++
		if ($1 == "fail") failed[key]++
	}
	END {
		for (key in failed) {
			split(key, k, "\t")
			printf "FAIL %d/%d\t%s (%s)\n", failed[key], ended[key], k[1], k[2]
		}
	}' | sort -t "$(printf '\t')" -k2
)

if [ -z "$summary" ]; then
	echo "stress: no failures in $n runs"
	exit 0
fi
echo "stress: tests that failed at least once in $n runs (logs in $dir):"
printf '%s\n' "$summary" | expand -t 12
exit 1
