package host_test

import (
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

func TestDirName(t *testing.T) {
	seen := map[string]string{}
	for _, id := range []string{
		"wf-1", "wf_1", "a.b", "x", "wf/1", "wf 1", "wf~1", ".", "..", ".hidden", "-dash", "",
		strings.Repeat("a", 64), strings.Repeat("a", 65), strings.Repeat("a", 300), "ünïcode", "a/../../etc",
	} {
		name := host.DirName(id)
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || name[0] == '.' || name[0] == '-' || len(name) > 80 {
			t.Errorf("DirName(%q) = %q: not a safe directory name", id, name)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("DirName(%q) = DirName(%q) = %q", id, other, name)
		}
		seen[name] = id
		if again := host.DirName(id); again != name {
			t.Errorf("DirName(%q) is not stable: %q, %q", id, name, again)
		}
	}
	if got := host.DirName("wf-123.run_4"); got != "wf-123.run_4" {
		t.Errorf("a plain id is renamed: %q", got)
	}
}
