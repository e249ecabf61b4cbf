// Package cli is the troupe command line, reusable for your own graphs:
//
//	func main() { cli.Main(cli.Graph{Graph: mygraph.Graph(), Scenario: mygraph.Scenario}) }
//
// gives your binary the same commands as troupe: dev (embedded Temporal
// server, Web UI and a worker), worker (against TEMPORAL_ADDRESS), run
// (one run with live progress), mcp serve (the exposed agents as MCP
// tools, over stdio or streamable HTTP; see package mcp/server), and model
// serve (the scripted model server).
//
// Environment: OPENAI_API_KEY, OPENAI_BASE_URL and TROUPE_MODEL_API
// (responses|chat) choose the model; with no OPENAI_API_KEY the graphs'
// offline scenarios answer through the scripted model server. TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS, TEMPORAL_TLS_CLIENT_CERT_PATH,
// TEMPORAL_TLS_CLIENT_KEY_PATH and TEMPORAL_TLS_SERVER_CA_CERT_PATH choose the
// Temporal cluster; with no TEMPORAL_ADDRESS, dev and run embed a server
// whose state lives in TROUPE_HOME (default ~/.troupe). TROUPE_BLOB_URL
// overrides the blob store (default file://$TROUPE_HOME/blobs).
package cli
