package client

// Stand-ins for Session.Fork and Session.SwitchBackend, which the session
// manager's fork and switch-backend work brings (with these signatures), so
// that `troupe chat` builds against them before they land. This file goes
// when they do.

import (
	"context"
	"errors"
	"fmt"
)

// errNotBuilt is what the stand-ins answer.
var errNotBuilt = errors.New("not built yet")

// Fork will copy the session (conversation, workspaces, settings) into a
// new session named name; for now it fails with "not built yet".
func (s *Session) Fork(ctx context.Context, name string) (*Session, SessionEntry, error) {
	return nil, SessionEntry{}, fmt.Errorf("fork session %s: %w", s.id, errNotBuilt)
}

// SwitchBackend will move every workspace of the session to backend; for
// now it fails with "not built yet".
func (s *Session) SwitchBackend(ctx context.Context, backend string) (SessionEntry, error) {
	return SessionEntry{}, fmt.Errorf("switch session %s to %s: %w", s.id, backend, errNotBuilt)
}
