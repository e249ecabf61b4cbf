package codec

// The codec itself: AES-256-GCM over each payload, marshalled whole, with
// the key's id in the sealed payload's metadata and bound into the seal.

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// The metadata of a sealed payload.
const (
	// MetadataEncoding is the metadata key of a payload's encoding, which
	// is Encoding for a sealed payload.
	MetadataEncoding = converter.MetadataEncoding
	// Encoding is the encoding of a sealed payload: the Web UI shows such
	// payloads as encrypted until a codec server decodes them.
	Encoding = "binary/encrypted"
	// MetadataKeyID is the metadata key that names the key a payload is
	// sealed with.
	MetadataKeyID = "encryption-key-id"
	// MetadataCipher is the metadata key that names the cipher, Cipher.
	MetadataCipher = "encryption-cipher"
	// Cipher is the cipher of Troupe's sealed payloads.
	Cipher = "AES-256-GCM"
)

// KeySize is the size of a key: 32 bytes (AES-256).
const KeySize = 32

// Key is one key of a Codec.
type Key struct {
	// ID names the key in the payloads it seals: letters, digits, '.',
	// '_' and '-', up to 64 of them. It is not secret.
	ID string
	// Secret is the key: KeySize random bytes.
	Secret []byte
}

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Codec seals and opens payloads (a converter.PayloadCodec). Make one with
// New or FromEnv; it is safe for concurrent use.
type Codec struct {
	active string
	keys   map[string]cipher.AEAD
	ids    []string          // sorted, for messages
	sums   map[string]string // the keys' fingerprints (Fingerprint)
	// report, when set, hears the first *KeyError of each key id
	// (OnKeyError); reported holds the ids it heard of.
	report   atomic.Pointer[func(*KeyError)]
	reported sync.Map
}

var _ converter.PayloadCodec = (*Codec)(nil)

// New returns a codec of keys that seals with the key whose id is active,
// or with the last of keys when active is empty. With no keys (and no
// active id) it seals nothing (see the package doc). A key id used twice,
// an id that is not a valid one, a key that is not KeySize bytes, or an
// active id that is not among keys is a *ConfigError.
func New(keys []Key, active string) (*Codec, error) {
	c := &Codec{keys: make(map[string]cipher.AEAD, len(keys)), sums: make(map[string]string, len(keys))}
	for _, k := range keys {
		if !keyIDPattern.MatchString(k.ID) {
			return nil, &ConfigError{Err: fmt.Errorf("key id %q: want 1 to 64 letters, digits, '.', '_' or '-'", k.ID)}
		}
		if len(k.Secret) != KeySize {
			return nil, &ConfigError{Err: fmt.Errorf("key %q: %d bytes, want %d (AES-256)", k.ID, len(k.Secret), KeySize)}
		}
		if _, dup := c.keys[k.ID]; dup {
			return nil, &ConfigError{Err: fmt.Errorf("key id %q is given twice", k.ID)}
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, &ConfigError{Err: fmt.Errorf("key %q: %w", k.ID, err)}
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, &ConfigError{Err: fmt.Errorf("key %q: %w", k.ID, err)}
		}
		c.keys[k.ID] = aead
		c.sums[k.ID] = keySum(k)
		c.ids = append(c.ids, k.ID)
	}
	slices.Sort(c.ids)
	switch {
	case active != "":
		if _, ok := c.keys[active]; !ok {
			if len(keys) == 0 {
				return nil, &ConfigError{Err: fmt.Errorf("the active key %q is named, but no key is given", active)}
			}
			return nil, &ConfigError{Err: fmt.Errorf("the active key %q is not among the keys given (%s)", active, strings.Join(c.ids, ", "))}
		}
		c.active = active
	case len(keys) > 0:
		c.active = keys[len(keys)-1].ID
	}
	return c, nil
}

// ActiveKey returns the id of the key c seals with, or "" when c has
// none and seals nothing.
func (c *Codec) ActiveKey() string { return c.active }

// KeyIDs returns the ids of the keys c opens payloads with, sorted.
func (c *Codec) KeyIDs() []string { return slices.Clone(c.ids) }

// Encode seals each payload with the active key; with none, it returns
// payloads as they are.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	if c.active == "" {
		return payloads, nil
	}
	aead := c.keys[c.active]
	aad := []byte(c.active)
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("codec: marshal a payload: %w", err)
		}
		sealed := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		if _, err := rand.Read(sealed); err != nil {
			return nil, fmt.Errorf("codec: nonce: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				MetadataEncoding: []byte(Encoding),
				MetadataKeyID:    aad,
				MetadataCipher:   []byte(Cipher),
			},
			Data: aead.Seal(sealed, sealed, plain, aad),
		}
	}
	return out, nil
}

// Decode opens each sealed payload with the key it names, and passes
// those that are not sealed through. A payload it cannot open is a
// *KeyError (which OnKeyError's func hears of).
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out, err := c.decode(payloads)
	if ke, ok := err.(*KeyError); ok {
		c.heard(ke)
	}
	return out, err
}

// OnKeyError sets report to hear of the first payload of each key id that
// Decode cannot open, once per key id for the life of c: a worker logs
// it, so that a history it cannot replay (a workflow task that fails on
// it, again and again) is said once, naming the key it lacks. It may be
// set at any time; a nil report hears nothing.
func (c *Codec) OnKeyError(report func(*KeyError)) {
	if report == nil {
		c.report.Store(nil)
		return
	}
	c.report.Store(&report)
}

func (c *Codec) heard(ke *KeyError) {
	report := c.report.Load()
	if report == nil {
		return
	}
	if _, said := c.reported.LoadOrStore(ke.ID, true); !said {
		(*report)(ke)
	}
}

func (c *Codec) decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if !Sealed(p) {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		aead, ok := c.keys[id]
		if !ok {
			return nil, &KeyError{ID: id, Known: c.KeyIDs(), Err: ErrUnknownKey}
		}
		data := p.GetData()
		if len(data) < aead.NonceSize()+aead.Overhead() {
			return nil, &KeyError{ID: id, Known: c.KeyIDs(), Err: ErrWrongKey}
		}
		plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(id))
		if err != nil {
			return nil, &KeyError{ID: id, Known: c.KeyIDs(), Err: ErrWrongKey}
		}
		var opened commonpb.Payload
		if err := proto.Unmarshal(plain, &opened); err != nil {
			return nil, fmt.Errorf("codec: a payload sealed with key %q opens to no payload: %w", id, err)
		}
		out[i] = &opened
	}
	return out, nil
}

// Sealed reports whether p is a payload sealed by a Codec.
func Sealed(p *commonpb.Payload) bool {
	return string(p.GetMetadata()[MetadataEncoding]) == Encoding && len(p.GetMetadata()[MetadataKeyID]) > 0
}

// The causes of a *KeyError.
var (
	// ErrUnknownKey: the payload is sealed with a key the codec does not
	// have.
	ErrUnknownKey = errors.New("unknown key")
	// ErrWrongKey: the codec's key of the payload's key id does not open
	// it: another key carries that id, or the payload was altered.
	ErrWrongKey = errors.New("wrong key")
)

// KeyError is a sealed payload that a codec cannot open.
type KeyError struct {
	// ID is the id of the key the payload is sealed with.
	ID string
	// Known are the ids of the codec's keys, sorted.
	Known []string
	// Err is ErrUnknownKey or ErrWrongKey.
	Err error
}

func (e *KeyError) Error() string {
	if errors.Is(e.Err, ErrWrongKey) {
		return fmt.Sprintf("codec: a payload sealed with key %q does not open with the key %q of the process reading it: "+
			"two different keys carry that id (or the payload was altered); give that process the key that sealed it", e.ID, e.ID)
	}
	if len(e.Known) == 0 {
		return fmt.Sprintf("codec: a payload is sealed with key %q, and the process reading it has no keys: "+
			"give it that key (%s or %s)", e.ID, EnvKeyFile, EnvKeys)
	}
	return fmt.Sprintf("codec: a payload is sealed with key %q, which the process reading it does not have (its keys: %s): "+
		"add that key (%s or %s)", e.ID, strings.Join(e.Known, ", "), EnvKeyFile, EnvKeys)
}

func (e *KeyError) Unwrap() error { return e.Err }

// ConfigError is a set of keys that cannot make a Codec: a key file that
// is missing, unsafe or malformed, a bad key, an unknown active id.
type ConfigError struct {
	// Source says where the keys were read: a file, or an environment
	// variable; "" when New was given them.
	Source string
	// Err is the cause.
	Err error
}

func (e *ConfigError) Error() string {
	if e.Source == "" {
		return "codec: " + e.Err.Error()
	}
	return fmt.Sprintf("codec: %s: %v", e.Source, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }
