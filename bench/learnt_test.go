package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities/skills"
	"github.com/troupe-dev/troupe/runtime/blob"
)

// storeLearnt is a skills.Learnt over the skills under prefix of a blob
// store, as the worker's over a memory scope: one listing, each file's
// version its key, size and time.
type storeLearnt struct {
	store  *blob.Store
	prefix string
}

func (l storeLearnt) List(ctx context.Context) ([]skills.LearntFile, error) {
	objs, _, err := l.store.ListObjects(ctx, l.prefix, 0)
	if err != nil {
		return nil, err
	}
	out := make([]skills.LearntFile, len(objs))
	for i, o := range objs {
		out[i] = skills.LearntFile{Path: strings.TrimPrefix(o.Key, l.prefix), Version: fmt.Sprintf("%s %d %d", o.Key, o.Size, o.ModTime.UnixNano()),
			Open: func(ctx context.Context) (io.ReadCloser, error) { return l.store.Open(ctx, o.Key) }}
	}
	return out, nil
}

func (storeLearnt) Skipped(context.Context, error) {}

// BenchmarkLearntIndex measures what the index of learnt skills costs a
// model call: 100 learnt skills (a SKILL.md and three files of 2 KB
// each) in a file:// store, indexed by a Text skills capability bound to
// them as the worker binds one, against, in the same run, the work the
// index did before it was cached (the listing, then every file of every
// skill read, one after another, and each skill checked whole) and the
// listing alone, the floor of a call. Each iteration makes 20 calls of each kind,
// interleaved.
//
// Reported, as medians: list-ms (the listing), before-ms/call (every
// file read), cold-ms/call (the capability with an empty cache: the 100
// SKILL.md files read, 8 at once), cached-ms/call (the skills as they
// were: the listing, no read), ratio (cached over before; goal well under
// 1, 0.22 to 0.29 on a shared 2-core machine) and cached-over-list (goal
// ≈ 1: a call costs its listing). On a local disk a read is cheap; on S3
// each costs a request (some 20 ms), and a call saves 400 of them.
func BenchmarkLearntIndex(b *testing.B) {
	const (
		nSkills = 100
		calls   = 20
	)
	ctx := context.Background()
	store, err := blob.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	const prefix = "memory/bench/memories/skills/"
	filler := strings.Repeat("a line of a reference the skill carries\n", 50)
	for i := range nSkills {
		name := fmt.Sprintf("skill-%03d", i)
		files := map[string]string{
			"SKILL.md":          "---\nname: " + name + "\ndescription: Does the thing numbered " + name + " when asked.\n---\n" + filler,
			"scripts/run.sh":    "#!/bin/sh\n" + filler,
			"references/a.md":   filler,
			"references/b.json": filler,
		}
		for p, data := range files {
			if err := store.Put(ctx, prefix+name+"/"+p, []byte(data)); err != nil {
				b.Fatal(err)
			}
		}
	}
	learnt := storeLearnt{store: store, prefix: prefix}
	text, err := skills.New(ctx, skills.Config{Mode: skills.Text})
	if err != nil {
		b.Fatal(err)
	}
	bind := func(cache *skills.LearntCache) *skills.Capability {
		caps, ok := skills.WithLearnt([]agents.Capability{text}, learnt, skills.SharedCache(cache))
		if !ok {
			b.Fatal("not bound")
		}
		return caps[0].(*skills.Capability)
	}
	rc := agents.RunContext{Agent: "bench", MemoryScope: "bench"}
	cached := bind(skills.NewLearntCache(0))
	index := func(c *skills.Capability) {
		in, err := c.DynamicInstructions(ctx, rc)
		if err != nil || strings.Count(in, "(learnt from earlier work)") != nSkills {
			b.Fatalf("index: %v\n%s", err, in)
		}
	}
	index(cached) // Fill its cache.
	// before is what the index did at every call before it was cached:
	// list, read every file of every skill, one after another, and check
	// each skill whole (as Inline.Load checks one).
	before := func() {
		keys, _, err := store.List(ctx, prefix, 0)
		if err != nil {
			b.Fatal(err)
		}
		var all skills.Inline
		for _, k := range keys {
			folder, p, _ := strings.Cut(strings.TrimPrefix(k, prefix), "/")
			r, err := store.Open(ctx, k)
			if err != nil {
				b.Fatal(err)
			}
			data, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				b.Fatal(err)
			}
			if len(all) == 0 || all[len(all)-1].Name != folder {
				all = append(all, skills.Skill{Name: folder})
			}
			all[len(all)-1].Files = append(all[len(all)-1].Files, skills.File{Path: p, Content: string(data)})
		}
		if loaded, err := all.Load(ctx, skills.LoadOptions{}); err != nil || len(loaded) != nSkills {
			b.Fatalf("read %d skills: %v", len(loaded), err)
		}
	}
	list := func() {
		if _, err := learnt.List(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var cold *skills.Capability
	kinds := []struct {
		name  string
		setup func()
		run   func()
	}{
		{"list-ms", nil, list},
		{"before-ms/call", nil, before},
		{"cold-ms/call", func() { cold = bind(skills.NewLearntCache(0)) }, func() { index(cold) }},
		{"cached-ms/call", nil, func() { index(cached) }},
	}
	times := make([][]time.Duration, len(kinds))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for range calls {
			for k, kind := range kinds {
				if kind.setup != nil {
					kind.setup()
				}
				start := time.Now()
				kind.run()
				times[k] = append(times[k], time.Since(start))
			}
		}
	}
	b.StopTimer()
	ms := make([]float64, len(kinds))
	for k, kind := range kinds {
		slices.Sort(times[k])
		ms[k] = float64(times[k][len(times[k])/2].Microseconds()) / 1000
		b.ReportMetric(ms[k], kind.name)
	}
	b.ReportMetric(ms[3]/ms[1], "ratio")
	b.ReportMetric(ms[3]/ms[0], "cached-over-list")
}
