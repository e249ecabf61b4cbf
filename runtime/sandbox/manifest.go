package sandbox

// EntryKind names a kind of manifest entry.
type EntryKind string

// The kinds of manifest entries.
const (
	// EntryFile is a file with inline Content.
	EntryFile EntryKind = "file"
	// EntryDir is an empty directory.
	EntryDir EntryKind = "dir"
	// EntryLocalFile copies the host file Source.
	EntryLocalFile EntryKind = "local_file"
	// EntryLocalDir copies the host directory Source, recursively.
	EntryLocalDir EntryKind = "local_dir"
	// EntryGitRepo clones Source (a URL or a local path) at Ref with
	// go-git on the host, then copies the work tree in, so the sandbox
	// needs neither git nor network.
	EntryGitRepo EntryKind = "git_repo"
)

// Manifest is the fresh-workspace contract: what the workspace holds
// before the first command, and the commands' environment.
type Manifest struct {
	// Entries are created in order.
	Entries []Entry `json:"entries,omitempty"`
	// Env is the commands' whole environment; nothing of the host's
	// environment is passed in.
	Env map[string]string `json:"env,omitempty"`
}

// Entry is one thing to create in the workspace.
type Entry struct {
	// Kind says which fields below apply.
	Kind EntryKind `json:"kind"`
	// Path is where the entry goes, relative to the workspace root.
	Path string `json:"path"`
	// Content is a file's content.
	Content string `json:"content,omitempty"`
	// Mode is a file's permission bits; zero means 0644 (0755 for dirs).
	Mode uint32 `json:"mode,omitempty"`
	// Source is the host path of local_file and local_dir entries, and the
	// URL or local path of git_repo entries.
	Source string `json:"source,omitempty"`
	// Ref is the git_repo's branch, tag or commit; empty means HEAD.
	Ref string `json:"ref,omitempty"`
	// Depth limits a git_repo's history; zero means full.
	Depth int `json:"depth,omitempty"`
	// Ephemeral entries are left out of snapshots.
	Ephemeral bool `json:"ephemeral,omitempty"`
}
