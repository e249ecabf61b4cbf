package blob_test

import (
	"context"
	"strings"
	"testing"

	"github.com/troupe-dev/troupe/runtime/blob"
)

// TestEmulatorURLs: the parameters that point gs:// and azblob:// at a
// server of one's own are checked when the store opens, each refusal
// naming what is wrong; a well-formed URL opens with no server to reach
// (the conformance tests reach real ones).
func TestEmulatorURLs(t *testing.T) {
	for _, k := range []string{"AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGEBLOB_CONNECTIONSTRING"} {
		t.Setenv(k, "")
	}
	for _, tc := range []struct{ name, url, want string }{
		{"gs endpoint", "gs://b?endpoint=http://127.0.0.1:1&anonymous=true", ""},
		{"gs endpoint with a path", "gs://b?endpoint=http://127.0.0.1:1/storage/v1/&anonymous=true&prefix=p/", ""},
		{"gs endpoint not http", "gs://b?endpoint=ftp://127.0.0.1:1", "not an http:// or https:// URL"},
		{"gs endpoint and another parameter", "gs://b?endpoint=http://127.0.0.1:1&universe_domain=x", `not "universe_domain"`},
		{"gs anonymous not a boolean", "gs://b?endpoint=http://127.0.0.1:1&anonymous=maybe", "not a boolean"},
		{"azurite", "azblob://c?protocol=http&domain=127.0.0.1:1&localemu=true", ""},
		{"azurite, another account", "azblob://c?protocol=http&domain=127.0.0.1:1&localemu=true&storage_account=other", "AZURE_STORAGE_KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := blob.Open(context.Background(), tc.url)
			if err == nil {
				s.Close()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Open = %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Open = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
