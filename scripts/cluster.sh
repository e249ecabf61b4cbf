#!/usr/bin/env bash
# A real Troupe deployment on this machine (issue 24, point 1):
#
#   scripts/cluster.sh up [--api-keys] bring everything up (idempotent: up twice is fine);
#                                      --api-keys: the server checks API keys (JWTs) too,
#                                      until an up without it
#   scripts/cluster.sh down [--purge]  stop everything; --purge deletes the state too
#   scripts/cluster.sh status          each part, up or down
#   scripts/cluster.sh kill-host N     kill -9 every process of host N, make its disk unreachable
#   scripts/cluster.sh restart-host N  give host N its disk back and start its worker again
#   scripts/cluster.sh env             print the environment a client uses
#
# What runs (root only: network namespaces, mounts):
#   - PostgreSQL 15 from Debian's package, its own instance under $STATE/pg
#     (not the system service), on 127.0.0.1:$PG_PORT; Temporal's schemas
#     (default store and SQL visibility) applied by temporal-sql-tool;
#   - a Temporal server built from go.temporal.io/server/cmd/server (the
#     version of go.mod), its four services in one process, on the bridge
#     address, its frontend requiring client certificates (mTLS); the
#     namespace $NAMESPACE with a retention; the Web UI (clusterctl ui);
#   - versitygw as the shared S3 store, bucket $BUCKET;
#   - the payload codec on: one AES-256 key (id $CODEC_KEY_ID) made by up,
#     copied into a key file (mode 0600) on each host's disk and one for
#     clients, so every worker and client seals what it sends through
#     Temporal; `troupe codec-server` on 127.0.0.1:$CODEC_PORT decodes for
#     the Web UI;
#   - with --api-keys, the server's JWT authorizer (Temporal's default
#     claim mapper and authorizer): a signing key and its JWKS made by up
#     ($STATE/jwt, read by the server as a file:// key source), an API key
#     (a JWT) minted for the client ($STATE/env's TEMPORAL_API_KEY), for each
#     host and for the Web UI, each with a role on the namespace alone; the
#     server's own services reach it through its internal frontend, whose
#     internode mTLS (a CA of its own) no client certificate passes;
#   - three hosts: network namespaces troupe-h1..3 on the bridge trpbr0,
#     10.77.24.11..13, each with its own hostname (a UTS namespace), its own
#     disk ($STATE/disks/hN, mounted at /mnt/host in a private mount
#     namespace that hides $STATE and /tmp), each running `troupe worker`:
#     with bwrap sandboxes, but host 3 with docker sandboxes, on a dockerd
#     of its own (started in its namespaces, its state on its disk, its
#     containers in the cgroup troupe-h3; the machine's dockerd stays hidden
#     from every host).
#
# The workers use the model of $STATE/worker.env: OPENAI_* of the
# environment `up` runs in (OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL,
# OPENAI_API), else each host's own offline scripted model. A change of
# them restarts the workers on the next `up`.
set -euo pipefail
# (No `cmd | grep -q` below: grep -q quits at its first match, cmd may die
# of SIGPIPE, and pipefail makes a found line look like a missing one.)

REPO=$(cd "$(dirname "$0")/.." && pwd)
STATE=${TROUPE_CLUSTER_DIR:-/var/lib/troupe-cluster}
TEMPORAL_VERSION=v1.32.1
NAMESPACE=troupe
RETENTION=72h
BUCKET=troupe
BRIDGE=trpbr0
NET=10.77.24
BRIDGE_IP=$NET.1
HOSTS=(1 2 3)
# The hosts whose worker runs docker sandboxes, on a dockerd of their own.
DOCKER_HOSTS=(3)
PG_PORT=17432
FRONTEND_PORT=17233
UI_PORT=18233
S3_PORT=17900
PGBIN=/usr/lib/postgresql/15/bin
S3_ACCESS=troupe-cluster
S3_SECRET_FILE=$STATE/s3/secret
CODEC_PORT=18234
INTERNAL_FRONTEND_PORT=17236
JWT=$STATE/jwt
# Present while the server checks API keys (up --api-keys).
API_KEYS_ON=$STATE/api-keys
# How long the API keys up mints are good for.
API_KEY_TTL=8760h
CODEC_KEY_ID=cluster1

export GOTOOLCHAIN=local
export GOFLAGS="${GOFLAGS:-} -tags=release"

log() { echo "cluster: $*" >&2; }
die() {
	echo "cluster: $*" >&2
	exit 1
}

[ "$(id -u)" = 0 ] || die "needs root (network namespaces, mounts, a postgres instance run as user postgres)"

# ---------------------------------------------------------------- helpers

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

wait_port() { # host port what [seconds]
	local i
	for ((i = 0; i < ${4:-60} * 10; i++)); do
		if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	die "$3 is not listening on $1:$2 after ${4:-60}s (log: $STATE/logs)"
}

stop_pidfile() { # pidfile
	local pid
	[ -f "$1" ] || return 0
	pid=$(cat "$1")
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$1"
}

client_env() { # the environment a client outside the hosts uses: KEY='value' lines (no value holds a ')
	local kv
	while IFS= read -r kv; do
		printf "%s='%s'\n" "${kv%%=*}" "${kv#*=}"
	done <<EOF
TEMPORAL_ADDRESS=$BRIDGE_IP:$FRONTEND_PORT
TEMPORAL_NAMESPACE=$NAMESPACE
TEMPORAL_TLS=true
TEMPORAL_TLS_CLIENT_CERT_PATH=$STATE/tls/client.pem
TEMPORAL_TLS_CLIENT_KEY_PATH=$STATE/tls/client-key.pem
TEMPORAL_TLS_SERVER_CA_CERT_PATH=$STATE/tls/ca.pem
TROUPE_BLOB_URL=s3://$BUCKET?endpoint=http://$BRIDGE_IP:$S3_PORT&region=us-east-1&use_path_style=true&disable_https=true
AWS_ACCESS_KEY_ID=$S3_ACCESS
AWS_SECRET_ACCESS_KEY=$(cat "$S3_SECRET_FILE")
AWS_REGION=us-east-1
AWS_EC2_METADATA_DISABLED=true
AWS_RESPONSE_CHECKSUM_VALIDATION=when_required
AWS_CONFIG_FILE=/dev/null
AWS_SHARED_CREDENTIALS_FILE=/dev/null
TROUPE_CODEC_KEY_FILE=$STATE/codec/client.keys
TROUPE_CLUSTER_UI=http://$BRIDGE_IP:$UI_PORT
TROUPE_CLUSTER_CODEC=http://127.0.0.1:$CODEC_PORT
EOF
	if api_keys; then printf "TEMPORAL_API_KEY='%s'\n" "$(cat "$JWT/client.token")"; fi
}

# ---------------------------------------------------------------- binaries

build_tools() {
	mkdir -p "$STATE/bin"
	if [ ! -x "$STATE/bin/temporal-server" ] || [ "$(cat "$STATE/bin/.temporal-version" 2>/dev/null)" != "$TEMPORAL_VERSION" ]; then
		log "building temporal-server and temporal-sql-tool $TEMPORAL_VERSION (go.mod's tools)"
		(cd "$REPO" && go build -o "$STATE/bin/temporal-server" go.temporal.io/server/cmd/server &&
			go build -o "$STATE/bin/temporal-sql-tool" go.temporal.io/server/cmd/tools/sql)
		echo "$TEMPORAL_VERSION" >"$STATE/bin/.temporal-version"
	fi
	# clusterctl and troupe: cheap when nothing changed (the build cache).
	(cd "$REPO" && go build -o "$STATE/bin/clusterctl" ./scripts/clusterctl && go build -o "$STATE/bin/troupe" ./cmd/troupe)
	[ -x "$REPO/tools/bin/versitygw" ] || (cd "$REPO" && scripts/setup.sh)
}

ensure_packages() {
	local missing=()
	[ -x "$PGBIN/postgres" ] || missing+=(postgresql)
	command -v openssl >/dev/null || missing+=(openssl)
	command -v bwrap >/dev/null || missing+=(bubblewrap)
	command -v ip >/dev/null || missing+=(iproute2)
	command -v unshare >/dev/null || missing+=(util-linux)
	if [ ${#DOCKER_HOSTS[@]} -gt 0 ]; then
		command -v dockerd >/dev/null || missing+=(docker.io)
		command -v debootstrap >/dev/null || missing+=(debootstrap)
	fi
	if [ ${#missing[@]} -gt 0 ]; then
		log "installing ${missing[*]} (apt)"
		# The package's own cluster service is not ours: leave it as Debian sets it.
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
	fi
}

# ---------------------------------------------------------------- certificates

make_certs() {
	local d=$STATE/tls
	mkdir -p "$d"
	[ -f "$d/ca.pem" ] && [ -f "$d/server.pem" ] && [ -f "$d/client.pem" ] && [ -f "$d/h3.pem" ] && return 0
	log "making certificates (a CA, the server's, the client's, one per host)"
	openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=troupe-cluster CA" \
		-keyout "$d/ca-key.pem" -out "$d/ca.pem" 2>/dev/null
	issue() { # name cn san
		openssl req -newkey rsa:2048 -nodes -subj "/CN=$2" -keyout "$d/$1-key.pem" -out "$d/$1.csr" 2>/dev/null
		printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$3" >"$d/$1.ext"
		openssl x509 -req -in "$d/$1.csr" -CA "$d/ca.pem" -CAkey "$d/ca-key.pem" -CAcreateserial -days 3650 \
			-extfile "$d/$1.ext" -out "$d/$1.pem" 2>/dev/null
		rm -f "$d/$1.csr" "$d/$1.ext"
	}
	issue server temporal "DNS:temporal,DNS:localhost,IP:$BRIDGE_IP,IP:127.0.0.1"
	issue client troupe-client "DNS:troupe-client"
	for n in "${HOSTS[@]}"; do issue "h$n" "troupe-h$n" "DNS:troupe-h$n"; done
	chmod 600 "$d"/*-key.pem
}

make_internode_certs() { # a CA of the server's services alone: no client certificate passes their mTLS
	local d=$STATE/tls
	[ -f "$d/internode-ca.pem" ] && [ -f "$d/internode.pem" ] && return 0
	log "making the internode certificates (a CA of the server's own services)"
	openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=troupe-cluster internode CA" \
		-keyout "$d/internode-ca-key.pem" -out "$d/internode-ca.pem" 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -subj "/CN=temporal" -keyout "$d/internode-key.pem" -out "$d/internode.csr" 2>/dev/null
	printf 'subjectAltName=DNS:temporal,IP:%s,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' "$BRIDGE_IP" >"$d/internode.ext"
	openssl x509 -req -in "$d/internode.csr" -CA "$d/internode-ca.pem" -CAkey "$d/internode-ca-key.pem" -CAcreateserial -days 3650 \
		-extfile "$d/internode.ext" -out "$d/internode.pem" 2>/dev/null
	rm -f "$d/internode.csr" "$d/internode.ext"
	chmod 600 "$d"/*-key.pem
}

# ---------------------------------------------------------------- API keys

jwt_up() { # the signing key, its JWKS, and the API keys of the client, the UI and each host
	mkdir -p "$JWT"
	chmod 700 "$JWT"
	"$STATE/bin/clusterctl" jwks "$JWT"
	mint() { # file subject permission...
		local f=$1
		shift
		(umask 077 && "$STATE/bin/clusterctl" token "$JWT" "$1" "$API_KEY_TTL" "${@:2}" >"$JWT/$f.new") && mv "$JWT/$f.new" "$JWT/$f"
	}
	# Each up mints them again. A key stays good until it expires: to
	# revoke keys, delete $JWT/jwt-key.pem and up again (a new signing key).
	mint admin.token troupe-cluster-admin temporal-system:admin
	mint client.token troupe-client "$NAMESPACE:write"
	mint ui.token troupe-web-ui "$NAMESPACE:read" temporal-system:read
	for n in "${HOSTS[@]}"; do mint "h$n.token" "troupe-h$n" "$NAMESPACE:write"; done
}

api_keys() { [ -f "$API_KEYS_ON" ]; }


# ---------------------------------------------------------------- payload keys

codec_keys() { # the cluster's payload key, and the clients' key file
	local d=$STATE/codec
	mkdir -p "$d"
	chmod 700 "$d"
	if [ ! -s "$d/keys" ]; then
		log "making the payload key (AES-256-GCM, id $CODEC_KEY_ID)"
		(umask 077 && printf '%s:%s\n' "$CODEC_KEY_ID" "$(openssl rand -base64 32)" >"$d/keys.new") && mv "$d/keys.new" "$d/keys"
	fi
	install -m 600 "$d/keys" "$d/client.keys"
}

codec_up() { # the codec server the Web UI decodes through, on loopback
	if ! pid_alive "$STATE/run/codec.pid"; then
		log "starting the codec server on http://127.0.0.1:$CODEC_PORT (for the Web UI)"
		(set -a && . "$STATE/env" && exec setsid "$STATE/bin/troupe.run" codec-server --addr "127.0.0.1:$CODEC_PORT" \
			--ui-origin "http://$BRIDGE_IP:$UI_PORT" >"$STATE/logs/codec.log" 2>&1 </dev/null) &
		echo $! >"$STATE/run/codec.pid"
	fi
	wait_port 127.0.0.1 "$CODEC_PORT" "the codec server"
}

# ---------------------------------------------------------------- postgres

pg_up() {
	local pg=$STATE/pg
	mkdir -p "$pg/run"
	if [ ! -f "$pg/data/PG_VERSION" ]; then
		log "initialising a postgres cluster in $pg/data"
		head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$pg/password"
		chown -R postgres:postgres "$pg"
		chmod 700 "$pg"
		runuser -u postgres -- "$PGBIN/initdb" -D "$pg/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 >"$STATE/logs/initdb.log"
	fi
	chown -R postgres:postgres "$pg"
	if ! runuser -u postgres -- "$PGBIN/pg_ctl" -D "$pg/data" status >/dev/null 2>&1; then
		log "starting postgres on 127.0.0.1:$PG_PORT"
		runuser -u postgres -- "$PGBIN/pg_ctl" -D "$pg/data" -l "$pg/postgres.log" -w -t 60 \
			-o "-p $PG_PORT -k $pg/run -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
	fi
	local pw
	pw=$(cat "$pg/password")
	runuser -u postgres -- psql -h "$pg/run" -p "$PG_PORT" -q -v ON_ERROR_STOP=1 -d postgres >/dev/null <<EOF
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'temporal') THEN
    CREATE ROLE temporal LOGIN CREATEDB PASSWORD '$pw';
  END IF;
END \$\$;
EOF
	local schemas
	schemas=$(cd "$REPO" && go list -m -f '{{.Dir}}' go.temporal.io/server)/schema/postgresql/v12
	for db in temporal temporal_visibility; do
		local kind=temporal
		[ "$db" = temporal_visibility ] && kind=visibility
		local sql=("$STATE/bin/temporal-sql-tool" --plugin postgres12 --ep 127.0.0.1 -p "$PG_PORT" -u temporal --pw "$pw" --db "$db")
		if ! grep -q 1 <<<"$(runuser -u postgres -- psql -h "$pg/run" -p "$PG_PORT" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$db'")"; then
			"${sql[@]}" create-database >>"$STATE/logs/schema.log" 2>&1
		fi
		if ! grep -q 1 <<<"$(runuser -u postgres -- psql -h "$pg/run" -p "$PG_PORT" -d "$db" -tAc "SELECT 1 FROM pg_tables WHERE tablename='schema_version'")"; then
			"${sql[@]}" setup-schema -v 0.0 >>"$STATE/logs/schema.log" 2>&1
		fi
		"${sql[@]}" update-schema -d "$schemas/$kind/versioned" >>"$STATE/logs/schema.log" 2>&1 ||
			die "update-schema of $db failed: $STATE/logs/schema.log"
	done
}

pg_down() {
	[ -f "$STATE/pg/data/PG_VERSION" ] || return 0
	if runuser -u postgres -- "$PGBIN/pg_ctl" -D "$STATE/pg/data" status >/dev/null 2>&1; then
		runuser -u postgres -- "$PGBIN/pg_ctl" -D "$STATE/pg/data" -m fast -w stop >/dev/null
	fi
}

# ---------------------------------------------------------------- temporal

temporal_config() {
	local t=$STATE/tls pw
	pw=$(cat "$STATE/pg/password")
	mkdir -p "$STATE/temporal"
	cat >"$STATE/temporal/dynamicconfig.yaml" <<EOF
# Written by scripts/cluster.sh.
limit.maxIDLength:
  - value: 255
# The session manager has one update in flight per caller; past this limit
# (10 by default) server v1.32.1 refuses an update and clears the
# workflow's cached state, and a burst of creates livelocks the manager
# (see runtime/devserver/config.go).
history.maxInFlightUpdates:
  - value: 1000
EOF
	cat >"$STATE/temporal/config.yaml" <<EOF
# Written by scripts/cluster.sh: edits are overwritten by the next up.
log:
  stdout: true
  level: warn
persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: 4
  datastores:
    postgres-default:
      sql:
        pluginName: postgres12
        databaseName: temporal
        connectAddr: "127.0.0.1:$PG_PORT"
        connectProtocol: tcp
        user: temporal
        password: "$pw"
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: 1h
    postgres-visibility:
      sql:
        pluginName: postgres12
        databaseName: temporal_visibility
        connectAddr: "127.0.0.1:$PG_PORT"
        connectProtocol: tcp
        user: temporal
        password: "$pw"
        maxConns: 4
        maxIdleConns: 4
        maxConnLifetime: 1h
global:
$(api_keys && cat <<EOT
  authorization:
    jwtKeyProvider:
      keySourceURIs: ["file://$JWT/jwks.json"]
      refreshInterval: 1m
    permissionsClaimName: permissions
    authorizer: default
    claimMapper: default
EOT
)
  membership:
    maxJoinDuration: 30s
    broadcastAddress: "$BRIDGE_IP"
  tls:
    internode:
      server:
        certFile: $t/internode.pem
        keyFile: $t/internode-key.pem
        requireClientAuth: true
        clientCaFiles: [$t/internode-ca.pem]
      client:
        serverName: temporal
        rootCaFiles: [$t/internode-ca.pem]
    frontend:
      server:
        certFile: $t/server.pem
        keyFile: $t/server-key.pem
        requireClientAuth: true
        clientCaFiles: [$t/ca.pem]
      client:
        serverName: temporal
        rootCaFiles: [$t/ca.pem]
    systemWorker:
      certFile: $t/server.pem
      keyFile: $t/server-key.pem
      client:
        serverName: temporal
        rootCaFiles: [$t/ca.pem]
services:
  frontend:
    rpc: {grpcPort: $FRONTEND_PORT, membershipPort: 17933, bindOnIP: "$BRIDGE_IP"}
  history:
    rpc: {grpcPort: 17234, membershipPort: 17934, bindOnIP: "$BRIDGE_IP"}
  matching:
    rpc: {grpcPort: 17235, membershipPort: 17935, bindOnIP: "$BRIDGE_IP"}
  worker:
    rpc: {grpcPort: 17239, membershipPort: 17939, bindOnIP: "$BRIDGE_IP"}
$(api_keys && cat <<EOT
  # The server's own calls (its worker service's) come here: internode
  # mTLS, taken as the system. The public frontend checks API keys.
  internal-frontend:
    rpc: {grpcPort: $INTERNAL_FRONTEND_PORT, membershipPort: 17936, bindOnIP: "$BRIDGE_IP"}
EOT
)
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "$BRIDGE_IP:$FRONTEND_PORT"
dcRedirectionPolicy:
  policy: noop
dynamicConfigClient:
  filepath: $STATE/temporal/dynamicconfig.yaml
  pollInterval: 10s
EOF
}

temporal_up() {
	temporal_config
	if ! pid_alive "$STATE/run/temporal.pid" || ! cmp -s "$STATE/temporal/config.yaml" "$STATE/temporal/config.running.yaml"; then
		stop_pidfile "$STATE/run/temporal.pid"
		log "starting the Temporal server ($TEMPORAL_VERSION) on $BRIDGE_IP:$FRONTEND_PORT"
		cp "$STATE/temporal/config.yaml" "$STATE/temporal/config.running.yaml"
		local flags=(--allow-no-auth start)
		if api_keys; then
			log "the server checks API keys (JWTs of $JWT/jwks.json); its services call its internal frontend on :$INTERNAL_FRONTEND_PORT"
			flags=(start --service frontend --service internal-frontend --service history --service matching --service worker)
		fi
		setsid "$STATE/bin/temporal-server" --config-file "$STATE/temporal/config.yaml" "${flags[@]}" \
			>"$STATE/logs/temporal.log" 2>&1 </dev/null &
		echo $! >"$STATE/run/temporal.pid"
	fi
	wait_port "$BRIDGE_IP" "$FRONTEND_PORT" "the Temporal frontend" 120
	local admin=
	if api_keys; then admin=$(cat "$JWT/admin.token"); fi
	(set -a && . "$STATE/env" && TEMPORAL_API_KEY=${admin:-${TEMPORAL_API_KEY:-}} "$STATE/bin/clusterctl" namespace "$NAMESPACE" "$RETENTION") ||
		die "namespace $NAMESPACE: see $STATE/logs/temporal.log"
	codec_up
	# The UI reads the client's environment at its start (the codec server's
	# address among it): started again when that changed.
	cmp -s "$STATE/env" "$STATE/run/ui.env" || stop_pidfile "$STATE/run/ui.pid"
	if ! pid_alive "$STATE/run/ui.pid"; then
		install -m 600 "$STATE/env" "$STATE/run/ui.env"
		log "starting the Web UI on http://$BRIDGE_IP:$UI_PORT"
		local uikey=
		if api_keys; then uikey=$(cat "$JWT/ui.token"); fi
		(set -a && . "$STATE/env" && TROUPE_CLUSTER_UI_KEY=$uikey exec setsid "$STATE/bin/clusterctl" ui "$BRIDGE_IP:$UI_PORT" \
			>"$STATE/logs/ui.log" 2>&1 </dev/null) &
		echo $! >"$STATE/run/ui.pid"
	fi
	wait_port "$BRIDGE_IP" "$UI_PORT" "the Web UI"
}

# ---------------------------------------------------------------- S3

s3_up() {
	mkdir -p "$STATE/s3/data/$BUCKET" "$STATE/s3/meta"
	[ -f "$S3_SECRET_FILE" ] || head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$S3_SECRET_FILE"
	if ! pid_alive "$STATE/run/versitygw.pid"; then
		log "starting versitygw on http://$BRIDGE_IP:$S3_PORT (bucket $BUCKET)"
		ROOT_ACCESS_KEY_ID=$S3_ACCESS ROOT_SECRET_ACCESS_KEY=$(cat "$S3_SECRET_FILE") setsid "$REPO/tools/bin/versitygw" \
			--port "$BRIDGE_IP:$S3_PORT" posix --sidecar "$STATE/s3/meta" "$STATE/s3/data" \
			>"$STATE/logs/versitygw.log" 2>&1 </dev/null &
		echo $! >"$STATE/run/versitygw.pid"
	fi
	wait_port "$BRIDGE_IP" "$S3_PORT" "versitygw"
}

# ---------------------------------------------------------------- network and hosts

net_up() {
	if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link add "$BRIDGE" type bridge
	fi
	grep -q "$BRIDGE_IP/24" <<<"$(ip addr show dev "$BRIDGE")" || ip addr add "$BRIDGE_IP/24" dev "$BRIDGE"
	ip link set "$BRIDGE" up
	for n in "${HOSTS[@]}"; do
		local ns=troupe-h$n veth=trph$n
		grep -qw "$ns" <<<"$(ip netns list)" || ip netns add "$ns"
		if ! ip link show "$veth" >/dev/null 2>&1; then
			ip link add "$veth" type veth peer name eth0 netns "$ns"
		fi
		ip link set "$veth" master "$BRIDGE" up
		ip -n "$ns" link set lo up
		grep -q "$NET.1$n/24" <<<"$(ip -n "$ns" addr show dev eth0)" || ip -n "$ns" addr add "$NET.1$n/24" dev eth0
		ip -n "$ns" link set eth0 up
		ip -n "$ns" route replace default via "$BRIDGE_IP"
	done
}

worker_env() { # the model environment of the workers, from up's own
	local k
	for k in OPENAI_API_KEY OPENAI_BASE_URL OPENAI_MODEL OPENAI_API; do
		[ -n "${!k:-}" ] && printf '%s=%q\n' "$k" "${!k}"
	done
	return 0
}

host_disk() { echo "$STATE/disks/h$1"; }

docker_host() { [[ " ${DOCKER_HOSTS[*]} " == *" $1 "* ]]; }

host_docker_sock() { echo "$(host_disk "$1")/docker/docker.sock"; }

docker_image() { # n: the sandbox image in host n's dockerd (made once: its disk keeps it)
	local n=$1 sock i
	sock=$(host_docker_sock "$n")
	for ((i = 0; i < 600; i++)); do
		if [ -S "$sock" ] && docker -H "unix://$sock" version >/dev/null 2>&1; then break; fi
		pid_alive "$STATE/run/h$n.pid" || die "host $n's dockerd or worker exited: $(tail -n 5 "$STATE/logs/h$n.log"; tail -n 5 "$(host_disk "$n")/docker/dockerd.log" 2>/dev/null)"
		sleep 0.1
	done
	[ -S "$sock" ] || die "host $n's dockerd does not answer on $sock: $(tail -n 5 "$(host_disk "$n")/docker/dockerd.log" 2>/dev/null)"
	if ! docker -H "unix://$sock" image inspect troupe-sandbox:debian >/dev/null 2>&1; then
		log "building the docker sandbox image in host $n's dockerd (debootstrap: about a minute, once)"
		"$STATE/bin/troupe.run" sandbox image build --docker-host "unix://$sock" >>"$STATE/logs/image-h$n.log" 2>&1 ||
			die "the sandbox image of host $n: see $STATE/logs/image-h$n.log"
	fi
}

host_up() { # n
	local n=$1 ns=troupe-h$1 disk engine=
	disk=$(host_disk "$n")
	docker_host "$n" && engine=docker
	[ -d "$disk.dead" ] && die "host $n is killed (its disk is at $disk.dead): use restart-host $n"
	mkdir -p "$disk/home" "$disk/tmp" "$disk/tls"
	install -m 600 "$STATE/codec/keys" "$disk/codec.keys"
	cp "$STATE/tls/ca.pem" "$disk/tls/ca.pem"
	cp "$STATE/tls/h$n.pem" "$disk/tls/client.pem"
	cp "$STATE/tls/h$n-key.pem" "$disk/tls/client-key.pem"
	{
		client_env | grep -v -e '^TEMPORAL_TLS_' -e '^TEMPORAL_API_KEY' -e '^TROUPE_CLUSTER_' -e '^TROUPE_CODEC_'
		if api_keys; then echo "TEMPORAL_API_KEY='$(cat "$JWT/h$n.token")'"; fi
		echo "TEMPORAL_TLS_CLIENT_CERT_PATH='/mnt/host/tls/client.pem'"
		echo "TEMPORAL_TLS_CLIENT_KEY_PATH='/mnt/host/tls/client-key.pem'"
		echo "TEMPORAL_TLS_SERVER_CA_CERT_PATH='/mnt/host/tls/ca.pem'"
		echo "TROUPE_CODEC_KEY_FILE='/mnt/host/codec.keys'"
		echo "TROUPE_HOME='/mnt/host/home'"
		echo "TMPDIR='/mnt/host/tmp'"
		if docker_host "$n"; then
			echo "TROUPE_SANDBOX='docker'"
			echo "DOCKER_HOST='unix:///mnt/host/docker/docker.sock'"
		else
			echo "TROUPE_SANDBOX='bwrap'"
		fi
		cat "$STATE/worker.env"
	} >"$disk/env.new"
	chmod 600 "$disk/env.new"
	if pid_alive "$STATE/run/h$n.pid" && cmp -s "$disk/env.new" "$disk/env"; then
		rm "$disk/env.new"
		return 0
	fi
	host_stop "$n"
	mv "$disk/env.new" "$disk/env"
	[ -f "$STATE/logs/h$n.log" ] && mv "$STATE/logs/h$n.log" "$STATE/logs/h$n.log.1"
	log "starting host $n: netns $ns, $NET.1$n, disk $disk, troupe worker"
	# A private mount namespace: the host's disk at /mnt/host, the cluster's
	# state (postgres, the CA's key, the other disks) and /tmp hidden. It
	# dies with the host's last process, so nothing stays mounted.
	setsid ip netns exec "$ns" unshare --mount --uts --propagation private -- /bin/sh -c '
		set -e
		hostname "troupe-h$1"
		mount -t tmpfs troupe-mnt /mnt
		mkdir /mnt/host
		mount --bind "$2" /mnt/host
		touch /mnt/troupe
		mount --bind "$4" /mnt/troupe
		mount -t tmpfs troupe-state "$3"
		mount -t tmpfs troupe-tmp /tmp
		# The machine'"'"'s dockerd runs outside the host'"'"'s network and
		# mount namespaces (it could not see /mnt/host to bind a
		# workspace): its socket is hidden. A docker host runs its own.
		if [ -S /run/docker.sock ]; then mount --bind /dev/null /run/docker.sock; fi
		if [ "$5" = docker ]; then
			# A dockerd of the host'"'"'s own. `ip netns exec` gave this
			# namespace a fresh /sys: mount the machine'"'"'s cgroup
			# hierarchies again, as they are.
			if awk '"'"'$2 == "/sys/fs/cgroup" && $3 == "cgroup2" { f = 1 } END { exit !f }'"'"' /proc/1/mounts; then
				mount -t cgroup2 cgroup2 /sys/fs/cgroup
			else
				mount -t tmpfs troupe-cgroup /sys/fs/cgroup
				awk '"'"'$3 == "cgroup" && $2 ~ "^/sys/fs/cgroup/" { print $2, $4 }'"'"' /proc/1/mounts |
					while read -r dir opts; do mkdir -p "$dir" && mount -t cgroup -o "$opts" cgroup "$dir"; done
			fi
			mkdir -p /mnt/host/docker
			dockerd --data-root /mnt/host/docker/data --exec-root /mnt/host/docker/run --pidfile /mnt/host/docker/docker.pid \
				-H unix:///mnt/host/docker/docker.sock --bridge none --iptables=false --ip6tables=false --ip-masq=false \
				--cgroup-parent "troupe-h$1" >/mnt/host/docker/dockerd.log 2>&1 </dev/null &
		fi
		cd /mnt/host
		set -a
		. /mnt/host/env
		set +a
		exec /mnt/troupe worker
	' sh "$n" "$disk" "$STATE" "$STATE/bin/troupe.run" "$engine" >"$STATE/logs/h$n.log" 2>&1 </dev/null &
	echo $! >"$STATE/run/h$n.pid"
	if [ -n "$engine" ]; then docker_image "$n"; fi
}

host_stop() { # n: every process of the host, then its pid file
	local n=$1 pids
	pids=$(ip netns pids "troupe-h$n" 2>/dev/null || true)
	[ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
	stop_pidfile "$STATE/run/h$n.pid"
	for _ in $(seq 50); do
		[ -z "$(ip netns pids "troupe-h$n" 2>/dev/null || true)" ] && break
		sleep 0.1
	done
	# A container has a network namespace of its own: not among the host's
	# pids, but in its dockerd's cgroup parent.
	host_cgroup_procs() { find /sys/fs/cgroup -path "*/troupe-h$n/*" -name cgroup.procs -exec cat {} + 2>/dev/null || true; }
	pids=$(host_cgroup_procs)
	if [ -n "$pids" ]; then
		kill -9 $pids 2>/dev/null || true
		for _ in $(seq 50); do
			[ -z "$(host_cgroup_procs)" ] && break
			sleep 0.1
		done
	fi
	find /sys/fs/cgroup -depth -type d \( -path "*/troupe-h$n" -o -path "*/troupe-h$n/*" \) -exec rmdir {} + 2>/dev/null || true
}

hosts_wait() { # every live host's worker polls the task queue (so it passed its start-up checks)
	local n who=()
	for n in "${HOSTS[@]}"; do
		[ -d "$(host_disk "$n").dead" ] && continue
		pid_alive "$STATE/run/h$n.pid" || die "host $n's worker exited: $(tail -n 5 "$STATE/logs/h$n.log")"
		who+=("$(cat "$STATE/run/h$n.pid")@troupe-h$n")
	done
	[ ${#who[@]} -gt 0 ] || return 0
	(set -a && . "$STATE/env" && "$STATE/bin/clusterctl" wait-pollers troupe "${who[@]}") ||
		die "a worker does not poll: $(for n in "${HOSTS[@]}"; do tail -n 2 "$STATE/logs/h$n.log" 2>/dev/null; done)"
}

# ---------------------------------------------------------------- commands

cmd_up() {
	mkdir -p "$STATE/logs" "$STATE/run" "$STATE/disks"
	case "${1:-}" in
	--api-keys) touch "$API_KEYS_ON" ;;
	"") rm -f "$API_KEYS_ON" ;;
	*) die "usage: scripts/cluster.sh up [--api-keys]" ;;
	esac
	chmod 755 "$STATE"
	trap 'if [ -z "${UP_DONE:-}" ]; then log "up failed: cleaning up (down)"; cmd_down >/dev/null 2>&1 || true; fi' EXIT
	ensure_packages
	build_tools
	# A running worker keeps its binary: a fresh copy for each start.
	cp "$STATE/bin/troupe" "$STATE/bin/troupe.run.new" && mv "$STATE/bin/troupe.run.new" "$STATE/bin/troupe.run"
	make_certs
	make_internode_certs
	codec_keys
	net_up
	pg_up
	s3_up
	if api_keys; then jwt_up; fi
	# Secrets inside (the S3 key, the API key): for root alone.
	(umask 077 && client_env >"$STATE/env.new") && mv "$STATE/env.new" "$STATE/env"
	temporal_up
	worker_env >"$STATE/worker.env"
	if ! cmp -s "$STATE/worker.env" "$STATE/worker.env.running"; then
		# Another model or store: troupe refuses to serve a queue beside a
		# worker with other settings, and the server lists a stopped worker's
		# polls for a while. Stop them all, and wait until theirs are stale.
		log "the workers' model settings changed: restarting them all (waiting up to 75 s for the old ones' polls to go stale)"
		for n in "${HOSTS[@]}"; do host_stop "$n"; done
		(set -a && . "$STATE/env" && "$STATE/bin/clusterctl" wait-stale troupe "@troupe-h")
		cp "$STATE/worker.env" "$STATE/worker.env.running"
	fi
	for n in "${HOSTS[@]}"; do
		[ -d "$(host_disk "$n").dead" ] && { log "host $n is killed: left down (restart-host $n)"; continue; }
		host_up "$n"
	done
	hosts_wait
	UP_DONE=1
	echo "# Troupe cluster: a client's environment (also in $STATE/env; set -a; . $STATE/env)"
	cat "$STATE/env"
}

cmd_down() {
	local n purge=${1:-}
	for n in "${HOSTS[@]}"; do
		host_stop "$n"
		ip netns del "troupe-h$n" 2>/dev/null || true
		ip link del "trph$n" 2>/dev/null || true
	done
	stop_pidfile "$STATE/run/ui.pid"
	stop_pidfile "$STATE/run/codec.pid"
	stop_pidfile "$STATE/run/temporal.pid"
	stop_pidfile "$STATE/run/versitygw.pid"
	pg_down
	ip link del "$BRIDGE" 2>/dev/null || true
	if [ "$purge" = --purge ]; then
		rm -rf "$STATE"
		log "down; state deleted"
	else
		log "down (state kept in $STATE; down --purge deletes it)"
	fi
}

cmd_status() {
	local ok=0 n
	part() { # name up?
		if eval "$2"; then printf '%-12s up    %s\n' "$1" "$3"; else printf '%-12s DOWN  %s\n' "$1" "$3"; ok=1; fi
	}
	part postgres "runuser -u postgres -- $PGBIN/pg_isready -q -h 127.0.0.1 -p $PG_PORT 2>/dev/null" "127.0.0.1:$PG_PORT, data $STATE/pg/data"
	local auth="mTLS"
	if api_keys; then auth="mTLS and API keys"; fi
	part temporal "pid_alive $STATE/run/temporal.pid && (exec 3<>/dev/tcp/$BRIDGE_IP/$FRONTEND_PORT) 2>/dev/null" "$BRIDGE_IP:$FRONTEND_PORT ($auth), namespace $NAMESPACE"
	part web-ui "pid_alive $STATE/run/ui.pid" "http://$BRIDGE_IP:$UI_PORT"
	part codec "pid_alive $STATE/run/codec.pid" "http://127.0.0.1:$CODEC_PORT (decodes for the Web UI; key $CODEC_KEY_ID)"
	part s3 "pid_alive $STATE/run/versitygw.pid" "http://$BRIDGE_IP:$S3_PORT bucket $BUCKET"
	part bridge "ip link show $BRIDGE >/dev/null 2>&1" "$BRIDGE $BRIDGE_IP/24"
	for n in "${HOSTS[@]}"; do
		local note="netns troupe-h$n $NET.1$n, disk $(host_disk "$n")"
		[ -d "$(host_disk "$n").dead" ] && note="KILLED: disk moved to $(host_disk "$n").dead"
		docker_host "$n" && note="$note, docker sandboxes (its own dockerd)"
		part "host-$n" "pid_alive $STATE/run/h$n.pid" "$note"
	done
	return $ok
}

cmd_kill_host() {
	local n=$1 disk
	disk=$(host_disk "$n")
	grep -qw "troupe-h$n" <<<"$(ip netns list)" || die "no host $n"
	host_stop "$n"
	if [ -d "$disk" ]; then
		mv "$disk" "$disk.dead"
		chmod 000 "$disk.dead"
	fi
	log "host $n killed: no process left in netns troupe-h$n, disk moved to $disk.dead (mode 000)"
}

cmd_restart_host() {
	local n=$1 disk
	disk=$(host_disk "$n")
	# A worker started with the cluster down would retry its server for
	# ever: refuse, and leave the host as it was.
	[ -f "$STATE/env" ] || die "the cluster is not up: scripts/cluster.sh up"
	pid_alive "$STATE/run/temporal.pid" || die "the cluster is down (its Temporal server is not running): scripts/cluster.sh up, which restarts the hosts not killed; then restart-host $n"
	grep -qw "troupe-h$n" <<<"$(ip netns list)" || die "host $n has no network namespace (the cluster is down): scripts/cluster.sh up"
	if [ -d "$disk.dead" ]; then
		chmod 755 "$disk.dead"
		mv "$disk.dead" "$disk"
	fi
	host_up "$n"
	hosts_wait
	log "host $n restarted"
}

case "${1:-}" in
up) cmd_up "${2:-}" ;;
down) cmd_down "${2:-}" ;;
status) cmd_status ;;
env) cat "$STATE/env" ;;
kill-host) [ -n "${2:-}" ] || die "usage: kill-host N"; cmd_kill_host "$2" ;;
restart-host) [ -n "${2:-}" ] || die "usage: restart-host N"; cmd_restart_host "$2" ;;
*) die "usage: scripts/cluster.sh up [--api-keys]|down [--purge]|status|env|kill-host N|restart-host N" ;;
esac
