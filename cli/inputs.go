package cli

// This file holds how the troupe command reads a message (an argument, -
// for standard input, --file) and where it puts one too big to travel
// inside Temporal: the workers' blob store, once it has checked that the
// store it can open is theirs.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/runtime/blob"
)

// messageOf is the message a command was given: its argument, standard
// input when the argument is "-", or file. Exactly one of them; one over
// troupe.MessageLimit is refused, typed troupe.ErrPayloadTooLarge, before
// anything is sent.
func messageOf(args []string, file string, stdin io.Reader) (string, error) {
	var data []byte
	var err error
	switch {
	case file != "" && len(args) > 0:
		return "", usage(errors.New("give the message as an argument, as - (standard input) or with --file, not two of them"))
	case file != "":
		if data, err = readLimited(file); err != nil {
			return "", err
		}
	case len(args) == 0:
		return "", usage(errors.New("no message: give it as an argument, as - (standard input) or with --file"))
	case args[0] == "-":
		if data, err = io.ReadAll(io.LimitReader(stdin, troupe.MessageLimit+1)); err != nil {
			return "", fmt.Errorf("reading the message from standard input: %w", err)
		}
	default:
		return args[0], troupe.CheckMessage("the message", len(args[0]))
	}
	if err := troupe.CheckMessage("the message", len(data)); err != nil {
		return "", err
	}
	// What a pipe or an editor ends with is not part of the message.
	return strings.TrimRight(string(data), "\r\n"), nil
}

// readLimited reads file, or its first troupe.MessageLimit+1 bytes: enough
// to tell it is too big without reading a huge file whole.
func readLimited(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, usage(fmt.Errorf("--file: %w", err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, troupe.MessageLimit+1))
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	return data, nil
}

// workersStore is the troupe command's client.InputStore for the workers
// of queue: the blob store of TROUPE_BLOB_URL (or TROUPE_HOME's), into
// which it puts a message only when every troupe worker polling queue
// keeps its blobs there too. Otherwise the workers would look for the
// message in a store that does not hold it.
type workersStore struct {
	cn    *conn
	queue string
}

func (w workersStore) Put(ctx context.Context, key string, data []byte) error {
	url, err := blobURL()
	if err != nil {
		return err
	}
	if err := sameStore(ctx, w.cn, w.queue, url, fmt.Sprintf("a message over %d bytes", troupe.MessageInline), "or send less"); err != nil {
		return err
	}
	store, err := w.cn.workersBlobs(ctx, url, fmt.Sprintf("a message of %d bytes", len(data)))
	if err != nil {
		return err
	}
	return store.Put(ctx, key, data)
}

// workersBlobs is the workers' blob store at url, opened the first time
// something (what) goes there.
func (cn *conn) workersBlobs(ctx context.Context, url, what string) (*blob.Store, error) {
	cn.inputsMu.Lock()
	defer cn.inputsMu.Unlock()
	if cn.inputs == nil {
		store, err := blob.Open(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("open the blob store for %s: %w", what, err)
		}
		cn.inputs = store
	}
	return cn.inputs, nil
}

// sameStore refuses a store (url) that a troupe worker polling queue does
// not keep its blobs in, naming both, for what (the blob that would go
// there: "a message over N bytes") and with another way out (instead,
// "or send less"). A store in a directory (a file store) counts as
// shared only with workers on this host: another host's directory of the
// same path is another store.
func sameStore(ctx context.Context, cn *conn, queue, url, what, instead string) error {
	if queue == "" {
		queue = troupe.DefaultTaskQueue
	}
	pollers, err := freshPollers(ctx, cn.c, queue)
	if err != nil {
		return fmt.Errorf("list the workers of task queue %s, to check they read %s from this store: %w", queue, what, err)
	}
	ours := storeName(url)
	host, _ := os.Hostname()
	for _, p := range pollers {
		who, _, theirs, ok := setupOf(p.GetIdentity())
		if !ok || theirs == "" {
			continue
		}
		if theirs == ours {
			_, theirHost, _ := strings.Cut(who, "@")
			if theirHost = strings.TrimSuffix(theirHost, "@"); !strings.HasPrefix(ours, "file://") || theirHost == "" || theirHost == host {
				continue
			}
			return troupe.NonRetryable(troupe.ErrBlobMissing, "%s goes through the workers' blob store, and the worker %s of task queue %s keeps its blobs in %s, "+
				"a directory on its host (%s), not on this one (%s), where this command would put it: set TROUPE_BLOB_URL to a store both reach (s3://, gs://, azblob://), %s",
				what, who, queue, theirs, theirHost, host, instead)
		}
		return troupe.NonRetryable(troupe.ErrBlobMissing, "%s goes through the workers' blob store, and the worker %s of task queue %s keeps its blobs in %s, "+
			"not in %s, where this command would put it: set TROUPE_BLOB_URL to the workers' store (or use their TROUPE_HOME), %s", what, who, queue, theirs, ours, instead)
	}
	return nil
}
