package cli

// `troupe codec-server`: the payload codec of TROUPE_CODEC_* over HTTP,
// for the Temporal Web UI and the temporal CLI, which read histories
// without Troupe's keys. `troupe dev` runs one beside its UI when keys are
// set.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/codec"
)

// envCodecToken is the bearer token of `troupe codec-server` when --token
// is not given.
const envCodecToken = "TROUPE_CODEC_TOKEN"

// defaultCodecAddr is where `troupe codec-server` listens by default: the
// port after the Web UI's of `troupe dev`.
const defaultCodecAddr = "127.0.0.1:8234"

func codecServerCommand() *cobra.Command {
	var (
		addr, token string
		origins     []string
		insecureNA  bool
	)
	cmd := &cobra.Command{
		Use:   "codec-server [--addr ADDR] [--ui-origin URL]... [--token TOKEN | --insecure-no-auth]",
		Short: "Serve the payload codec (TROUPE_CODEC_*) over HTTP, so the Temporal Web UI and the temporal CLI show payloads decrypted",
		Long: `Serve the payload codec of TROUPE_CODEC_KEY_FILE, TROUPE_CODEC_KEYS and
TROUPE_CODEC_KEY_ID over HTTP: POST /decode and /encode, as the Temporal Web UI
and the temporal CLI call a codec endpoint.

  Web UI        set the UI's codec endpoint (ui-server config codec.endpoint,
                or the UI's "Data Encoder" setting) to http://ADDR, and pass
                the UI's origin with --ui-origin: a browser page of any other
                origin is refused. troupe dev does all this by itself.
  temporal CLI  temporal workflow show -w ID --codec-endpoint http://ADDR
                [--codec-auth "Bearer TOKEN"]

Whoever reaches the server reads every payload it decodes: on an address that
is not loopback it needs --token (or $` + envCodecToken + `), which every request
must carry as "Authorization: Bearer TOKEN", or --insecure-no-auth.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if token == "" {
				token = os.Getenv(envCodecToken)
			}
			if token == "" && !loopbackListenAddr(addr) {
				if !insecureNA {
					return usage(fmt.Errorf("--addr %s is not a loopback address: set --token (or $%s) so that only clients with it get in, "+
						"or pass --insecure-no-auth to decode for anyone who can connect", addr, envCodecToken))
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "troupe: warning: serving the codec on %s without a token (--insecure-no-auth): anyone who can connect can decrypt payloads\n", addr)
			}
			c, err := payloadCodec()
			if err != nil {
				return err
			}
			if len(c.KeyIDs()) == 0 {
				return usage(fmt.Errorf("no payload keys: set %s or %s (see troupe codec-server --help)", codec.EnvKeyFile, codec.EnvKeys))
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("codec server: %w", err)
			}
			auth := "no token"
			if token != "" {
				auth = "bearer token required"
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "troupe: codec server at http://%s (%s; keys %s, active %s); Web UI origins: %s\n",
				ln.Addr(), auth, strings.Join(c.KeyIDs(), ", "), c.ActiveKey(), strings.Join(origins, ", "))
			return serveCodec(cmd.Context(), ln, c.Handler(codec.HandlerOptions{Origins: origins, Token: token}))
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", defaultCodecAddr, "address to listen on")
	f.StringArrayVar(&origins, "ui-origin", []string{"http://127.0.0.1:8233", "http://localhost:8233"},
		"origin (scheme://host:port) of a Web UI whose pages may call the server (repeatable)")
	f.StringVar(&token, "token", "", "bearer token every request must carry (default $"+envCodecToken+")")
	f.BoolVar(&insecureNA, "insecure-no-auth", false, "on an address that is not loopback: serve without a token")
	return cmd
}

// serveCodec serves h on ln until ctx is done.
func serveCodec(ctx context.Context, ln net.Listener, h http.Handler) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("codec server: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		return nil
	}
}

// devCodec is the codec server of `troupe dev`: on loopback, for the Web
// UI of the dev server only.
type devCodec struct {
	ln   net.Listener
	done chan error
	stop context.CancelFunc
}

// listenDevCodec listens for the dev server's codec server on port of
// loopback (0: any free port), when c has keys; nil otherwise.
func listenDevCodec(c *codec.Codec, port int) (*devCodec, error) {
	if len(c.KeyIDs()) == 0 || port < 0 {
		return nil, nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", fmt.Sprint(port)))
	if err != nil {
		return nil, fmt.Errorf("codec server for the Web UI (--codec-port): %w", err)
	}
	return &devCodec{ln: ln}, nil
}

// endpoint is the codec server's URL, "" for none.
func (d *devCodec) endpoint() string {
	if d == nil {
		return ""
	}
	return "http://" + d.ln.Addr().String()
}

// serve serves c to the pages of the Web UI at uiURL.
func (d *devCodec) serve(c *codec.Codec, uiURL string) {
	if d == nil {
		return
	}
	origins := []string{uiURL}
	if host, port, err := net.SplitHostPort(strings.TrimPrefix(uiURL, "http://")); err == nil && net.ParseIP(host).IsLoopback() {
		origins = append(origins, "http://localhost:"+port)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.stop, d.done = cancel, make(chan error, 1)
	go func() { d.done <- serveCodec(ctx, d.ln, c.Handler(codec.HandlerOptions{Origins: origins})) }()
}

// close stops the codec server.
func (d *devCodec) close(stderr io.Writer) {
	if d == nil {
		return
	}
	if d.stop == nil {
		d.ln.Close()
		return
	}
	d.stop()
	if err := <-d.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "troupe: %v\n", err)
	}
}
