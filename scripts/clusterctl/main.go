// Command clusterctl is the Go half of scripts/cluster.sh: what the script
// needs from Temporal's Go packages and no shell tool gives, since the
// temporal CLI cannot be installed here.
//
//	clusterctl namespace NAME RETENTION   registers NAME with RETENTION (a Go
//	                                      duration), or updates its retention
//	clusterctl ui LISTEN                  serves the Temporal Web UI on LISTEN
//	                                      (host:port) until killed, decoding
//	                                      payloads through the codec server of
//	                                      TROUPE_CLUSTER_CODEC when set
//	clusterctl wait-pollers QUEUE WHO...  waits (up to 90 s) until a worker whose
//	                                      identity starts with each WHO ("pid@host")
//	                                      polls QUEUE: a worker that is up and passed
//	                                      its start-up checks
//	clusterctl wait-stale QUEUE PART      waits (up to 2 min) until no poller of
//	                                      QUEUE whose identity holds PART polled
//	                                      in the last 75 s: what troupe's
//	                                      start-up check counts as a live worker
//	clusterctl jwks DIR                   makes the cluster's token signing key
//	                                      (DIR/jwt-key.pem, RSA, mode 0600) unless
//	                                      it exists, and writes its public half as
//	                                      a JWKS (DIR/jwks.json), which the server's
//	                                      JWT claim mapper reads
//	clusterctl token DIR SUBJECT TTL PERMISSION...
//	                                      prints a JWT for SUBJECT with the
//	                                      permissions ("NAMESPACE:ROLE", role read,
//	                                      write, worker or admin; temporal-system
//	                                      for the whole cluster), valid for TTL (a
//	                                      Go duration), signed with DIR's key: an
//	                                      API key (TEMPORAL_API_KEY)
//
// They read the connection as every troupe command does
// (troupeclient.Connection: the environment the script writes for
// clients, TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, the TEMPORAL_TLS_* paths
// of mTLS, TEMPORAL_API_KEY when the server checks API keys, or a profile
// of temporal.toml), with the payload codec of TROUPE_CODEC_KEY_FILE /
// TROUPE_CODEC_KEYS / TROUPE_CODEC_KEY_ID when the cluster seals payloads.
// ui points the Web UI at the codec server of TROUPE_CLUSTER_CODEC (or
// TEMPORAL_CODEC_ENDPOINT), when set (troupe codec-server, with
// --ui-origin the UI's address), talks to the frontend over the
// TEMPORAL_TLS_* files (the UI server takes paths) and sends
// TROUPE_CLUSTER_UI_KEY as its API key.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/labstack/echo/v4"
	uiserver "github.com/temporalio/ui-server/v2/server"
	uiapi "github.com/temporalio/ui-server/v2/server/api"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
	enumspb "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	troupeclient "github.com/troupe-dev/troupe/client"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "clusterctl:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: clusterctl namespace NAME RETENTION | ui LISTEN")
	}
	switch args[0] {
	case "namespace":
		if len(args) != 3 {
			return errors.New("usage: clusterctl namespace NAME RETENTION")
		}
		retention, err := time.ParseDuration(args[2])
		if err != nil {
			return fmt.Errorf("retention: %w", err)
		}
		return namespace(args[1], retention)
	case "ui":
		if len(args) != 2 {
			return errors.New("usage: clusterctl ui LISTEN")
		}
		return ui(args[1])
	case "wait-pollers":
		if len(args) < 3 {
			return errors.New("usage: clusterctl wait-pollers QUEUE WHO...")
		}
		return waitPollers(args[1], args[2:])
	case "wait-stale":
		if len(args) != 3 {
			return errors.New("usage: clusterctl wait-stale QUEUE PART")
		}
		return waitStale(args[1], args[2])
	case "jwks":
		if len(args) != 2 {
			return errors.New("usage: clusterctl jwks DIR")
		}
		return makeJWKS(args[1])
	case "token":
		if len(args) < 5 {
			return errors.New("usage: clusterctl token DIR SUBJECT TTL PERMISSION...")
		}
		ttl, err := time.ParseDuration(args[3])
		if err != nil || ttl <= 0 {
			return fmt.Errorf("TTL %q: want a Go duration such as 720h", args[3])
		}
		token, err := mintToken(args[1], args[2], ttl, args[4:], time.Now())
		if err != nil {
			return err
		}
		fmt.Println(token)
		return nil
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// resolve resolves the connection of the environment as troupe does,
// codec included.
func resolve() (client.Options, error) {
	res, err := troupeclient.Connection{}.Resolve()
	if err != nil {
		return client.Options{}, err
	}
	if res.Options.HostPort == "" {
		return client.Options{}, errors.New("no Temporal server named: set TEMPORAL_ADDRESS (the environment cluster.sh writes) or a profile")
	}
	return res.Options, nil
}

// namespace registers the namespace, waiting for the frontend to answer
// (it does before the namespace registry is warm), or updates its
// retention when it exists.
func namespace(name string, retention time.Duration) error {
	opts, err := resolve()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, err := client.NewNamespaceClient(opts)
	if err != nil {
		return err
	}
	defer nc.Close()
	for {
		err = nc.Register(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: name,
			WorkflowExecutionRetentionPeriod: durationpb.New(retention)})
		var exists *serviceerror.NamespaceAlreadyExists
		if errors.As(err, &exists) {
			return nc.Update(ctx, &workflowservice.UpdateNamespaceRequest{Namespace: name,
				Config: &namespacepb.NamespaceConfig{WorkflowExecutionRetentionTtl: durationpb.New(retention)}})
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("register namespace %s: %w", name, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// dial dials the frontend of the environment's namespace.
func dial(ctx context.Context) (client.Client, error) {
	opts, err := resolve()
	if err != nil {
		return nil, err
	}
	return client.DialContext(ctx, opts)
}

// pollerFresh is troupe's (cli/runs.go): a worker whose last poll is more
// recent counts as up in its start-up checks.
const pollerFresh = 75 * time.Second

// waitStale waits until the pollers whose identity holds part are no
// longer fresh: workers stopped to change their model or store, which the
// new ones would otherwise refuse to serve the queue beside.
func waitStale(queue, part string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for {
		resp, err := c.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		fresh := 0
		for _, p := range resp.GetPollers() {
			if strings.Contains(p.GetIdentity(), part) && time.Since(p.GetLastAccessTime().AsTime()) < pollerFresh {
				fresh++
			}
		}
		if err == nil && fresh == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pollers of %s holding %q still fresh: %d (last error: %v)", queue, part, fresh, err)
		case <-time.After(time.Second):
		}
	}
}

// waitPollers waits until each of who polls the workflow task queue.
func waitPollers(queue string, who []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for {
		missing := slices.Clone(who)
		resp, err := c.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		if err == nil {
			for _, p := range resp.GetPollers() {
				missing = slices.DeleteFunc(missing, func(w string) bool { return strings.HasPrefix(p.GetIdentity(), w+" ") })
			}
			if len(missing) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no poller on %s for %v (last error: %v)", queue, missing, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ui serves the Web UI, talking to the frontend over mTLS.
func ui(listen string) error {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return err
	}
	var opts []uioptions.ServerOption
	if key := os.Getenv("TROUPE_CLUSTER_UI_KEY"); key != "" {
		// The server checks API keys: the UI's calls carry its own, as
		// the SDK sends one (authorization: Bearer KEY).
		opts = append(opts, uioptions.WithAPIMiddleware([]uiapi.Middleware{func(echo.Context) runtime.ServeMuxOption {
			return runtime.WithMetadata(func(context.Context, *http.Request) metadata.MD {
				return metadata.Pairs("authorization", "Bearer "+key)
			})
		}}))
	}
	s := uiserver.NewServer(append(opts, uioptions.WithConfigProvider(&uiconfig.Config{
		Host:                host,
		Port:                port,
		TemporalGRPCAddress: os.Getenv("TEMPORAL_ADDRESS"),
		EnableUI:            true,
		DefaultNamespace:    os.Getenv("TEMPORAL_NAMESPACE"),
		TLS: uiconfig.TLS{
			CaFile:   os.Getenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH"),
			CertFile: os.Getenv("TEMPORAL_TLS_CLIENT_CERT_PATH"),
			KeyFile:  os.Getenv("TEMPORAL_TLS_CLIENT_KEY_PATH"),
		},
		// The codec server (troupe codec-server) the UI's pages decode
		// payloads through, when the cluster seals them: the UI never
		// holds the keys.
		Codec: uiconfig.Codec{Endpoint: cmp.Or(os.Getenv("TROUPE_CLUSTER_CODEC"), os.Getenv("TEMPORAL_CODEC_ENDPOINT"))},
		// Plain HTTP on the bridge: cookies cannot be Secure.
		CORS:             uiconfig.CORS{CookieInsecure: true},
		HideLogs:         true,
		DisableNewsFetch: true,
	}))...)
	return s.Start()
}
