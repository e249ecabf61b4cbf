package codec_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/troupe-dev/troupe/codec"
)

const canary = "canary-7f3a: the Acme deal closes at 40% off"

func key(id string, fill byte) codec.Key {
	return codec.Key{ID: id, Secret: bytes.Repeat([]byte{fill}, codec.KeySize)}
}

func mustNew(t *testing.T, active string, keys ...codec.Key) *codec.Codec {
	t.Helper()
	c, err := codec.New(keys, active)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func payload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSealAndOpen(t *testing.T) {
	c := mustNew(t, "", key("k1", 1))
	in := []*commonpb.Payload{payload(t, canary), payload(t, map[string]int{"n": 1}), payload(t, nil)}
	sealed, err := c.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range sealed {
		if !codec.Sealed(p) || string(p.Metadata[codec.MetadataKeyID]) != "k1" {
			t.Errorf("payload %d: metadata %v, want sealed with k1", i, p.Metadata)
		}
		raw, _ := proto.Marshal(p)
		if bytes.Contains(raw, []byte("canary-7f3a")) || bytes.Contains(raw, []byte("json/plain")) {
			t.Errorf("payload %d: plain text in the sealed payload", i)
		}
	}
	again, _ := c.Encode(in[:1])
	if bytes.Equal(again[0].Data, sealed[0].Data) {
		t.Error("the same payload sealed twice gave the same bytes: the nonce is not fresh")
	}
	out, err := c.Decode(sealed)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if !proto.Equal(in[i], out[i]) {
			t.Errorf("payload %d: opened %v, want %v", i, out[i], in[i])
		}
	}
}

func TestDecodeFails(t *testing.T) {
	k1 := mustNew(t, "", key("k1", 1))
	sealed, err := k1.Encode([]*commonpb.Payload{payload(t, canary)})
	if err != nil {
		t.Fatal(err)
	}
	tampered := proto.Clone(sealed[0]).(*commonpb.Payload)
	tampered.Data[len(tampered.Data)-1] ^= 1
	relabelled := proto.Clone(sealed[0]).(*commonpb.Payload)
	relabelled.Metadata[codec.MetadataKeyID] = []byte("k2")
	short := proto.Clone(sealed[0]).(*commonpb.Payload)
	short.Data = short.Data[:5]
	tests := []struct {
		name    string
		c       *codec.Codec
		p       *commonpb.Payload
		cause   error
		message []string
	}{
		{"no keys", mustNew(t, ""), sealed[0], codec.ErrUnknownKey, []string{`"k1"`, "no keys", codec.EnvKeys}},
		{"other keys", mustNew(t, "", key("k2", 2), key("k3", 3)), sealed[0], codec.ErrUnknownKey, []string{`"k1"`, "k2, k3"}},
		{"same id, other key", mustNew(t, "", key("k1", 9)), sealed[0], codec.ErrWrongKey, []string{`"k1"`, "two different keys"}},
		{"altered", k1, tampered, codec.ErrWrongKey, []string{`"k1"`}},
		{"short", k1, short, codec.ErrWrongKey, []string{`"k1"`}},
		{"id swapped", mustNew(t, "", key("k1", 1), key("k2", 1)), relabelled, codec.ErrWrongKey, []string{`"k2"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.c.Decode([]*commonpb.Payload{tt.p})
			var ke *codec.KeyError
			if !errors.As(err, &ke) || !errors.Is(err, tt.cause) {
				t.Fatalf("Decode = %v, %v; want a *KeyError of %v", out, err, tt.cause)
			}
			for _, m := range tt.message {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
			// Through the data converter, as the SDK decodes.
			var s string
			if err := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), tt.c).FromPayload(tt.p, &s); !errors.As(err, &ke) || s != "" {
				t.Errorf("FromPayload = %q, %v; want a *KeyError", s, err)
			}
		})
	}
	t.Run("not sealed passes", func(t *testing.T) {
		p := payload(t, "plain, from before the codec")
		out, err := mustNew(t, "", key("k2", 2)).Decode([]*commonpb.Payload{p})
		if err != nil || !proto.Equal(out[0], p) {
			t.Errorf("Decode = %v, %v; want it unchanged", out, err)
		}
	})
	t.Run("no keys seals nothing", func(t *testing.T) {
		p := payload(t, canary)
		out, err := mustNew(t, "").Encode([]*commonpb.Payload{p})
		if err != nil || !proto.Equal(out[0], p) {
			t.Errorf("Encode = %v, %v; want it unchanged", out, err)
		}
	})
}

// TestRotation: a new active key is added beside the old one; what the
// old one sealed still opens, what the new one seals is not readable
// with the old one alone, and says which key it wants.
func TestRotation(t *testing.T) {
	old := mustNew(t, "", key("2026-01", 1))
	rotated := mustNew(t, "", key("2026-01", 1), key("2026-06", 2))
	pinned := mustNew(t, "2026-01", key("2026-01", 1), key("2026-06", 2))
	before, _ := old.Encode([]*commonpb.Payload{payload(t, canary)})
	after, _ := rotated.Encode([]*commonpb.Payload{payload(t, canary)})
	if got := string(after[0].Metadata[codec.MetadataKeyID]); got != "2026-06" || rotated.ActiveKey() != "2026-06" {
		t.Errorf("the rotated codec sealed with %q (active %q), want the last key given", got, rotated.ActiveKey())
	}
	if pinned.ActiveKey() != "2026-01" {
		t.Errorf("active %q, want the one named", pinned.ActiveKey())
	}
	for _, p := range append(before, after...) {
		if _, err := rotated.Decode([]*commonpb.Payload{p}); err != nil {
			t.Errorf("the rotated codec does not open a payload of %s: %v", p.Metadata[codec.MetadataKeyID], err)
		}
	}
	if _, err := old.Decode(after); !errors.Is(err, codec.ErrUnknownKey) || !strings.Contains(err.Error(), "2026-06") {
		t.Errorf("the old codec on a new payload: %v, want ErrUnknownKey naming 2026-06", err)
	}
}

func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name   string
		keys   []codec.Key
		active string
		want   string
	}{
		{"bad id", []codec.Key{key("a key", 1)}, "", `key id "a key"`},
		{"short key", []codec.Key{{ID: "k", Secret: []byte("short")}}, "", "5 bytes, want 32"},
		{"twice", []codec.Key{key("k", 1), key("k", 2)}, "", "given twice"},
		{"active unknown", []codec.Key{key("k", 1)}, "j", `"j" is not among the keys given (k)`},
		{"active without keys", nil, "j", "no key is given"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := codec.New(tt.keys, tt.active)
			var ce *codec.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want a *ConfigError saying %q", err, tt.want)
			}
		})
	}
}

func b64(fill byte) string {
	return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{fill}, codec.KeySize))
}

func TestFromEnv(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("keys", "# rotated in June\nold:"+b64(1)+"\n\nnew:"+strings.TrimRight(b64(2), "=")+"  # active\n", 0o600)
	open := write("open", "k:"+b64(1)+"\n", 0o644)
	empty := write("empty", "# nothing yet\n", 0o600)
	bad := write("bad", "k:not-base64!!\n", 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		env    map[string]string
		active string
		ids    string
		err    string
	}{
		{"nothing", nil, "", "", ""},
		{"file", map[string]string{codec.EnvKeyFile: good}, "new", "new old", ""},
		{"file, active named", map[string]string{codec.EnvKeyFile: good, codec.EnvKeyID: "old"}, "old", "new old", ""},
		{"env", map[string]string{codec.EnvKeys: "a:" + b64(3) + ",b:" + b64(4)}, "b", "a b", ""},
		{"file and env", map[string]string{codec.EnvKeyFile: good, codec.EnvKeys: "c:" + b64(3)}, "c", "c new old", ""},
		{"file readable by others", map[string]string{codec.EnvKeyFile: open}, "", "", "mode 0644"},
		{"symbolic link", map[string]string{codec.EnvKeyFile: link}, "", "", "want a regular file"},
		{"missing file", map[string]string{codec.EnvKeyFile: filepath.Join(dir, "nope")}, "", "", "no such file"},
		{"empty file", map[string]string{codec.EnvKeyFile: empty}, "", "", "no keys in it"},
		{"not base64", map[string]string{codec.EnvKeyFile: bad}, "", "", `key "k": not base64`},
		{"no id", map[string]string{codec.EnvKeys: b64(3)}, "", "", "without its id"},
		{"same id in file and env", map[string]string{codec.EnvKeyFile: good, codec.EnvKeys: "old:" + b64(5)}, "", "", `"old" is given twice`},
		{"unknown active", map[string]string{codec.EnvKeys: "a:" + b64(3), codec.EnvKeyID: "z"}, "", "", codec.EnvKeyID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := codec.FromEnv(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if tt.err != "" {
				var ce *codec.ConfigError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("FromEnv = %v, want a *ConfigError saying %q", err, tt.err)
				}
				for _, fill := range []byte{1, 2, 3, 5} {
					if strings.Contains(err.Error(), b64(fill)[:20]) {
						t.Errorf("the error %q shows a key", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.ActiveKey() != tt.active || strings.Join(c.KeyIDs(), " ") != tt.ids {
				t.Errorf("active %q, keys %v; want %q, %s", c.ActiveKey(), c.KeyIDs(), tt.active, tt.ids)
			}
		})
	}
}

// TestFailures: with a key, a failure's message is sealed too, and a
// process without that key hears which key it lacks.
func TestFailures(t *testing.T) {
	opts := func(c *codec.Codec) client.Options {
		var o client.Options
		c.Apply(&o)
		return o
	}
	sealing := opts(mustNew(t, "", key("k1", 1)))
	f := sealing.FailureConverter.ErrorToFailure(temporal.NewApplicationError(canary, "troupe.Test"))
	raw, _ := proto.Marshal(f)
	if bytes.Contains(raw, []byte("canary-7f3a")) {
		t.Fatal("the failure's message is plain text")
	}
	if got := sealing.FailureConverter.FailureToError(f).Error(); !strings.HasPrefix(got, canary) {
		t.Errorf("opened: %q, want %q", got, canary)
	}
	got := opts(mustNew(t, "", key("k2", 2))).FailureConverter.FailureToError(f).Error()
	if !strings.Contains(got, `sealed with key "k1"`) {
		t.Errorf("without the key: %q, want it to name the key", got)
	}
	var apperr *temporal.ApplicationError
	if err := sealing.FailureConverter.FailureToError(f); !errors.As(err, &apperr) || apperr.Type() != "troupe.Test" {
		t.Errorf("the failure's type: %v", err)
	}
	// A failure to open a payload is not sealed: the process that lacks
	// this one's key must hear which key this one lacks.
	_, kerr := mustNew(t, "", key("k2", 2)).Decode([]*commonpb.Payload{f.GetEncodedAttributes()})
	unsealed := sealing.FailureConverter.ErrorToFailure(fmt.Errorf("unable to decode the workflow function input payload with error: %w", kerr))
	if !strings.Contains(unsealed.GetMessage(), `sealed with key "k1"`) || unsealed.GetEncodedAttributes() != nil {
		t.Errorf("a failure to open a payload became %v, want it unsealed, naming the key", unsealed)
	}
	// No keys: failures stay as the SDK writes them.
	plain := opts(mustNew(t, "")).FailureConverter.ErrorToFailure(errors.New(canary))
	if plain.GetMessage() != canary {
		t.Errorf("with no keys the message is %q", plain.GetMessage())
	}
	var none *codec.Codec
	var o client.Options
	none.Apply(&o)
	if o.DataConverter != nil || o.FailureConverter != nil {
		t.Error("a nil codec changed the options")
	}
}

// TestHandler answers the codec endpoint as the Web UI and the temporal
// CLI call it.
func TestHandler(t *testing.T) {
	c := mustNew(t, "", key("k1", 1))
	sealed, _ := c.Encode([]*commonpb.Payload{payload(t, canary)})
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: sealed})
	if err != nil {
		t.Fatal(err)
	}
	const ui = "http://127.0.0.1:8233"
	tests := []struct {
		name, method, path, origin, token string
		status                            int
		opens                             bool
	}{
		{"UI decode", http.MethodPost, "/decode", ui, "", http.StatusOK, true},
		{"UI decode under a namespace", http.MethodPost, "/default/decode", ui, "", http.StatusOK, true},
		{"UI preflight", http.MethodOptions, "/decode", ui, "", http.StatusNoContent, false},
		{"other origin", http.MethodPost, "/decode", "https://evil.example", "", http.StatusForbidden, false},
		{"CLI with token", http.MethodPost, "/decode", "", "s3cret", http.StatusOK, true},
		{"CLI without token", http.MethodPost, "/decode", "", "-", http.StatusUnauthorized, false},
		{"wrong token", http.MethodPost, "/decode", "", "guess", http.StatusUnauthorized, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := codec.HandlerOptions{Origins: []string{ui}}
			if tt.token != "" {
				o.Token = "s3cret"
			}
			req := httptest.NewRequest(tt.method, tt.path, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Namespace", "default")
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			if tt.token != "" && tt.token != "-" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			rec := httptest.NewRecorder()
			c.Handler(o).ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("status %d (%s), want %d", rec.Code, rec.Body, tt.status)
			}
			if tt.origin == ui && rec.Header().Get("Access-Control-Allow-Origin") != ui {
				t.Errorf("Access-Control-Allow-Origin %q, want the UI's", rec.Header().Get("Access-Control-Allow-Origin"))
			}
			if tt.method == http.MethodOptions && !strings.Contains(rec.Header().Get("Access-Control-Allow-Headers"), "X-Namespace") {
				t.Errorf("the preflight allows headers %q", rec.Header().Get("Access-Control-Allow-Headers"))
			}
			if !tt.opens {
				if strings.Contains(rec.Body.String(), "canary-7f3a") {
					t.Error("a refused request was decoded")
				}
				return
			}
			var out commonpb.Payloads
			if err := protojson.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("answer %s: %v", rec.Body, err)
			}
			var s string
			if err := converter.GetDefaultDataConverter().FromPayload(out.Payloads[0], &s); err != nil || s != canary {
				t.Errorf("decoded %q, %v; want the canary", s, err)
			}
		})
	}
}
