package workflowstest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Golden fails t unless v, as indented JSON, is the fixture at path:
// every payload that crosses Temporal has one, so a change in its shape
// is a visible diff. With update it first writes v there (a test's
// -update flag), which is how a fixture is made, never how one is fixed.
func Golden(t testing.TB, path string, v any, update bool) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("payload %s changed shape:\n got: %s\nwant: %s", strings.TrimSuffix(filepath.Base(path), ".json"), got, want)
	}
}
