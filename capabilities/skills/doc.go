// Package skills gives agents skills: folders of know-how, each a
// SKILL.md (YAML frontmatter with at least name and description, then
// instructions) with any scripts, references and assets beside it, that
// an agent loads when a task calls for one.
//
// A skill comes from a Source: Inline (Go values), FS (an fs.FS, such as
// an embed.FS), Dir (a host directory under the allowed roots of a
// sandbox.Policy) or Git (a repository read with go-git: a URL or a local
// path, a ref, a subpath). New reads the sources once and returns the
// capability, whose Mode says how the skills reach the agent:
//
//   - Eager: every skill is copied into the workspace, under
//     .agents/skills/<name>/, by the sandbox's manifest, so it is there
//     before the first command.
//   - Lazy (the default): the load_skill tool copies one skill into the
//     workspace when the model asks for it. It runs as a sandbox
//     activity, through the agent's session.
//   - Text: for agents without a sandbox, the read_skill tool returns a
//     skill's instructions, or one of its files, as text.
//
// In every mode, the instructions hold the index (name, description and,
// for the sandbox modes, where SKILL.md is) and say when to use a skill:
// when the task matches its description, or when the user names it as
// $name.
//
// Those are the bundled skills. An agent may also have learnt skills:
// those memory consolidation wrote in its memory scope
// (memories/skills/<name>/, package memory). WithLearnt binds a Learnt,
// which lists them, to the agent's first Lazy or Text capability; the
// worker does so for every agent that reads memory (package workflows).
// The bound capability lists them again at every model call, for its
// index (DynamicInstructions, which lists them after the bundled ones,
// marked as learnt from earlier work, as their SKILL.md files say them),
// and at every load_skill and read_skill call, which read the one skill
// asked for and serve it as they serve a bundled one (a script, a file
// that starts with "#!", is written executable: a store keeps no modes).
// The index reads only SKILL.md files, and only those whose version
// (LearntFile.Version) a LearntCache lacks: a worker shares one cache
// among its agents (SharedCache), so a call whose learnt skills have not
// changed costs one listing. A bundled skill of the agent wins over a
// learnt one of its name. An Eager capability takes no learnt skills.
//
// The contract a caller relies on:
//
//  1. Every skill is validated when New loads it, before any graph is
//     served: the name matches ^[a-z0-9][a-z0-9-]{0,63}$ and its folder's
//     name (ErrInvalidName); the frontmatter parses (ErrFrontmatter); the
//     description is present and at most MaxDescription bytes
//     (ErrDescription); files, bytes and skills are within Limits
//     (ErrTooLarge, checked before a file is read); no path leaves the
//     skill's folder (sandbox.ErrPathEscape); no file is a symlink
//     (ErrSymlink); no two skills of one agent share a name
//     (ErrDuplicate, also across capabilities: see CheckAgent). Errors are
//     *Error values that say which source and skill, and wrap those
//     sentinels.
//  2. Host paths are read only under the Policy's AllowedRoots
//     (sandbox.ErrSourceNotAllowed otherwise), through an os.Root.
//  3. Sources are read where New is called (the worker's start), never in
//     workflow code; the tools run as activities and read only the
//     skills New loaded, so a bundled skill cannot change under a run's
//     feet in the middle of a worker's life.
//  4. Learnt skills are listed at each model call and tool call, in those
//     activities, never in workflow code, and pass the rules of 1 (the
//     capability's Limits, checked as the files are read: a listing gives
//     no sizes). The index checks what SKILL.md decides (the frontmatter,
//     the name and its folder, the description, SKILL.md's size): a skill
//     whose SKILL.md breaks a rule, that a bundled skill's name shadows,
//     or that is past MaxSkills (bundled and learnt together) is left out
//     and reported to Learnt.Skipped, and the call goes on; only a listing
//     that fails fails the call. load_skill and read_skill check the whole
//     skill they read: one whose other files break a rule (too large, too
//     many, a path that leaves its folder, one that cannot be read) fails
//     the tool call with an *Error that says why, reported too. Each is
//     reported once per version of the skill's files and reason.
package skills
