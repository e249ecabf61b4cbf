package docker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

func TestHostMirror(t *testing.T) {
	tests := []struct {
		name    string
		sources string // a deb822 file under the sources directory
		list    string // sources.list
		want    string
	}{
		{
			name: "deb822, Debian entry beside security and another vendor",
			sources: `Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
`,
			want: "http://mirror.example/debian",
		},
		{
			name: "deb822 disabled entry and deb-src are skipped",
			sources: `Types: deb
URIs: http://disabled.example/debian
Suites: bookworm
Enabled: no

Types: deb-src
URIs: http://src.example/debian
Suites: bookworm

Types: deb deb-src
URIs: https://ok.example/debian
Suites: bookworm
`,
			want: "https://ok.example/debian",
		},
		{
			name: "one-line sources.list with options",
			list: `# comment
deb-src http://src.example/debian bookworm main
deb [arch=amd64 signed-by=/k.gpg] http://list.example/debian bookworm main contrib
deb http://list.example/debian-security bookworm-security main
`,
			want: "http://list.example/debian",
		},
		{name: "nothing for the suite", list: "deb http://x.example/ubuntu jammy main\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			old := aptSources
			t.Cleanup(func() { aptSources = old })
			aptSources.dir = filepath.Join(dir, "sources.list.d")
			aptSources.list = filepath.Join(dir, "sources.list")
			os.Mkdir(aptSources.dir, 0o755)
			if tt.sources != "" {
				os.WriteFile(filepath.Join(aptSources.dir, "debian.sources"), []byte(tt.sources), 0o644)
			}
			if tt.list != "" {
				os.WriteFile(aptSources.list, []byte(tt.list), 0o644)
			}
			got, err := HostMirror("bookworm")
			if tt.want == "" {
				if err == nil {
					t.Errorf("HostMirror = %q, want an error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("HostMirror = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestDebianImage builds the full image (about a minute and 400 MB, from
// the host's Debian mirror) and runs its tools in a sandbox. It is opt-in:
// TROUPE_TEST_DEBIAN_IMAGE=1.
func TestDebianImage(t *testing.T) {
	if os.Getenv("TROUPE_TEST_DEBIAN_IMAGE") != "1" {
		t.Skip("set TROUPE_TEST_DEBIAN_IMAGE=1 to build and test the Debian image")
	}
	c := dockerClient(t)
	var log strings.Builder
	if err := c.BuildImage(context.Background(), BuildOptions{Kind: KindDebian, Log: &log}); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Log(log.String()[max(0, log.Len()-300):])
	s := newSession(t, sandbox.Spec{Options: sandbox.Options{Image: DefaultImage}})
	res := run(t, s, "bash --version | head -1 && python3 -c 'print(6*7)' && git --version && ls /etc/ssl/certs | head -1 && readlink -f /bin/sh")
	if res.ExitCode != 0 || !strings.Contains(res.Output, "42") {
		t.Errorf("tools in the Debian image: %+v", res)
	}
	t.Log(res.Output)
	// The exec wrapper under dash: a timeout kills the whole group.
	res, err := s.Exec(context.Background(), sandbox.ExecRequest{Cmd: "sleep 50 & sleep 60", Timeout: 300 * time.Millisecond})
	if err != nil || !res.TimedOut {
		t.Errorf("timeout under dash: %+v %v", res, err)
	}
	procs := `for p in /proc/[0-9]*; do tr '\0' ' ' <$p/cmdline; echo; done 2>/dev/null | grep -c '^sleep [56]0' || true`
	if out := run(t, s, procs).Output; strings.TrimSpace(out) != "0" {
		t.Errorf("processes survived the timeout: %s", out)
	}
}
