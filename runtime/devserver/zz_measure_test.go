package devserver_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/runtime/devserver"
)

func TestZZMeasure(t *testing.T) {
	dir := os.Getenv("MEASURE_DIR")
	if dir == "" {
		t.Skip()
	}
	var logger *slog.Logger
	if os.Getenv("MEASURE_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	_, statErr := os.Stat(dir + "/temporal.db")
	began := time.Now()
	s, err := devserver.Start(context.Background(), devserver.Config{Dir: dir, UIPort: -1, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("existing=%v start=%v", statErr == nil, time.Since(began))
	began = time.Now()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("stop=%v", time.Since(began))
}
