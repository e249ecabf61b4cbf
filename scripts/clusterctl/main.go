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
//
// Both read the connection from the environment the script writes for
// clients: TEMPORAL_ADDRESS and the TEMPORAL_TLS_* paths (mTLS).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
	enumspb "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"
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
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// tlsFromEnv reads the client certificate, key and the server's CA from
// the TEMPORAL_TLS_* paths.
func tlsFromEnv() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(os.Getenv("TEMPORAL_TLS_CLIENT_CERT_PATH"), os.Getenv("TEMPORAL_TLS_CLIENT_KEY_PATH"))
	if err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	pem, err := os.ReadFile(os.Getenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH"))
	if err != nil {
		return nil, fmt.Errorf("server CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("server CA: no PEM certificate")
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool}, nil
}

// namespace registers the namespace, waiting for the frontend to answer
// (it does before the namespace registry is warm), or updates its
// retention when it exists.
func namespace(name string, retention time.Duration) error {
	tlsConfig, err := tlsFromEnv()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, err := client.NewNamespaceClient(client.Options{HostPort: os.Getenv("TEMPORAL_ADDRESS"),
		ConnectionOptions: client.ConnectionOptions{TLS: tlsConfig}})
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
	tlsConfig, err := tlsFromEnv()
	if err != nil {
		return nil, err
	}
	return client.DialContext(ctx, client.Options{HostPort: os.Getenv("TEMPORAL_ADDRESS"), Namespace: os.Getenv("TEMPORAL_NAMESPACE"),
		ConnectionOptions: client.ConnectionOptions{TLS: tlsConfig}})
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
	s := uiserver.NewServer(uioptions.WithConfigProvider(&uiconfig.Config{
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
		// payloads through, when the cluster seals them.
		Codec: uiconfig.Codec{Endpoint: os.Getenv("TROUPE_CLUSTER_CODEC")},
		// Plain HTTP on the bridge: cookies cannot be Secure.
		CORS:             uiconfig.CORS{CookieInsecure: true},
		HideLogs:         true,
		DisableNewsFetch: true,
	}))
	return s.Start()
}
