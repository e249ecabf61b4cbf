package codec

// What a worker says of its keys on a task queue, so that workers that
// could not read each other's payloads refuse to serve one queue: a
// fingerprint of each key (never the key), and the rule that says which
// fingerprints agree.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// fingerprintLabel separates the fingerprint's HMAC from any other use of
// a key: the key is never used bare, and a fingerprint opens nothing.
const fingerprintLabel = "troupe codec key fingerprint v1\x00"

// fingerprintSize is the bytes of a key's HMAC a fingerprint keeps: enough
// that two different keys of one id are told apart (a chance of 2^-32 that
// they are not), and nothing that helps guess a 256-bit key.
const fingerprintSize = 4

// Fingerprint says which keys a Codec holds and which one seals, without
// saying the keys: each key id with a short HMAC-SHA256 of its id under
// the key itself. Workers put it in their identity on a task queue
// (WithFingerprint), where anyone who can read the namespace sees it.
// The zero Fingerprint is a codec with no keys, which seals nothing.
type Fingerprint struct {
	// Active is the id of the key that seals; "" for none.
	Active string
	// Keys maps each key id to the hex of its HMAC.
	Keys map[string]string
}

// Fingerprint returns c's fingerprint; a nil c has no keys.
func (c *Codec) Fingerprint() Fingerprint {
	if c == nil || len(c.sums) == 0 {
		return Fingerprint{}
	}
	return Fingerprint{Active: c.active, Keys: c.sums}
}

// keySum is the fingerprint of one key.
func keySum(k Key) string {
	m := hmac.New(sha256.New, k.Secret)
	m.Write([]byte(fingerprintLabel + k.ID))
	return hex.EncodeToString(m.Sum(nil)[:fingerprintSize])
}

// String writes f as it goes in an identity: "none" for no keys, else the
// keys by id, "ID:HEX" separated by commas, the active one marked with a
// '*' before its id ("*2026-06:9f86d081,2026-01:60303ae2"), the active
// one first, then the others sorted. It has no spaces.
func (f Fingerprint) String() string {
	if len(f.Keys) == 0 {
		return "none"
	}
	ids := make([]string, 0, len(f.Keys))
	for id := range f.Keys {
		if id != f.Active {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	parts := make([]string, 0, len(f.Keys))
	if sum, ok := f.Keys[f.Active]; ok {
		parts = append(parts, "*"+f.Active+":"+sum)
	}
	for _, id := range ids {
		parts = append(parts, id+":"+f.Keys[id])
	}
	return strings.Join(parts, ",")
}

// ParseFingerprint reads what Fingerprint.String wrote.
func ParseFingerprint(s string) (Fingerprint, error) {
	if s == "none" {
		return Fingerprint{}, nil
	}
	f := Fingerprint{Keys: map[string]string{}}
	for _, part := range strings.Split(s, ",") {
		id, sum, ok := strings.Cut(part, ":")
		if active, marked := strings.CutPrefix(id, "*"); marked {
			if f.Active != "" {
				return Fingerprint{}, fmt.Errorf("codec: fingerprint %q: two active keys", s)
			}
			id, f.Active = active, active
		}
		if _, err := hex.DecodeString(sum); !ok || err != nil || sum == "" || !keyIDPattern.MatchString(id) {
			return Fingerprint{}, fmt.Errorf("codec: fingerprint %q: want ID:HEX for each key", s)
		}
		if _, dup := f.Keys[id]; dup {
			return Fingerprint{}, fmt.Errorf("codec: fingerprint %q: key %q twice", s, id)
		}
		f.Keys[id] = sum
	}
	if f.Active == "" {
		return Fingerprint{}, fmt.Errorf("codec: fingerprint %q: no active key ('*' before its id)", s)
	}
	return f, nil
}

// Agree says whether workers of fingerprints f and other can serve one
// task queue, where each reads what the other writes: nil when they can,
// else why not, naming key ids (never keys). The rule:
//
//  1. Both have no keys: they agree (nothing is sealed).
//  2. One has keys and the other none: they do not (the one without
//     cannot read what the other seals).
//  3. A key id that both hold must be the same key in both (the same
//     HMAC): else one cannot open what the other sealed with that id.
//  4. Each holds the key the other seals with. Other keys may differ, and
//     the active keys may too, so a rotation rolls out worker by worker:
//     first every worker gets the new key beside the old one (the old one
//     still active), then the new one is made active, then, once no
//     history still open holds payloads sealed with it, the old one goes.
//
// The rule is symmetric: Agree(a, b) and Agree(b, a) are both nil or
// both not.
func (f Fingerprint) Agree(other Fingerprint) error {
	switch {
	case len(f.Keys) == 0 && len(other.Keys) == 0:
		return nil
	case len(f.Keys) == 0:
		return fmt.Errorf("it seals payloads with key %q, and this one has no keys (%s or %s): it could not read them", other.Active, EnvKeyFile, EnvKeys)
	case len(other.Keys) == 0:
		return fmt.Errorf("it has no keys, and this one seals payloads with key %q: it could not read them", f.Active)
	}
	for _, id := range slices.Sorted(maps.Keys(f.Keys)) {
		if sum, ok := other.Keys[id]; ok && sum != f.Keys[id] {
			return fmt.Errorf("its key %q is another key than this one's of the same id (fingerprints %s and %s): each could not read what the other seals with it", id, sum, f.Keys[id])
		}
	}
	var why []string
	if _, ok := f.Keys[other.Active]; !ok {
		why = append(why, fmt.Sprintf("it seals payloads with key %q, which this one does not have (this one's keys: %s)", other.Active, strings.Join(slices.Sorted(maps.Keys(f.Keys)), ", ")))
	}
	if _, ok := other.Keys[f.Active]; !ok {
		why = append(why, fmt.Sprintf("this one seals payloads with key %q, which it does not have (its keys: %s)", f.Active, strings.Join(slices.Sorted(maps.Keys(other.Keys)), ", ")))
	}
	if len(why) > 0 {
		return errors.New(strings.Join(why, ", and "))
	}
	return nil
}

// keysField marks, in a worker's identity, the fingerprint of its keys.
// It goes right after the identity's first word (PID@HOST), as the
// sandbox store's field does.
const keysField = " keys="

// WithFingerprint is identity saying that its worker's keys are f
// (FingerprintOf reads it back); a field it had already is replaced.
func WithFingerprint(identity string, f Fingerprint) string {
	_, _, identity = FingerprintOf(identity)
	who, rest, _ := strings.Cut(identity, " ")
	if rest != "" {
		rest = " " + rest
	}
	return who + keysField + f.String() + rest
}

// FingerprintOf returns the fingerprint an identity states
// (WithFingerprint): known is false when it states none (a worker of
// before fingerprints, or not troupe's) or one that does not parse, which
// a caller then cannot compare. rest is the identity without the field.
func FingerprintOf(identity string) (f Fingerprint, known bool, rest string) {
	i := strings.Index(identity, keysField)
	if i < 0 {
		return Fingerprint{}, false, identity
	}
	value, after, _ := strings.Cut(identity[i+len(keysField):], " ")
	if after != "" {
		after = " " + after
	}
	f, err := ParseFingerprint(value)
	return f, err == nil, identity[:i] + after
}
