package codec_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/codec"
)

// TestFingerprintAgree: the rule of which workers may share a task queue,
// each reading what the other seals. Rotation's steps agree; a worker
// that could not read the other's payloads does not, and the reason names
// the key it lacks.
func TestFingerprintAgree(t *testing.T) {
	k1, k2, k3 := key("k1", 1), key("k2", 2), key("k3", 3)
	other1 := key("k1", 9) // another key under k1's id
	fp := func(active string, keys ...codec.Key) codec.Fingerprint {
		return mustNew(t, active, keys...).Fingerprint()
	}
	tests := []struct {
		name string
		a, b codec.Fingerprint
		want string // "" when they agree, else what the reason says
	}{
		{"no keys beside no keys", fp(""), fp(""), ""},
		{"same key", fp("", k1), fp("", k1), ""},
		{"rotation, step 1: the new key beside the old, the old active", fp("k1", k1, k2), fp("", k1), ""},
		{"rotation, step 2: the new key active beside the old active", fp("k2", k1, k2), fp("k1", k1, k2), ""},
		{"rotation, step 3: the old key dropped", fp("k2", k2), fp("k2", k1, k2), ""},
		{"supersets, other actives", fp("k2", k1, k2, k3), fp("k1", k1, k2), ""},
		{"no keys beside keys", fp(""), fp("", k1), `seals payloads with key "k1", and this one has no keys`},
		{"keys beside no keys", fp("", k1), fp(""), `it has no keys, and this one seals payloads with key "k1"`},
		{"another key", fp("", k2), fp("", k1), `it seals payloads with key "k1", which this one does not have (this one's keys: k2), and this one seals payloads with key "k2", which it does not have (its keys: k1)`},
		{"the new key active before the others have it", fp("k2", k1, k2), fp("", k1), `seals payloads with key "k2", which it does not have`},
		{"the old one active beside workers that dropped it", fp("k1", k1, k2), fp("k2", k2), `key "k1", which it does not have (its keys: k2)`},
		{"one id, two keys", fp("", other1), fp("", k1), `its key "k1" is another key than this one's of the same id`},
		{"one id, two keys, not active", fp("k2", other1, k2), fp("k2", k1, k2), `its key "k1" is another key`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, pair := range [][2]codec.Fingerprint{{tt.a, tt.b}, {tt.b, tt.a}} {
				err := pair[0].Agree(pair[1])
				switch {
				case tt.want == "" && err != nil:
					t.Errorf("%s beside %s: %v, want them to agree", pair[0], pair[1], err)
				case tt.want != "" && err == nil:
					t.Errorf("%s beside %s agree, want them not to", pair[0], pair[1])
				}
			}
			if err := tt.a.Agree(tt.b); tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("%s beside %s: %v, want it to say %q", tt.a, tt.b, err, tt.want)
			}
		})
	}
}

// TestFingerprintString: a fingerprint goes into an identity and comes
// back whole, shows no key, and tells two keys of one id apart.
func TestFingerprintString(t *testing.T) {
	c := mustNew(t, "k2", key("k1", 1), key("k2", 2), key("a.0", 3))
	f := c.Fingerprint()
	s := f.String()
	if !strings.HasPrefix(s, "*k2:") || strings.ContainsAny(s, " \t") || strings.Count(s, ",") != 2 {
		t.Errorf("fingerprint %q: want the active key first, marked, no spaces", s)
	}
	for _, fill := range []byte{1, 2, 3} {
		if strings.Contains(s, b64(fill)[:8]) || strings.Contains(s, hex.EncodeToString([]byte{fill, fill, fill})) {
			t.Errorf("fingerprint %q shows a key", s)
		}
	}
	back, err := codec.ParseFingerprint(s)
	if err != nil || back.String() != s || back.Agree(f) != nil {
		t.Errorf("ParseFingerprint(%q) = %v, %v", s, back, err)
	}
	if a, b := mustNew(t, "", key("k1", 1)).Fingerprint().String(), mustNew(t, "", key("k1", 9)).Fingerprint().String(); a == b {
		t.Errorf("two keys of one id have one fingerprint, %s", a)
	}
	if s := mustNew(t, "").Fingerprint().String(); s != "none" {
		t.Errorf("no keys: %q, want none", s)
	}
	var none *codec.Codec
	if s := none.Fingerprint().String(); s != "none" {
		t.Errorf("a nil codec: %q, want none", s)
	}
	for _, bad := range []string{"", "k1", "k1:zz", "*k1:ab,*k2:cd", "k1:ab", "*k1:ab,k1:cd", "*k 1:ab"} {
		if _, err := codec.ParseFingerprint(bad); err == nil {
			t.Errorf("ParseFingerprint(%q) took it", bad)
		}
	}
}

// TestWithFingerprint: the field goes after who the worker is, replaces
// one it had, and FingerprintOf reads it back with the rest as it was.
func TestWithFingerprint(t *testing.T) {
	f := mustNew(t, "", key("k1", 1)).Fingerprint()
	tests := []struct {
		name, identity, want string
	}{
		{"troupe's", "7@h traces=on troupe model=the offline scenarios blob=file:///b#1", "7@h keys=" + f.String() + " traces=on troupe model=the offline scenarios blob=file:///b#1"},
		{"the SDK's default", "7@h@", "7@h@ keys=" + f.String()},
		{"again", "7@h keys=none troupe model=m", "7@h keys=" + f.String() + " troupe model=m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := codec.WithFingerprint(tt.identity, f)
			if got != tt.want {
				t.Errorf("WithFingerprint(%q) = %q, want %q", tt.identity, got, tt.want)
			}
			back, known, rest := codec.FingerprintOf(got)
			if !known || back.String() != f.String() {
				t.Errorf("FingerprintOf(%q) = %s, %v", got, back, known)
			}
			if _, _, was := codec.FingerprintOf(tt.identity); rest != was {
				t.Errorf("FingerprintOf(%q) leaves %q, want %q", got, rest, was)
			}
		})
	}
	if _, known, _ := codec.FingerprintOf("7@h troupe model=m"); known {
		t.Error("an identity of before fingerprints states one")
	}
}

// TestKeyErrorFailure: a payload a worker cannot open (an activity's
// input, decoded before any interceptor) fails for good, typed
// troupe.PayloadKey, rather than being retried by the same worker for as
// long as the retry policy lets it.
func TestKeyErrorFailure(t *testing.T) {
	if codec.ErrorType != troupe.ErrPayloadKey {
		t.Fatalf("codec.ErrorType %q, troupe.ErrPayloadKey %q", codec.ErrorType, troupe.ErrPayloadKey)
	}
	sealed, _ := mustNew(t, "", key("k1", 1)).Encode([]*commonpb.Payload{payload(t, canary)})
	wrong := mustNew(t, "", key("k2", 2))
	var o client.Options
	wrong.Apply(&o)
	_, kerr := wrong.Decode(sealed)
	f := o.FailureConverter.ErrorToFailure(fmt.Errorf("unable to decode the activity function input payload with error: %w for function name: SandboxCall", kerr))
	info := f.GetApplicationFailureInfo()
	if info.GetType() != troupe.ErrPayloadKey || !info.GetNonRetryable() || !strings.Contains(f.GetMessage(), `sealed with key "k1"`) || f.GetEncodedAttributes() != nil {
		t.Errorf("failure %v: want a non-retryable %s naming k1, unsealed", f, troupe.ErrPayloadKey)
	}
	if troupe.ErrorType(o.FailureConverter.FailureToError(f)) != troupe.ErrPayloadKey {
		t.Errorf("read back: %v", o.FailureConverter.FailureToError(f))
	}
}

// TestOnKeyError: the first payload of each key id a codec cannot open is
// reported, once; a payload it opens is not.
func TestOnKeyError(t *testing.T) {
	c := mustNew(t, "", key("k2", 2))
	var heard atomic.Int32
	var last atomic.Pointer[codec.KeyError]
	c.OnKeyError(func(ke *codec.KeyError) { heard.Add(1); last.Store(ke) })
	byK1, _ := mustNew(t, "", key("k1", 1)).Encode([]*commonpb.Payload{payload(t, canary)})
	byK3, _ := mustNew(t, "", key("k3", 3)).Encode([]*commonpb.Payload{payload(t, canary)})
	byK2, _ := c.Encode([]*commonpb.Payload{payload(t, canary)})
	for range 3 {
		c.Decode(byK1)
		c.Decode(byK2)
	}
	if heard.Load() != 1 || last.Load().ID != "k1" || !errors.Is(last.Load(), codec.ErrUnknownKey) {
		t.Errorf("heard %d reports (last %v), want one of k1", heard.Load(), last.Load())
	}
	c.Decode(byK3)
	if heard.Load() != 2 || last.Load().ID != "k3" {
		t.Errorf("heard %d reports (last %v), want a second one, of k3", heard.Load(), last.Load())
	}
}
