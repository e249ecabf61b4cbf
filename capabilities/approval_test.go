package capabilities

import (
	"context"
	"encoding/json"
	"testing"
)

func TestReadOnlyCommand(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		want bool
	}{
		{"ls -la", true},
		{"cat go.mod | grep module", true},
		{"rg -n TODO && git log --oneline -5", true},
		{"grep -rn 'password' . ; wc -l main.go", true},
		{"sed -n 1,20p main.go", true},
		{"go vet ./...", true},
		{"rm -rf build/", false},
		{"ls > files.txt", false},
		{"cat a >> b", false},
		{"sed -i s/a/b/ main.go", false},
		{"find . -name '*.tmp' -delete", false},
		{"find . -exec rm {} +", false},
		{"echo $(rm -rf /)", false},
		{"echo `id`", false},
		{"git commit -am x", false},
		{"git push", false},
		{"go test ./...", false},
		{"sort -o out.txt in.txt", false},
		{"sleep 100 &", false},
		{"FOO=1 ls", false},
		{"/bin/rm x", false},
		{"awk '{system(\"rm x\")}' f", false},
		{"make", false},
		// The code-review example's reviewers read with these.
		{"grep -Hn -i -E -f .agents/skills/review-security/credentials.ere $(sed -n 's|^+++ b/|repo/|p' change.diff) /dev/null | head -20; echo '--- change.diff ---'; head -200 change.diff", true},
		{"echo 'changed files:'; sed -n 's|^+++ b/||p' change.diff | grep -E '(_test\\.go|(^|/)tests?/)' || echo none; grep -m1 '^@@' change.diff", true},
		{`awk 'FNR==1{prev=""} /^(func|type)[ \t]+[A-Z]/ && prev !~ /^\/\// {print FILENAME ":" FNR ": " $0} {prev=$0}' $(sed -n 's|^+++ b/\(.*\.go\)$|repo/\1|p' change.diff | grep -v '_test\.go$') /dev/null | head -20`, true},
		{"cat x 2>/dev/null", true},
		{"grep -r x . 2>&1 | head", true},
		{"cat $(rm -rf build)", false},
		{"cat \"$(rm -rf build)\"", false},
		{"echo 'unclosed", false},
		{"awk '{print > \"out\"}' f", false},
		{"awk '{print | \"sh\"}' f", false},
		{"sed 's/a/b/w out' f", false},
		{"(cd build && rm -rf .)", false},
		{"ls; rm -rf build/", false},
	} {
		if got := ReadOnlyCommand(tc.cmd); got != tc.want {
			t.Errorf("ReadOnlyCommand(%q) = %v, want %v", tc.cmd, got, tc.want)
		}
	}
}

func TestApprovalPolicies(t *testing.T) {
	ctx := context.Background()
	cmd := CommandApproval(func(c string) bool { return !ReadOnlyCommand(c) })
	patch := PatchApproval(func(paths []string) bool {
		for _, p := range paths {
			if p == "go.mod" {
				return true
			}
		}
		return false
	})
	args := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	for _, tc := range []struct {
		name    string
		need    func() (bool, error)
		want    bool
		wantErr bool
	}{
		{"a read", func() (bool, error) { return cmd.When(ctx, args(ExecCommandArgs{Cmd: "cat README.md"})) }, false, false},
		{"a removal", func() (bool, error) { return cmd.When(ctx, args(ExecCommandArgs{Cmd: "rm -rf build/"})) }, true, false},
		{"bad command arguments", func() (bool, error) { return cmd.When(ctx, json.RawMessage(`[]`)) }, true, true},
		{"a patch of main.go", func() (bool, error) {
			return patch.When(ctx, args(ApplyPatchArgs{Input: "*** Begin Patch\n*** Add File: main.go\n+package main\n*** End Patch"}))
		}, false, false},
		{"a patch moving a file to go.mod", func() (bool, error) {
			return patch.When(ctx, args(ApplyPatchArgs{Input: "*** Begin Patch\n*** Update File: a.txt\n*** Move to: go.mod\n@@\n-x\n+y\n*** End Patch"}))
		}, true, false},
		{"a patch that does not parse", func() (bool, error) { return patch.When(ctx, args(ApplyPatchArgs{Input: "nonsense"})) }, true, true},
	} {
		got, err := tc.need()
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: %v, %v; want %v (error %v)", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
	if cmd.Tool != "exec_command" || patch.Tool != "apply_patch" {
		t.Errorf("policies for %q and %q", cmd.Tool, patch.Tool)
	}
}
