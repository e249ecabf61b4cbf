package devserver

// slogAdapter feeds the Temporal server's logger interface into a *slog.Logger.

import (
	"context"
	"log/slog"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

type slogAdapter struct{ l *slog.Logger }

var (
	_ log.Logger      = slogAdapter{}
	_ log.WithLogger  = slogAdapter{}
	_ log.SLogWrapper = slogAdapter{}
)

func (a slogAdapter) Debug(msg string, tags ...tag.Tag) { a.log(slog.LevelDebug, msg, tags) }
func (a slogAdapter) Info(msg string, tags ...tag.Tag)  { a.log(slog.LevelInfo, msg, tags) }
func (a slogAdapter) Warn(msg string, tags ...tag.Tag)  { a.log(slog.LevelWarn, msg, tags) }
func (a slogAdapter) Error(msg string, tags ...tag.Tag) { a.log(slog.LevelError, msg, tags) }

// The server calls DPanic, Panic and Fatal on conditions it can survive when embedded; an
// embedded server must not take its host process down, so they are logged as errors.
func (a slogAdapter) DPanic(msg string, tags ...tag.Tag) { a.log(slog.LevelError, msg, tags) }
func (a slogAdapter) Panic(msg string, tags ...tag.Tag)  { a.log(slog.LevelError, msg, tags) }
func (a slogAdapter) Fatal(msg string, tags ...tag.Tag)  { a.log(slog.LevelError, msg, tags) }

func (a slogAdapter) With(tags ...tag.Tag) log.Logger {
	return slogAdapter{l: slog.New(a.l.Handler().WithAttrs(attrs(tags)))}
}

// SLog lets the server's own slog bridge use the logger directly.
func (a slogAdapter) SLog() *slog.Logger { return a.l }

func (a slogAdapter) log(level slog.Level, msg string, tags []tag.Tag) {
	ctx := context.Background()
	if !a.l.Enabled(ctx, level) {
		return
	}
	a.l.LogAttrs(ctx, level, msg, attrs(tags)...)
}

func attrs(tags []tag.Tag) []slog.Attr {
	out := make([]slog.Attr, len(tags))
	for i, t := range tags {
		out[i] = slog.Any(t.Key(), t.Value())
	}
	return out
}
