package devserver

// The Temporal Web UI (github.com/temporalio/ui-server), served from this process and
// talking to the frontend over gRPC.

import (
	"context"
	"fmt"
	"net"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
)

func (s *Server) startUI(ctx context.Context, r *resolved) error {
	// The UI server exits the process (log.Fatal) when it cannot bind, so bind-test first.
	if err := checkFree(r.ip, r.uiPort, "web UI"); err != nil {
		return err
	}
	addr := hostPort(r.ip, r.uiPort)
	ui := uiserver.NewServer(uioptions.WithConfigProvider(&uiconfig.Config{
		Host:                r.ip,
		Port:                r.uiPort,
		TemporalGRPCAddress: s.frontend,
		EnableUI:            true,
		DefaultNamespace:    r.namespace,
		// Plain HTTP on loopback: cookies cannot be Secure.
		CORS:     uiconfig.CORS{CookieInsecure: true},
		HideLogs: true,
		// No network calls out of a dev machine.
		DisableNewsFetch: true,
		Codec:            uiconfig.Codec{Endpoint: r.codec},
	}))
	s.ui = ui
	s.uiDone = make(chan struct{})
	go func() {
		defer close(s.uiDone)
		_ = ui.Start() // Blocks until Stop; returns nil then.
	}()
	if err := waitForListener(ctx, addr); err != nil {
		return fmt.Errorf("devserver: web UI at %s: %w", addr, err)
	}
	s.uiURL = "http://" + addr
	return nil
}

func waitForListener(ctx context.Context, addr string) error {
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not listening: %w (last error: %w)", ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
