package devserver

// serverLogger feeds the Temporal server's logger interface into a *slog.Logger.

import (
	"context"
	"log/slog"
	"sync/atomic"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

type serverLogger struct {
	l *slog.Logger // nil: discard everything
	// stopping is set when Stop begins and shared by every logger derived with With.
	// From then on warnings and errors are logged at Debug level: the services report the
	// polls and transactions that shutdown cancels as failures, which would otherwise end
	// every session with a screenful of errors.
	stopping *atomic.Bool
}

func newServerLogger(l *slog.Logger) *serverLogger {
	return &serverLogger{l: l, stopping: new(atomic.Bool)}
}

var (
	_ log.Logger      = (*serverLogger)(nil)
	_ log.WithLogger  = (*serverLogger)(nil)
	_ log.SLogWrapper = (*serverLogger)(nil)
)

func (s *serverLogger) Debug(msg string, tags ...tag.Tag) { s.log(slog.LevelDebug, msg, tags) }
func (s *serverLogger) Info(msg string, tags ...tag.Tag)  { s.log(slog.LevelInfo, msg, tags) }
func (s *serverLogger) Warn(msg string, tags ...tag.Tag)  { s.log(slog.LevelWarn, msg, tags) }
func (s *serverLogger) Error(msg string, tags ...tag.Tag) { s.log(slog.LevelError, msg, tags) }

// The server calls DPanic, Panic and Fatal on conditions it can survive when embedded; an
// embedded server must not take its host process down, so they are logged as errors.
func (s *serverLogger) DPanic(msg string, tags ...tag.Tag) { s.log(slog.LevelError, msg, tags) }
func (s *serverLogger) Panic(msg string, tags ...tag.Tag)  { s.log(slog.LevelError, msg, tags) }
func (s *serverLogger) Fatal(msg string, tags ...tag.Tag)  { s.log(slog.LevelError, msg, tags) }

func (s *serverLogger) With(tags ...tag.Tag) log.Logger {
	if s.l == nil {
		return s
	}
	return &serverLogger{l: slog.New(s.l.Handler().WithAttrs(attrs(tags))), stopping: s.stopping}
}

// SLog lets the server's own slog bridge use the logger directly.
func (s *serverLogger) SLog() *slog.Logger {
	if s.l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.l
}

func (s *serverLogger) log(level slog.Level, msg string, tags []tag.Tag) {
	if s.l == nil {
		return
	}
	if level > slog.LevelInfo && s.stopping.Load() {
		level = slog.LevelDebug
	}
	ctx := context.Background()
	if !s.l.Enabled(ctx, level) {
		return
	}
	s.l.LogAttrs(ctx, level, msg, attrs(tags)...)
}

func attrs(tags []tag.Tag) []slog.Attr {
	out := make([]slog.Attr, len(tags))
	for i, t := range tags {
		out[i] = slog.Any(t.Key(), t.Value())
	}
	return out
}
