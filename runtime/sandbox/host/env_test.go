package host_test

import (
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

func TestCommandEnv(t *testing.T) {
	got := strings.Join(host.CommandEnv(map[string]string{"B": "2", "A": "1"}, "/ws"), " ")
	if want := "A=1 B=2 HOME=/ws PATH=" + host.DefaultPATH; got != want {
		t.Errorf("CommandEnv = %q, want %q", got, want)
	}
	got = strings.Join(host.CommandEnv(map[string]string{"HOME": "/h", "PATH": "/p"}, "/ws"), " ")
	if got != "HOME=/h PATH=/p" {
		t.Errorf("CommandEnv with HOME and PATH = %q", got)
	}
}
