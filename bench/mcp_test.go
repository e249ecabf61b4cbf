package bench

import (
	"cmp"
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/agents"
	troupeclient "github.com/troupe-dev/troupe/client"
	mcpserver "github.com/troupe-dev/troupe/mcp/server"
	"github.com/troupe-dev/troupe/runtime/model/scripted"
	"github.com/troupe-dev/troupe/workflows"
)

// The MCP bench graph: one exposed agent that answers in one turn, so a
// call costs one run of one model turn and what MCP adds around it.
const (
	mcpGraphName = "benchmcp"
	mcpTool      = mcpGraphName + "_echo" // agents.Graph.ExposedName
	mcpRounds    = 10                     // sequential calls of each kind per iteration
	mcpBatch     = 20                     // concurrent calls in a batch
)

func mcpGraph() *agents.Graph {
	return agents.MustGraph(mcpGraphName, "echo", &agents.Agent{
		Name:         "echo",
		Instructions: "bench mcp echo",
		Expose:       agents.Expose("", "Answers its input in one turn."),
	})
}

// mcpModelServer starts a scripted model server whose scenario answers
// the echo agent in one turn.
func mcpModelServer(b *testing.B) string {
	b.Helper()
	sc := &scripted.Scenario{Rules: []scripted.Rule{
		{Name: "mcp-echo", Match: scripted.Match{Instructions: "bench mcp echo", Turn: 1},
			Respond: scripted.Respond{Text: "{{.User}} done"}},
	}}
	if err := sc.Validate(); err != nil {
		b.Fatal(err)
	}
	s := scripted.New(sc)
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return url
}

// BenchmarkMCPCall measures what an MCP call to an exposed agent costs
// over starting the same run directly. The agent answers in one model
// turn; the MCP side is mcp/server's streamable HTTP handler (stateful, on
// httptest) and a go-sdk client with one session; the direct side is
// workflows.Run through the Temporal client. Both run on one worker and
// the same embedded server, and both are timed as their client sees them,
// from the call to the result: the MCP server itself waits on the run
// with the Temporal client.
//
// Each iteration makes 10 sequential calls of each kind, interleaved
// (direct, MCP, MCP, direct, ...) so that a drift in the machine's load
// weighs on both alike, then a batch of 20 concurrent calls of each kind
// (direct, MCP, MCP, direct).
//
// Reported:
//   - ms/call-direct, ms/call-mcp: the median sequential call (a client's
//     wait for a result can miss the close event's wake-up and last until
//     the history long poll expires, up to 1 s on the embedded server,
//     which a median shrugs off), and ratio: MCP's over direct;
//   - cpu-ratio: the process's CPU time per MCP call over a direct call's
//     (server, worker, scripted model, and for MCP its server and client
//     too), which other load on the machine disturbs less than wall time;
//   - ms/batch20-direct, ms/batch20-mcp: the mean wall time of 20
//     concurrent calls, from the first start to the last result, with
//     ms/call-batch20-direct and ms/call-batch20-mcp that time over 20,
//     batch-ratio: MCP's over direct, and batch-cpu-ratio likewise for CPU.
func BenchmarkMCPCall(b *testing.B) {
	c := temporalClient(b)
	url := mcpModelServer(b)
	queue := startWorker(b, c, troupeWorker(b, url, func(cfg *workflows.Config) {
		cfg.Graphs = []*agents.Graph{mcpGraph()}
	}))
	cs := mcpSession(b, c, queue)

	direct := func(i int) error { return runDirect(c, queue, fmt.Sprintf("direct %d", i)) }
	viaMCP := func(i int) error { return callMCP(cs, fmt.Sprintf("mcp %d", i)) }
	for _, warm := range []func(int) error{direct, viaMCP} {
		if err := warm(-1); err != nil {
			b.Fatal(err)
		}
	}

	var seqDirect, seqMCP, batchDirect, batchMCP []sample
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := 0; r < mcpRounds; r += 2 {
			seqDirect = append(seqDirect, timeCall(b, direct, r))
			seqMCP = append(seqMCP, timeCall(b, viaMCP, r))
			seqMCP = append(seqMCP, timeCall(b, viaMCP, r+1))
			seqDirect = append(seqDirect, timeCall(b, direct, r+1))
		}
		batchDirect = append(batchDirect, timeBatch(b, direct))
		batchMCP = append(batchMCP, timeBatch(b, viaMCP))
		batchMCP = append(batchMCP, timeBatch(b, viaMCP))
		batchDirect = append(batchDirect, timeBatch(b, direct))
	}
	b.StopTimer()

	perDirect, perMCP := ms(medianWall(seqDirect)), ms(medianWall(seqMCP))
	cpuDirect, cpuMCP := ms(total(seqDirect).cpu)/float64(len(seqDirect)), ms(total(seqMCP).cpu)/float64(len(seqMCP))
	bDirect, bMCP := total(batchDirect), total(batchMCP)
	wallDirect, wallMCP := ms(bDirect.wall)/float64(len(batchDirect)), ms(bMCP.wall)/float64(len(batchMCP))
	b.ReportMetric(perDirect, "ms/call-direct")
	b.ReportMetric(perMCP, "ms/call-mcp")
	b.ReportMetric(perMCP/perDirect, "ratio")
	b.ReportMetric(cpuMCP/cpuDirect, "cpu-ratio")
	b.ReportMetric(wallDirect, "ms/batch20-direct")
	b.ReportMetric(wallMCP, "ms/batch20-mcp")
	b.ReportMetric(wallDirect/mcpBatch, "ms/call-batch20-direct")
	b.ReportMetric(wallMCP/mcpBatch, "ms/call-batch20-mcp")
	b.ReportMetric(wallMCP/wallDirect, "batch-ratio")
	b.ReportMetric(ms(bMCP.cpu)/ms(bDirect.cpu), "batch-cpu-ratio")
	b.Logf("sequential calls (%d of each): direct median %.2f ms (min %.2f, max %.2f; CPU %.2f ms/call), MCP median %.2f ms (min %.2f, max %.2f; CPU %.2f ms/call); ratio %.2f, CPU ratio %.2f",
		len(seqDirect), perDirect, ms(slices.MinFunc(seqDirect, byWall).wall), ms(slices.MaxFunc(seqDirect, byWall).wall), cpuDirect,
		perMCP, ms(slices.MinFunc(seqMCP, byWall).wall), ms(slices.MaxFunc(seqMCP, byWall).wall), cpuMCP, perMCP/perDirect, cpuMCP/cpuDirect)
	b.Logf("%d concurrent calls (%d batches of each): direct %.2f ms (%.2f ms/call; CPU %.2f ms/call), MCP %.2f ms (%.2f ms/call; CPU %.2f ms/call); ratio %.2f, CPU ratio %.2f",
		mcpBatch, len(batchDirect), wallDirect, wallDirect/mcpBatch, ms(bDirect.cpu)/float64(len(batchDirect)*mcpBatch),
		wallMCP, wallMCP/mcpBatch, ms(bMCP.cpu)/float64(len(batchMCP)*mcpBatch), wallMCP/wallDirect, ms(bMCP.cpu)/ms(bDirect.cpu))
}

// mcpSession serves the MCP bench graph with mcp/server over streamable
// HTTP and returns a go-sdk client session of it.
func mcpSession(b *testing.B, c client.Client, queue string) *mcp.ClientSession {
	b.Helper()
	s, err := mcpserver.New(mcpserver.Config{Client: c, TaskQueue: queue, Graphs: []*agents.Graph{mcpGraph()}})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(s.HTTPHandler(mcpserver.HTTPOptions{}))
	b.Cleanup(hs.Close)
	b.Cleanup(s.Close) // before hs.Close: calls in flight stop waiting
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL + mcpserver.Path}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// runDirect runs the echo agent with the Temporal client and checks its
// output.
func runDirect(c client.Client, queue, input string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := troupeclient.Execute(ctx, c, queue, troupe.RunInput{Graph: mcpGraphName, Agent: "echo", Input: input})
	if err != nil {
		return err
	}
	if want := `"` + input + ` done"`; string(res.Output) != want || res.Turns != 1 {
		return fmt.Errorf("direct run answered %s in %d turns, want %s in 1", res.Output, res.Turns, want)
	}
	return nil
}

// callMCP calls the echo agent's tool and checks its output.
func callMCP(cs *mcp.ClientSession, input string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpTool, Arguments: map[string]any{"input": input}})
	if err != nil {
		return err
	}
	out, _ := res.StructuredContent.(map[string]any)
	if want := input + " done"; res.IsError || out["output"] != want {
		return fmt.Errorf("MCP call answered %v (isError %v), want output %q", res.StructuredContent, res.IsError, want)
	}
	return nil
}

// timeCall times one call: its wall time as the caller sees it, and the
// CPU time this process (server, worker, MCP server and client, scripted
// model) spent meanwhile.
func timeCall(b *testing.B, call func(int) error, i int) sample {
	b.Helper()
	cpu0, began := cpuTime(), time.Now()
	if err := call(i); err != nil {
		b.Fatal(err)
	}
	return sample{wall: time.Since(began), cpu: cpuTime() - cpu0}
}

// timeBatch times mcpBatch concurrent calls, from the first start to the
// last result.
func timeBatch(b *testing.B, call func(int) error) sample {
	b.Helper()
	errs := make([]error, mcpBatch)
	var wg sync.WaitGroup
	cpu0, began := cpuTime(), time.Now()
	for i := range errs {
		wg.Go(func() { errs[i] = call(i) })
	}
	wg.Wait()
	s := sample{wall: time.Since(began), cpu: cpuTime() - cpu0}
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return s
}

func byWall(x, y sample) int { return cmp.Compare(x.wall, y.wall) }

// medianWall is the median wall time of samples.
func medianWall(ss []sample) time.Duration {
	s := slices.SortedFunc(slices.Values(ss), byWall)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1].wall + s[n/2].wall) / 2
	}
	return s[len(s)/2].wall
}

func total(ss []sample) sample {
	var t sample
	for _, s := range ss {
		t = t.add(s)
	}
	return t
}
