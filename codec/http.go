package codec

// The codec over HTTP, the "codec server" of the Temporal Web UI and the
// temporal CLI: POST .../decode and .../encode with a JSON body of
// payloads, answered with the payloads decoded or encoded.

import (
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
)

// HandlerOptions configures Handler. Its zero value serves clients that
// are not browsers (the temporal CLI), with no token.
type HandlerOptions struct {
	// Origins are the origins ("http://127.0.0.1:8233", scheme, host and
	// port, as a browser sends them) of the Web UIs whose pages may call
	// the handler: a request from a browser page of another origin is
	// refused (403), so that no other site a user visits can have their
	// browser decode payloads.
	Origins []string
	// Token, when set, is the bearer token every request must carry
	// (Authorization: Bearer TOKEN), as the temporal CLI sends it with
	// --codec-auth; CORS preflights, which carry none, are answered
	// without it.
	Token string
}

// Handler serves c's Decode and Encode at any path that ends in /decode
// or /encode, as the Web UI and the temporal CLI call a codec endpoint.
func (c *Codec) Handler(o HandlerOptions) http.Handler {
	codec := converter.NewPayloadCodecHTTPHandler(c)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" {
			if !slices.Contains(o.Origins, strings.TrimRight(origin, "/")) {
				http.Error(w, "codec server: origin "+origin+" is not allowed (troupe codec-server --ui-origin)", http.StatusForbidden)
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Add("Vary", "Origin")
			if r.Method == http.MethodOptions {
				h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
				h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		if o.Token != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(o.Token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="troupe codec server"`)
				http.Error(w, "codec server: a bearer token is required", http.StatusUnauthorized)
				return
			}
		}
		codec.ServeHTTP(w, r)
	})
}
