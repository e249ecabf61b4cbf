package devserver_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/troupe-dev/troupe/runtime/devserver"
)

func TestZZDiag(t *testing.T) {
	if os.Getenv("DIAG") == "" {
		t.Skip()
	}
	for round := 0; round < 1; round++ {
		fmt.Println("round", round)
		cfg := devserver.Config{InMemory: true, UIPort: -1}
		if os.Getenv("DIAG_LOG") != "" {
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
		if os.Getenv("DIAG") == "defaults" {
			cfg.DynamicConfig = map[string]any{
				"history.transferProcessorMaxPollRPS": 20, "history.timerProcessorMaxPollRPS": 20,
				"history.visibilityProcessorMaxPollRPS": 20, "history.outboundProcessorMaxPollRPS": 20,
				"matching.numTaskqueueReadPartitions": 4, "matching.numTaskqueueWritePartitions": 4,
				"system.forceSearchAttributesCacheRefreshOnRead": false,
				"frontend.namespaceRPS.visibility":               10, "history.hostLevelCacheMaxSize": 128000,
			}
		}
		diagRound(t, cfg)
	}
}

func diagRound(t *testing.T, cfg devserver.Config) {
	s, err := devserver.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c, _ := sdkclient.Dial(sdkclient.Options{HostPort: s.FrontendAddress(), Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	defer c.Close()
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflow(GreetWorkflow)
	w.RegisterActivity(Greet)
	w.Start()
	defer w.Stop()
	ctx := context.Background()
	for i := 0; i < 150; i++ {
		began := time.Now()
		run, _ := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{TaskQueue: taskQueue}, GreetWorkflow, "b")
		startDur := time.Since(began)
		run.Get(ctx, nil)
		total := time.Since(began)
		iter := c.GetWorkflowHistory(ctx, run.GetID(), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var prev time.Time
		line := ""
		for iter.HasNext() {
			e, _ := iter.Next()
			ts := e.GetEventTime().AsTime()
			if !prev.IsZero() {
				line += fmt.Sprintf(" %s+%dms", e.GetEventType().String()[11:], ts.Sub(prev).Milliseconds())
			}
			prev = ts
		}
		if total > 100*time.Millisecond {
			fmt.Printf("STALL %s i=%d start=%v total=%v:%s\n", began.Format("15:04:05.000"), i, startDur.Round(time.Millisecond), total.Round(time.Millisecond), line)
		}
	}
}
