#!/usr/bin/env bash
# Installs what Troupe's builds and tests need, idempotently: the Go
# modules. Later issues add docker.io, bubblewrap and npm packages here.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
if ! command -v go >/dev/null; then
	echo "setup: Go 1.26 is required (https://go.dev/dl); GOTOOLCHAIN=local" >&2
	exit 1
fi
go mod download
