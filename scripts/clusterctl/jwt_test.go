package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
)

// TestTokenAsTheServerReadsIt: the tokens token mints are read by the
// Temporal server's own default JWT claim mapper, given the JWKS jwks
// writes (as a file:// key source, as cluster.sh configures it), into the
// subject and roles they name; a token signed by another key, an expired
// one and one that is not a bearer token are refused. A second jwks keeps
// the key, so tokens minted before stay good.
func TestTokenAsTheServerReadsIt(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	for _, d := range []string{dir, other} {
		if err := makeJWKS(d); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, keyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("signing key: %v %v, want mode 0600", fi.Mode(), err)
	}
	now := time.Now()
	mint := func(dir string, ttl time.Duration, at time.Time, perms ...string) string {
		t.Helper()
		tok, err := mintToken(dir, "troupe-client", ttl, perms, at)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	good := mint(dir, time.Hour, now, "troupe:write", "temporal-system:read")
	if err := makeJWKS(dir); err != nil { // again: the same key
		t.Fatal(err)
	}
	cfg := &config.Authorization{PermissionsClaimName: "permissions",
		JWTKeyProvider: config.JWTKeyProvider{KeySourceURIs: []string{"file://" + filepath.Join(dir, "jwks.json")}}}
	mapper := authorization.NewDefaultJWTClaimMapper(authorization.NewDefaultTokenKeyProvider(cfg, log.NewNoopLogger()), cfg, log.NewNoopLogger())

	claims, err := mapper.GetClaims(&authorization.AuthInfo{AuthToken: "Bearer " + good})
	if err != nil {
		t.Fatalf("a good token: %v", err)
	}
	if claims.Subject != "troupe-client" || claims.Namespaces["troupe"] != authorization.RoleWriter || claims.System != authorization.RoleReader {
		t.Errorf("claims %+v: want troupe-client, writer of troupe, reader of the cluster", claims)
	}
	for _, tc := range []struct{ name, header string }{
		{"another key", "Bearer " + mint(other, time.Hour, now, "troupe:admin")},
		{"expired", "Bearer " + mint(dir, time.Hour, now.Add(-2*time.Hour), "troupe:admin")},
		{"not bearer", good},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if c, err := mapper.GetClaims(&authorization.AuthInfo{AuthToken: tc.header}); err == nil {
				t.Errorf("refused by none: claims %+v", c)
			}
		})
	}
}
