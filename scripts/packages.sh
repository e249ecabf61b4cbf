#!/usr/bin/env bash
# Prints the module's packages, one a line, split by whether their tests
# need the embedded Temporal server:
#   scripts/packages.sh noserver   packages whose code and tests import
#                                  neither runtime/devserver nor
#                                  go.temporal.io/server: fast, run with -race
#   scripts/packages.sh server     the others (e2e, bench, runtime/devserver,
#                                  cli, ...): slow to build and run, no -race
# The split comes from `go list -test`, so a package moves by itself when
# its imports (or its tests' imports) change.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local

case "${1:-}" in
noserver | server) ;;
*)
	echo "usage: $0 noserver|server" >&2
	exit 2
	;;
esac

module=$(go list -m)
# One line per package, test variant and test main: the package under test
# (ForTest, or the test main's path without .test), then every dependency.
# A package needs the server when any of its lines does.
go list -test -f '{{if .ForTest}}{{.ForTest}}{{else}}{{.ImportPath}}{{end}} {{join .Deps " "}}' ./... |
	awk -v want="$1" -v devserver="$module/runtime/devserver" '
	{
		pkg = $1
		sub(/\.test$/, "", pkg)
		if (!(pkg in server)) {
			server[pkg] = 0
			order[++n] = pkg
		}
		for (i = 2; i <= NF; i++) {
			if ($i == devserver || $i == "go.temporal.io/server" || index($i, "go.temporal.io/server/") == 1) {
				server[pkg] = 1
				break
			}
		}
	}
	END {
		for (i = 1; i <= n; i++) {
			pkg = order[i]
			if ((want == "server") == (server[pkg] == 1)) print pkg
		}
	}'
