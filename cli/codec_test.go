package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe"
)

// TestCodecServerRefuses: troupe codec-server will not start without
// keys, with keys it cannot use, or on an address others reach with no
// token; each says why, with its type.
func TestCodecServerRefuses(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open.keys")
	if err := os.WriteFile(open, []byte("k:"+strings.Repeat("A", 43)+"=\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	key := "k:" + strings.Repeat("A", 43) + "="
	tests := []struct {
		name string
		env  map[string]string
		args []string
		typ  string
		say  string
	}{
		{"no keys", nil, nil, troupe.ErrUsage, "no payload keys"},
		{"key file readable by others", map[string]string{"TROUPE_CODEC_KEY_FILE": open}, nil, troupe.ErrConnectionConfig, "chmod 600"},
		{"unknown active key", map[string]string{"TROUPE_CODEC_KEYS": key, "TROUPE_CODEC_KEY_ID": "j"}, nil, troupe.ErrConnectionConfig, `"j"`},
		{"open address, no token", map[string]string{"TROUPE_CODEC_KEYS": key}, []string{"--addr", "0.0.0.0:0"}, troupe.ErrUsage, "--token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, name := range []string{"TROUPE_CODEC_KEY_FILE", "TROUPE_CODEC_KEYS", "TROUPE_CODEC_KEY_ID", envCodecToken} {
				t.Setenv(name, tt.env[name])
			}
			root := Command(nil, io.Discard, io.Discard)
			root.SetArgs(append([]string{"codec-server"}, tt.args...))
			err := root.ExecuteContext(context.Background())
			info := describeError(err)
			if err == nil || info.Type != tt.typ || !strings.Contains(info.Message, tt.say) {
				t.Errorf("codec-server: %v (%s); want %s saying %q", err, info.Type, tt.typ, tt.say)
			}
		})
	}
}
