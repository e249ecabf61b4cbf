package cli

// This file holds how `troupe run`, `troupe sessions new`, the chat's
// /new and the calls of `troupe mcp serve` send a git repository on the
// client's disk (the value of a graph flag marked GitRepo: the code
// review's --repo, --var repo=PATH, or an MCP call's repo) to workers that
// may not see that disk: packed as a git bundle (runtime/sandbox/gitbundle)
// into the workers' blob store, under the run's (or the session's)
// inputs, and named by reference ("blob:KEY") in the variable.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime/sandbox/gitbundle"
)

// sendRepos replaces, in vars, the local path of each of g's GitRepo
// flags by the reference of its repository, packed and put in the blob
// store of the workers of queue under run's inputs. A URL, a reference
// already, or an empty value is left as it is. Nothing is sent when a
// worker of queue keeps its blobs elsewhere; a path that is no
// repository, or one too large, is refused. Each error is one line that
// says what to do.
func sendRepos(ctx context.Context, cn *conn, g Graph, queue, run string, vars map[string]string, instead string, progress io.Writer) error {
	for _, f := range g.Flags {
		v := vars[f.Name]
		if !f.GitRepo || v == "" || isURL(v) || strings.HasPrefix(v, gitbundle.Scheme) {
			continue
		}
		if _, err := os.Stat(v); err != nil && scpLike(v) {
			continue // host:path, a remote go-git clones.
		}
		path, err := filepath.Abs(v)
		if err != nil {
			return usage(fmt.Errorf("--%s %s: %w", f.Name, v, err))
		}
		ref, err := sendRepo(ctx, cn, queue, run, f.Name, path, instead, progress)
		if err != nil {
			return err
		}
		vars[f.Name] = ref
	}
	return nil
}

// repoSender is the hook (chat.Runner.PrepareVars, server.Config.
// PrepareVars) of a client that creates runs or sessions of graphs on the
// workers of queue from variables it did not take as flags: the chat's
// /new, an MCP call. Given a new run's or session's graph, id and own
// copy of its variables, it sends the local repositories among them as
// sendRepos does, and says so to progress.
func repoSender(cn *conn, graphs []Graph, queue, instead string, progress io.Writer) func(ctx context.Context, graph, id string, vars map[string]string) error {
	return func(ctx context.Context, graph, id string, vars map[string]string) error {
		g, err := findGraph(graphs, graph)
		if err != nil || !hasGitRepo(g) {
			return nil // the call itself says what is wrong with graph
		}
		return sendRepos(ctx, cn, g, queue, id, vars, instead, progress)
	}
}

// scpLike reports whether v reads as git's scp-like remote, host:path.
func scpLike(v string) bool {
	i := strings.IndexByte(v, ':')
	return i > 0 && !strings.Contains(v[:i], "/")
}

// repoInstead and sessionRepoInstead are what a user can do rather than
// send a repository, for a run and for a session.
const (
	repoInstead        = "or give a URL every worker can clone (--var repo=URL), or serve the run from this process with --worker"
	sessionRepoInstead = "or give a URL every worker can clone (--var repo=URL)"
	// mcpRepoInstead is for an MCP call, whose repo an MCP client
	// gives: the code review's tool takes an https URL.
	mcpRepoInstead = "or give an https URL every worker can clone as repo"
)

// sendRepo packs the repository at path (flag's value) into a file, then
// puts it in the workers' store under troupe.InputKey(run, its SHA-256),
// and returns its reference. instead is what the user can do rather.
func sendRepo(ctx context.Context, cn *conn, queue, run, flag, path, instead string, progress io.Writer) (string, error) {
	url, err := blobURL()
	if err != nil {
		return "", err
	}
	what := fmt.Sprintf("the repository --%s %s", flag, path)
	if err := sameStore(ctx, cn, queue, url, what, instead); err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "troupe-repo-*.bundle")
	if err != nil {
		return "", fmt.Errorf("pack --%s %s: %w", flag, path, err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	packed, err := gitbundle.Pack(ctx, path, f, gitbundle.Limits{})
	switch {
	case errors.Is(err, gitbundle.ErrNotRepository):
		return "", usage(fmt.Errorf("--%s %s is not a git repository: give a repository's directory, %s", flag, path, instead))
	case errors.Is(err, gitbundle.ErrTooLarge):
		return "", usage(fmt.Errorf("--%s %s packs to more than %d MiB, more than the workers take through the blob store: %s",
			flag, path, gitbundle.DefaultMaxBytes>>20, strings.TrimPrefix(instead, "or ")))
	case err != nil:
		return "", fmt.Errorf("pack --%s %s: %w", flag, path, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	store, err := cn.workersBlobs(ctx, url, what)
	if err != nil {
		return "", err
	}
	key := troupe.InputKey(run, packed.SHA256)
	if err := store.PutFrom(ctx, key, f); err != nil {
		return "", fmt.Errorf("put %s in the workers' blob store: %w", what, err)
	}
	fmt.Fprintf(progress, "▶ sent %s to the workers' blob store (%d KiB, HEAD %.7s)\n", what, (packed.Size+1023)>>10, packed.Head)
	return gitbundle.Ref(key), nil
}
