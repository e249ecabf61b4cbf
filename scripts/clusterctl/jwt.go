package main

// API keys for the cluster's server: Temporal's default JWT claim mapper
// checks a bearer token's RS256 signature against the keys of a JWKS
// (global.authorization.jwtKeyProvider.keySourceURIs) and reads its
// "permissions" claim ("NAMESPACE:ROLE"). The script makes one signing
// key and mints tokens with it; nothing here is a general JWT library.

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// keyFile is the signing key in the directory of jwks and token.
const keyFile = "jwt-key.pem"

var b64 = base64.RawURLEncoding

// makeJWKS makes dir's signing key unless it has one, and writes the
// JWKS of its public key to dir/jwks.json.
func makeJWKS(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(dir, keyFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return err
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path+".new", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			return err
		}
		if err := os.Rename(path+".new", path); err != nil {
			return err
		}
	}
	k, kid, err := signingKey(dir)
	if err != nil {
		return err
	}
	set := map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
		"n": b64.EncodeToString(k.N.Bytes()),
		"e": b64.EncodeToString(big.NewInt(int64(k.E)).Bytes()),
	}}}
	data, err := json.MarshalIndent(set, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "jwks.json"), append(data, '\n'), 0o644)
}

// signingKey reads dir's key; its id is a digest of its public half.
func signingKey(dir string) (*rsa.PrivateKey, string, error) {
	data, err := os.ReadFile(filepath.Join(dir, keyFile))
	if err != nil {
		return nil, "", err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, "", fmt.Errorf("%s: no PEM block", filepath.Join(dir, keyFile))
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, "", err
	}
	k, ok := parsed.(*rsa.PrivateKey)
	if !ok {
		return nil, "", fmt.Errorf("%s: not an RSA key", filepath.Join(dir, keyFile))
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(pub)
	return k, "troupe-" + hex.EncodeToString(sum[:6]), nil
}

// mintToken signs a JWT (RS256) for subject with permissions, issued at
// now and valid for ttl.
func mintToken(dir, subject string, ttl time.Duration, permissions []string, now time.Time) (string, error) {
	k, kid, err := signingKey(dir)
	if err != nil {
		return "", err
	}
	header, err := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kid})
	if err != nil {
		return "", err
	}
	claims, err := json.Marshal(map[string]any{"sub": subject, "permissions": permissions,
		"iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(ttl).Unix()})
	if err != nil {
		return "", err
	}
	signed := b64.EncodeToString(header) + "." + b64.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest[:])
	if err != nil {
		return "", err
	}
	return signed + "." + b64.EncodeToString(sig), nil
}
