// Package troupe is Troupe's vocabulary: the names and wire types that
// clients, the CLI, the MCP server and the workflows share.
package troupe
