package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe"
)

// A message comes from its argument, from standard input for "-", or
// from --file; exactly one; up to troupe.MessageLimit (far past what one
// Temporal payload takes: such a message goes by reference); one over it
// is refused, typed, before anything is sent.
func TestMessageOf(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "m.txt")
	if err := os.WriteFile(file, []byte("from a file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Past what Temporal takes in a payload: read whole, to go by
	// reference.
	big := strings.Repeat("b", troupe.PayloadLimit+1)
	bigFile := filepath.Join(dir, "big.txt")
	if err := os.WriteFile(bigFile, []byte(big+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.txt")
	if err := os.WriteFile(huge, []byte(strings.Repeat("x", troupe.MessageLimit+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		file     string
		stdin    string
		want     string
		wantErr  string
		wantType string
	}{
		{name: "argument", args: []string{"hello"}, want: "hello"},
		{name: "a dash reads stdin", args: []string{"-"}, stdin: "from stdin\nline two\n", want: "from stdin\nline two"},
		{name: "file", file: file, want: "from a file"},
		{name: "none", wantErr: "no message"},
		{name: "two", args: []string{"hello"}, file: file, wantErr: "not two"},
		{name: "missing file", file: filepath.Join(dir, "nope"), wantErr: "--file"},
		{name: "a dash alone is not the message", args: []string{"-"}, stdin: "", want: ""},
		{name: "big file", file: bigFile, want: big},
		{name: "big stdin", args: []string{"-"}, stdin: big, want: big},
		{name: "at the limit", args: []string{"-"}, stdin: strings.Repeat("z", troupe.MessageLimit), want: strings.Repeat("z", troupe.MessageLimit)},
		{name: "huge file", file: huge, wantType: troupe.ErrPayloadTooLarge},
		{name: "huge stdin", args: []string{"-"}, stdin: strings.Repeat("y", troupe.MessageLimit+10), wantType: troupe.ErrPayloadTooLarge},
		{name: "huge argument", args: []string{strings.Repeat("a", troupe.MessageLimit+1)}, wantType: troupe.ErrPayloadTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := messageOf(tt.args, tt.file, strings.NewReader(tt.stdin))
			switch {
			case tt.wantType != "":
				if troupe.ErrorType(err) != tt.wantType {
					t.Errorf("err %v, want type %s", err, tt.wantType)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err %v, want one saying %q", err, tt.wantErr)
				}
			case err != nil || got != tt.want:
				t.Errorf("messageOf = %q, %v; want %q", troupe.Preview(got, 80), err, troupe.Preview(tt.want, 80))
			}
		})
	}
}
