// Package capabilities holds the sandbox-native behaviour a sandbox agent
// can carry: Shell (exec_command), Filesystem (apply_patch, view_image)
// and Compaction, with Default returning all three. The tools have the
// names, parameters and plain-text results that models already know from
// the OpenAI Agents SDK's sandbox agents. Skills live in the subpackage
// skills (skills.New); add them to the defaults with
// append(Default(), skillsCapability).
//
// It also reads a workspace's own guidance: ReadGuidance reads the
// AGENTS.md at the workspace's root through the sandbox session, bounded
// to MaxGuidanceBytes, and GuidanceInstructions renders it for the
// instructions. The worker reads it from the agent's manifest before its
// first model call (host.ManifestFile, BoundGuidance), before any
// workspace is made, and again from the workspace once it is provisioned
// (an activity each); the model activity adds it to every turn's
// instructions.
//
// The contract a caller relies on:
//
//  1. Every tool is built with agents.InSandbox: the worker runs it as an
//     activity on the host that holds the agent's sandbox, with the live
//     session in its context (sandbox.WithSession). Called without one, a
//     tool fails with ErrNoSession.
//  2. Paths are workspace-relative. "/workspace/x" is accepted as "x";
//     any other absolute path, and any path with a ".." element, is
//     rejected with an error that names it and wraps
//     sandbox.ErrPathEscape, before anything is read or written. The
//     session enforces the same confinement (and symlinks) again.
//  3. A tool's failure reaches the model as the tool's output, so it can
//     recover; only the sandbox dying fails the activity (the worker
//     checks the session before and after each call).
//  4. apply_patch computes every edit of a patch before it writes any, so
//     a patch that does not apply leaves the workspace as it was.
//  5. view_image returns an ImageOutput, which NewFunctionTool marshals to
//     tagged JSON; the model activity calls ExpandImages on the request's
//     input, which moves the image into agents.Item.Images, and the model
//     adapters send it as image content. The image never rides in a
//     Temporal payload of its own: as a large tool output it is stored in
//     the blob store by reference like any other.
//  6. Compaction's Trim is a pure function of the transcript; it trims the
//     model's view of it, never the stored transcript, and keeps the turn
//     structure valid.
package capabilities
