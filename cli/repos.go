package cli

// This file holds how `troupe run` and `troupe sessions new` send a git
// repository on the client's disk (the value of a graph flag marked
// GitRepo: the code review's --repo, or --var repo=PATH) to workers that
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
	"github.com/troupe-dev/troupe/runtime/blob"
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
	if cn.inputs == nil {
		if cn.inputs, err = blob.Open(ctx, url); err != nil {
			return "", fmt.Errorf("open the blob store for %s: %w", what, err)
		}
	}
	key := troupe.InputKey(run, packed.SHA256)
	if err := cn.inputs.PutFrom(ctx, key, f); err != nil {
		return "", fmt.Errorf("put %s in the workers' blob store: %w", what, err)
	}
	fmt.Fprintf(progress, "▶ sent %s to the workers' blob store (%d KiB, HEAD %.7s)\n", what, (packed.Size+1023)>>10, packed.Head)
	return gitbundle.Ref(key), nil
}
