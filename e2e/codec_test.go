package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	workflowservice "go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/troupe-dev/troupe"
	troupeclient "github.com/troupe-dev/troupe/client"
	"github.com/troupe-dev/troupe/codec"
	"github.com/troupe-dev/troupe/runtime/devserver"
)

// envMap is an environment for troupeclient.Connection.Env.
type envMap map[string]string

func (e envMap) Environ() []string {
	var out []string
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}

func (e envMap) LookupEnv(k string) (string, bool) { v, ok := e[k]; return v, ok }

// codecKey is a fresh key, as TROUPE_CODEC_KEYS takes it.
func codecKey(t *testing.T, id string) string {
	t.Helper()
	k := make([]byte, codec.KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return id + ":" + base64.StdEncoding.EncodeToString(k)
}

// devUp is a `troupe dev` of the test: its home, its frontend, and (with
// keys) its Web UI and codec server.
type devUp struct {
	proc          *troupeProc
	home, addr    string
	uiURL, codecs string
}

var (
	uiLine    = regexp.MustCompile(`Web UI:\s+(http://\S+)`)
	codecLine = regexp.MustCompile(`the Web UI decodes them through (http://\S+)`)
)

// startDev runs `troupe dev` with keys (TROUPE_CODEC_KEYS; none when
// empty), the vault graph and bwrap sandboxes.
func startDev(t *testing.T, name, keys string) devUp {
	t.Helper()
	d := devUp{home: t.TempDir(), addr: "127.0.0.1:" + strconv.Itoa(freePort(t))}
	env := []string{"TROUPE_HOME=" + d.home, envCLIPlod + "=1"}
	args := []string{"dev", "--port", strings.TrimPrefix(d.addr, "127.0.0.1:"), "--ui-port", "-1"}
	if keys != "" {
		env = append(env, "TROUPE_CODEC_KEYS="+keys)
		args = []string{"dev", "--port", strings.TrimPrefix(d.addr, "127.0.0.1:"), "--ui-port", strconv.Itoa(freePort(t)), "--codec-port", "0"}
	}
	d.proc = startTroupe(t, name, env, "export TEMPORAL_ADDRESS=", args...)
	log := d.proc.log.String()
	if m := uiLine.FindStringSubmatch(log); m != nil {
		d.uiURL = m[1]
	}
	if m := codecLine.FindStringSubmatch(log); m != nil {
		d.codecs = m[1]
	}
	return d
}

// codecClient is a run client of d's server with keys, resolved as every
// troupe command resolves its connection.
func codecClient(t *testing.T, d devUp, keys string) *troupeclient.Client {
	t.Helper()
	return codecClientOn(t, d, keys, "")
}

// codecClientOn is codecClient starting runs on queue.
func codecClientOn(t *testing.T, d devUp, keys, queue string) *troupeclient.Client {
	t.Helper()
	res, err := troupeclient.Connection{Address: d.addr, Env: envMap{"TROUPE_CODEC_KEYS": keys, "TEMPORAL_CONFIG_FILE": filepath.Join(t.TempDir(), "none.toml")}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	res.Options.Logger = quiet()
	tc, err := client.Dial(res.Options)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	c, err := troupeclient.New(troupeclient.Config{Temporal: tc, TaskQueue: queue, DataConverter: res.Options.DataConverter})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runVault runs the vault graph with canaryPrompt and approves its grant,
// checking that the approval shows its argument to a client with the key.
func runVault(t *testing.T, c *troupeclient.Client) (*troupeclient.Run, *troupe.RunResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hang detector
	defer cancel()
	run, err := c.Start(ctx, troupe.RunInput{Graph: "vault", Input: canaryPrompt})
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		as, err := run.Approvals(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(as) > 0 {
			if !strings.Contains(string(as[0].Arguments), canaryApproval) {
				t.Errorf("the approval asks about %s, want the grant of %s", as[0].Arguments, canaryApproval)
			}
			if _, err := run.Decide(ctx, troupeclient.Decision{ID: as[0].ID, Approve: true}); err != nil {
				t.Fatal(err)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the grant never waited for approval")
		case <-tick.C:
		}
	}
	res, err := run.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `"sealed and done"` {
		t.Errorf("output %q", res.Output)
	}
	return run, res
}

// rawHistories is every event of every workflow of the server at addr, as
// the server hands them to a client without the codec.
func rawHistories(t *testing.T, addr string) []byte {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: addr, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var all bytes.Buffer
	var token []byte
	n := 0
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{NextPageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.GetExecutions() {
			n++
			it := c.GetWorkflowHistory(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				b, _ := proto.Marshal(ev)
				all.Write(b)
			}
			b, _ := proto.Marshal(e) // memo, search attributes
			all.Write(b)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	if n < 2 {
		t.Fatalf("%d workflows on %s, want the run's and its agent's", n, addr)
	}
	return all.Bytes()
}

// database is the SQLite database of the server of home, with its
// write-ahead log.
func database(t *testing.T, home string) []byte {
	t.Helper()
	var all []byte
	for _, name := range []string{devserver.DBFile, devserver.DBFile + "-wal"} {
		b, err := os.ReadFile(filepath.Join(home, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	if len(all) == 0 {
		t.Fatalf("no database in %s", home)
	}
	return all
}

// TestPayloadCodec: `troupe dev` with TROUPE_CODEC_KEYS seals every
// payload. A run of the vault (a prompt, a tool's output, a sandbox's
// environment, an approval's argument, each a canary) leaves none of its
// canaries in any history a client without the key reads, nor in the
// server's database file, where the same run on a `troupe dev` without
// keys leaves them in plain text. The dev server's Web UI is pointed at a
// codec server, which decodes for the UI's origin. A client with the old
// key beside a new active one still reads the run (rotation); a client,
// a `troupe runs show` and a `troupe worker` with another key fail, and
// say which key they lack.
func TestPayloadCodec(t *testing.T) {
	parallel(t) // mostly waiting, on servers of its own
	k1, k2 := codecKey(t, "k1"), codecKey(t, "k2")
	sealed := startDev(t, "dev sealed", k1)
	plain := startDev(t, "dev plain", "")
	c := codecClient(t, sealed, k1)
	run, _ := runVault(t, c)
	runVault(t, codecClient(t, plain, ""))

	canaries := map[string]bool{canaryPrompt: true, canaryTool: true, canaryApproval: true, canaryEnv: false} // whether plain text shows it
	for _, w := range []struct {
		name  string
		d     devUp
		where func(*testing.T, devUp) []byte
	}{
		{"history", sealed, func(t *testing.T, d devUp) []byte { return rawHistories(t, d.addr) }},
		{"database", sealed, func(t *testing.T, d devUp) []byte { return database(t, d.home) }},
		{"plain history", plain, func(t *testing.T, d devUp) []byte { return rawHistories(t, d.addr) }},
		{"plain database", plain, func(t *testing.T, d devUp) []byte { return database(t, d.home) }},
	} {
		t.Run(w.name, func(t *testing.T) {
			data := w.where(t, w.d)
			for canary, inPlain := range canaries {
				found := bytes.Contains(data, []byte(canary))
				switch {
				case w.d.home == sealed.home && found:
					t.Errorf("%q is in plain text", canary)
				case w.d.home == plain.home && inPlain && !found:
					t.Errorf("%q is not found without the codec: the test cannot tell", canary)
				}
			}
		})
	}

	t.Run("codec server", func(t *testing.T) {
		if sealed.uiURL == "" || sealed.codecs == "" {
			t.Fatalf("troupe dev shows no Web UI or codec server:\n%s", sealed.proc.log.String())
		}
		// The UI is configured with the codec endpoint...
		resp, err := http.Get(sealed.uiURL + "/api/v1/settings")
		if err != nil {
			t.Fatal(err)
		}
		var settings struct{ Codec struct{ Endpoint string } }
		err = json.NewDecoder(resp.Body).Decode(&settings)
		resp.Body.Close()
		if err != nil || settings.Codec.Endpoint != sealed.codecs {
			t.Errorf("the UI's codec endpoint is %q (%v), want %s", settings.Codec.Endpoint, err, sealed.codecs)
		}
		// ...which decodes the run's input for the UI's pages, as they
		// call it: from the UI's origin, with the namespace.
		raw, err := client.Dial(client.Options{HostPort: sealed.addr, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		it := raw.GetWorkflowHistory(context.Background(), run.ID(), "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		first, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		input := first.GetWorkflowExecutionStartedEventAttributes().GetInput()
		if !codec.Sealed(input.GetPayloads()[0]) {
			t.Fatalf("the run's input is not sealed: %v", input)
		}
		body, _ := protojson.Marshal(input)
		decode := func(origin string) (*http.Response, []byte) {
			req, _ := http.NewRequest(http.MethodPost, sealed.codecs+"/decode", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Namespace", "default")
			req.Header.Set("Origin", origin)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp, b
		}
		resp, answer := decode(sealed.uiURL)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != sealed.uiURL {
			t.Fatalf("decode: %s %s (Access-Control-Allow-Origin %q)", resp.Status, answer, resp.Header.Get("Access-Control-Allow-Origin"))
		}
		var decoded commonpb.Payloads
		if err := protojson.Unmarshal(answer, &decoded); err != nil {
			t.Fatal(err)
		}
		var in troupe.RunInput
		if err := converter.GetDefaultDataConverter().FromPayloads(&decoded, &in); err != nil || in.Input != canaryPrompt {
			t.Errorf("decoded %+v (%v), want the prompt", in, err)
		}
		if resp, _ := decode("http://elsewhere.example"); resp.StatusCode != http.StatusForbidden {
			t.Errorf("a page of another origin: %s, want 403", resp.Status)
		}
	})

	t.Run("rotation", func(t *testing.T) {
		rotated := codecClient(t, sealed, k1+","+k2) // k2 active
		in, err := rotated.Run(run.ID()).Input(context.Background())
		if err != nil || in.Input != canaryPrompt {
			t.Errorf("input %q, %v; want the prompt", in.Input, err)
		}
		if res, err := rotated.Run(run.ID()).Result(context.Background()); err != nil || string(res.Output) != `"sealed and done"` {
			t.Errorf("result %+v, %v", res, err)
		}
		if info, err := rotated.Run(run.ID()).Describe(context.Background()); err != nil || info.Graph != "vault" {
			t.Errorf("describe %+v, %v; want graph vault", info, err)
		}
	})

	// A worker with keys that do not agree with those of the dev's
	// worker, on its queue and its home, refuses to start, naming it; a
	// worker in the middle of a rotation (both keys, the old one active)
	// starts beside it.
	t.Run("workers agree on keys", func(t *testing.T) {
		host, _ := os.Hostname()
		dev := fmt.Sprintf("(%d@%s)", sealed.proc.cmd.Process.Pid, host)
		worker := func(keys, active string) *cliRun {
			env := []string{"TEMPORAL_ADDRESS=" + sealed.addr, "TROUPE_CODEC_KEYS=" + keys, "TROUPE_CODEC_KEY_ID=" + active}
			return startCLIEnv(t, sealed.home, env, "worker")
		}
		for _, tt := range []struct {
			name, keys, active, want string
		}{
			{"another key", k2, "", `it seals payloads with key "k1", which this one does not have (this one's keys: k2)`},
			{"no keys", "", "", `it seals payloads with key "k1", and this one has no keys`},
			{"the new key active too soon", k1 + "," + k2, "k2", `this one seals payloads with key "k2", which it does not have (its keys: k1)`},
		} {
			t.Run(tt.name, func(t *testing.T) {
				w := worker(tt.keys, tt.active)
				hung := time.AfterFunc(2*time.Minute, func() { _ = w.cmd.Process.Kill() }) // a hang detector
				defer hung.Stop()
				if code := w.wait(t); code == 0 {
					t.Fatalf("the worker started beside the dev's; stderr:\n%s", w.errText())
				}
				msg := w.errText()
				for _, want := range []string{"task queue troupe is served by another troupe worker " + dev, tt.want, "TROUPE_CODEC_KEYS"} {
					if !strings.Contains(msg, want) {
						t.Errorf("the refusal lacks %q:\n%s", want, msg)
					}
				}
				if strings.Contains(msg, "troupe: worker on") {
					t.Errorf("the worker started:\n%s", msg)
				}
			})
		}
		t.Run("rotation", func(t *testing.T) {
			w := worker(k1+","+k2, "k1")
			w.waitLine(t, regexp.MustCompile(`^troupe: worker on`))
			hung := time.AfterFunc(time.Minute, func() { _ = w.cmd.Process.Kill() }) // a hang detector
			defer hung.Stop()
			_ = w.cmd.Process.Signal(syscall.SIGTERM)
			w.wait(t)
		})
	})

	t.Run("wrong key", func(t *testing.T) {
		other := codecClient(t, sealed, k2)
		_, err := other.Run(run.ID()).Input(context.Background())
		var ke *codec.KeyError
		if !errors.As(err, &ke) || ke.ID != "k1" {
			t.Errorf("input with k2 only: %v, want a *codec.KeyError naming k1", err)
		}
		if info, _ := other.Run(run.ID()).Describe(context.Background()); !strings.Contains(info.Summary, `"k1"`) {
			t.Errorf("describe with k2 only: summary %q, want it to say the key it lacks", info.Summary)
		}
		// troupe runs show, as a user types it.
		cmd, cliEnv := troupeCommand(t, "runs", "show", run.ID())
		cmd.Env = []string{cliEnv, "TEMPORAL_ADDRESS=" + sealed.addr, "TROUPE_HOME=" + t.TempDir(), "TROUPE_CODEC_KEYS=" + k2,
			"TEMPORAL_CONFIG_FILE=" + filepath.Join(t.TempDir(), "none.toml"), "PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), `sealed with key "k1"`) {
			t.Errorf("troupe runs show with k2 only: %v\n%s\nwant it to fail naming k1", err, out)
		}
		// A worker with k2 only, alone on a queue: a run it takes fails,
		// and says why.
		// A worker with k2 only, alone on a queue: the runs it takes fail,
		// typed, and say why; its log says so once, naming the key.
		w := startTroupe(t, "worker k2", []string{"TROUPE_HOME=" + t.TempDir(), envCLIPlod + "=1", "TEMPORAL_ADDRESS=" + sealed.addr, "TROUPE_CODEC_KEYS=" + k2},
			"troupe: worker on", "worker", "--task-queue", "codec-k2")
		onK2 := codecClientOn(t, sealed, k1, "codec-k2")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang detector
		defer cancel()
		for range 2 {
			r, err := onK2.Start(ctx, troupe.RunInput{Graph: "vault", Input: canaryPrompt})
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Result(ctx)
			if err == nil || !strings.Contains(err.Error(), `sealed with key "k1", which the process reading it does not have (its keys: k2)`) ||
				troupe.ErrorType(err) != troupe.ErrPayloadKey {
				t.Errorf("a run on the worker with k2 only: %v; want it to fail, %s, naming k1", err, troupe.ErrPayloadKey)
			}
		}
		if log := w.log.String(); strings.Count(log, "this worker cannot open a payload") != 1 || !strings.Contains(log, `sealed with key "k1"`) {
			t.Errorf("the worker's log says it cannot open a payload %d times, want once, naming k1:\n%s",
				strings.Count(log, "this worker cannot open a payload"), log)
		}
	})
}

// dialKeys dials the test's server with a codec of keys (as
// TROUPE_CODEC_KEYS takes them), as every troupe command dials.
func dialKeys(t *testing.T, keys string) client.Client {
	t.Helper()
	ks, err := codec.ParseKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	cdc, err := codec.New(ks, "")
	if err != nil {
		t.Fatal(err)
	}
	opts := client.Options{HostPort: temporalAddr, Logger: quiet()}
	cdc.Apply(&opts)
	c, err := client.Dial(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestPayloadKeyOnSandboxHost: the worker that serves a sandbox's queue
// has another key than the worker of the run (k2 against k1; one that
// joined before the start-up check could refuse it, or a program of its
// own). It cannot open the sandbox calls' inputs: each fails at once,
// typed troupe.PayloadKey, not retried, and the run hears it in the tool's
// result, naming the key; the run ends instead of waiting for ever on an
// activity retried by a worker that will never read it.
func TestPayloadKeyOnSandboxHost(t *testing.T) {
	parallel(t)
	k1, k2 := codecKey(t, "k1"), codecKey(t, "k2")
	c1, c2 := dialKeys(t, k1), dialKeys(t, k2)
	_, url := modelServer(t)
	queue := fmt.Sprintf("e2e-wrongkey-%d", queues.Add(1))
	twoStoresOneQueue(t, url, queue, c1, c2) // B, the sandbox queue's only worker, has k2

	run, err := troupeclient.StartRun(context.Background(), c1, queue, troupe.RunInput{Graph: "recreate", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang detector
	defer cancel()
	var res troupe.RunResult
	runErr := run.Get(ctx, &res)
	if ctx.Err() != nil {
		t.Fatalf("the run did not end: %v", runErr)
	}
	if runErr != nil {
		t.Fatalf("the run failed: %v; want it to end with the tool's failure as its output", runErr)
	}
	// The model read the tool's failure, typed and naming the key.
	for _, want := range []string{`sealed with key \"k1\"`, "(type: " + troupe.ErrPayloadKey + ", retryable: false)"} {
		if !strings.Contains(string(res.Output), want) {
			t.Errorf("the run's output (the tool's result, echoed) lacks %s: %s", want, res.Output)
		}
	}
	// Each sandbox activity B took failed at its first attempt, typed.
	failed := 0
	it := c1.GetWorkflowHistory(ctx, run.GetID()+"/0-phoenix", "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 {
			t.Errorf("event %d: an activity retried (attempt %d)", ev.GetEventId(), a.GetAttempt())
		}
		if a := ev.GetActivityTaskFailedEventAttributes(); a != nil {
			info := a.GetFailure().GetApplicationFailureInfo()
			if info.GetType() != troupe.ErrPayloadKey || !info.GetNonRetryable() {
				t.Errorf("event %d: activity failure %v, want a non-retryable %s", ev.GetEventId(), a.GetFailure(), troupe.ErrPayloadKey)
			}
			failed++
		}
	}
	if failed == 0 {
		t.Error("no activity of the sandbox failed: the test cannot tell")
	}
}
