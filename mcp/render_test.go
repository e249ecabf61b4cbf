package mcp

import (
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestExpandEnv(t *testing.T) {
	env := map[string]string{"TOKEN": "s3cret", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct{ in, want, err string }{
		{"Bearer ${TOKEN}", "Bearer s3cret", ""},
		{"${TOKEN}${TOKEN}", "s3cret" + "s3cret", ""},
		{"[${EMPTY}]", "[]", ""},
		{"pa$$word $TOKEN", "pa$$word $TOKEN", ""},
		{"${MISSING}", "", "environment variable MISSING (named in Headers[\"X\"]) is not set on the worker"},
	}
	for _, tt := range tests {
		got, err := expandEnv(tt.in, `Headers["X"]`, lookup)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("expandEnv(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("expandEnv(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestNewResult(t *testing.T) {
	tests := []struct {
		name string
		res  *sdk.CallToolResult
		want string
	}{
		{"texts", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a"}, &sdk.TextContent{Text: "b"}}}, "a\nb"},
		{"structured only", &sdk.CallToolResult{Content: []sdk.Content{}, StructuredContent: map[string]any{"n": 1, "s": "<x>"}}, `{"n":1,"s":"<x>"}`},
		{"audio", &sdk.CallToolResult{Content: []sdk.Content{&sdk.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 2048)}}}, "[audio audio/wav, 2.0 KiB]"},
		{"blob resource", &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///a.bin", MIMEType: "application/octet-stream", Blob: []byte{1, 2, 3}}}}},
			"[resource file:///a.bin (application/octet-stream), 3 bytes of binary data]"},
		{"text resource", &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///a.txt", Text: "hi"}}}},
			"[resource file:///a.txt]\nhi"},
		{"link", &sdk.CallToolResult{Content: []sdk.Content{&sdk.ResourceLink{URI: "file:///b", Name: "b", MIMEType: "text/plain", Description: "the b file"}}},
			`[resource link "b": file:///b (text/plain) - the b file]`},
		{"error without a message", &sdk.CallToolResult{IsError: true}, "the tool reported an error without a message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := newResult(tt.res)
			if err != nil {
				t.Fatal(err)
			}
			if r.Text != tt.want || r.IsError != tt.res.IsError {
				t.Errorf("text = %q, want %q", r.Text, tt.want)
			}
			if tt.res.StructuredContent != nil && !strings.Contains(string(r.Structured), `"n":1`) {
				t.Errorf("structured = %s", r.Structured)
			}
		})
	}
}
