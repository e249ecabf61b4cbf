package skills

// Learnt skills: the skills an agent learnt from earlier work, which
// memory consolidation writes (memories/skills/<name>/ of the agent's
// memory scope), beside the bundled ones its sources gave it. They change
// between turns, as consolidation runs in the background, so a capability
// bound to a Learnt (WithLearnt) lists them again at every model call
// (the index) and tool call (load_skill, read_skill), in those
// activities.
//
// The index needs each skill's name and description only: a call reads
// the SKILL.md of each skill whose version (LearntFile.Version) its
// LearntCache lacks, and no other file. A skill's other files are read,
// and the whole skill checked against the rules every skill passes
// (skill.go), when load_skill or read_skill asks for it. A skill left
// out of the index, or that fails its load, is reported once per version
// of it; the call goes on (the load fails, with the reason).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/troupe-dev/troupe/agents"
)

// Learnt is where a capability finds its agent's learnt skills at the
// time of a call. The worker implements it over the agent's memory scope
// (package workflows binds it to every agent that reads memory);
// WithLearnt binds one to a capability.
type Learnt interface {
	// List lists the files of the learnt skills for the call whose
	// context ctx is (it holds the call's agents.RunContext), by slash
	// path from the folder that holds the skills: <name>/SKILL.md,
	// <name>/scripts/check.sh. A file is read through its Open only when
	// the capability needs it: a SKILL.md for the index when its cache
	// lacks the file's Version, the other files when the skill is loaded.
	List(ctx context.Context) ([]LearntFile, error)
	// Skipped is told, for the log, of each learnt skill the capability
	// leaves out of the index or fails to load, with an *Error that says
	// why: it breaks a rule (wrapping the sentinel a Source's error
	// would), a bundled skill has its name (ErrDuplicate: the bundled one
	// wins), or it is past the capability's Limits.MaxSkills
	// (ErrTooLarge). It is told once per version of the skill's files and
	// reason, while the capability's LearntCache remembers it; every time
	// for a skill whose files have no Version.
	Skipped(ctx context.Context, err error)
}

// LearntFile is one file of a learnt skill, listed but not read.
type LearntFile struct {
	// Path is slash-separated from the folder that holds the skills: the
	// skill's folder, then the file's path in it.
	Path string
	// Version identifies the file's content, so that the capability
	// reads it again only when it changed: the content's hash (an ETag),
	// or its size and time of writing, optionally with where the file is
	// (its key in a store: then a skill is reported once per place). Two
	// files of one folder listed with one Version hold the same bytes,
	// and a file's Version changes whenever its content does. Empty means
	// the lister cannot tell: the file is read whenever it is needed.
	Version string
	// Open reads the file. The capability reads at most
	// Limits.MaxFileBytes of it (one byte more tells it is over), and
	// stops a skill at Limits.MaxSkillBytes: a listing gives no sizes, so
	// the limits are checked as the files are read.
	Open func(ctx context.Context) (io.ReadCloser, error)
}

// learntSource names learnt skills in errors.
const learntSource = "learnt"

// learntReads bounds the SKILL.md files one call reads at once, when its
// cache lacks them (a worker's first call for a scope).
const learntReads = 8

// A LearntOption configures WithLearnt.
type LearntOption func(*Capability)

// SharedCache makes the capability keep what it reads of learnt skills in
// cache, shared with the other capabilities given it (a worker gives one
// to all its agents), rather than in a cache of its own
// (NewLearntCache(0)).
func SharedCache(cache *LearntCache) LearntOption {
	return func(c *Capability) {
		if cache != nil {
			c.cache = cache
		}
	}
}

// WithLearnt returns caps with its first Lazy or Text skills capability
// replaced by a copy that also offers the skills learnt finds, and true;
// or caps as they are, and false, when caps has no such capability. An
// Eager capability takes no learnt skills: it copies its skills in as
// the workspace is provisioned, and learnt skills change after.
//
// The copy lists the learnt skills in its index after the bundled ones,
// marked as learnt from earlier work, at every model call
// (DynamicInstructions), as their SKILL.md files say them; load_skill
// copies one into .agents/skills/<name>/ and read_skill reads one, as
// they do a bundled skill, once the whole skill passes the rules; a user
// names one as $name. The skills of every skills capability of caps are
// bundled: each wins over a learnt skill of its name, which is left out
// and reported to learnt.Skipped. Learnt skills count towards the
// capability's Limits.MaxSkills.
func WithLearnt(caps []agents.Capability, learnt Learnt, opts ...LearntOption) ([]agents.Capability, bool) {
	if learnt == nil {
		return caps, false
	}
	bundled := map[string]bool{}
	at := -1
	for i, c := range caps {
		sc, ok := c.(*Capability)
		if !ok || sc == nil {
			continue
		}
		for _, s := range sc.skills {
			bundled[s.Name] = true
		}
		if at < 0 && sc.mode != Eager {
			at = i
		}
	}
	if at < 0 {
		return caps, false
	}
	c := *caps[at].(*Capability)
	c.learnt, c.bundled = learnt, bundled
	c.cache = nil
	for _, o := range opts {
		o(&c)
	}
	if c.cache == nil {
		c.cache = NewLearntCache(0)
	}
	// What a SKILL.md makes of its folder depends on the limits too.
	c.limitsKey = fmt.Sprintf("%d/%d/%d/%d", c.limits.MaxFileBytes, c.limits.MaxSkillBytes, c.limits.MaxFiles, c.limits.MaxSkills)
	c.tools = c.makeTools()
	out := slices.Clone(caps)
	out[at] = &c
	return out, true
}

// OffersLearnt reports whether c offers learnt skills (see WithLearnt).
func (c *Capability) OffersLearnt() bool { return c.learnt != nil }

// learntSet is what a call finds of the learnt skills: the index (each
// skill's name and description, as its SKILL.md says them), and each
// indexed skill's files as listed, by name, read only if it is loaded.
type learntSet struct {
	skills []Skill
	files  map[string][]LearntFile
}

// learntIndex lists the learnt skills for the call of ctx and makes the
// index: the skills whose SKILL.md passes the rules and whose names no
// bundled skill has, by folder name, within the capability's MaxSkills.
// It reads only the SKILL.md files c.cache lacks. It reports each skill
// it leaves out to c.learnt.Skipped (once per version: see skip), one
// whose SKILL.md cannot be read (gone since the listing, say) too. Only a
// listing that fails is an error.
func (c *Capability) learntIndex(ctx context.Context) (learntSet, error) {
	if c.learnt == nil {
		return learntSet{}, nil
	}
	listed, err := c.learnt.List(ctx)
	if err != nil {
		return learntSet{}, fmt.Errorf("skills: list the learnt skills: %w", err)
	}
	byFolder := map[string][]LearntFile{}
	var folders []string
	for _, f := range listed {
		folder, p, ok := strings.Cut(f.Path, "/")
		if !ok || p == "" || f.Open == nil {
			continue // Beside the skills' folders: no skill's file.
		}
		if _, seen := byFolder[folder]; !seen {
			folders = append(folders, folder)
		}
		byFolder[folder] = append(byFolder[folder], f)
	}
	slices.Sort(folders)
	// The candidates: each folder with a SKILL.md (else not a skill, as
	// in a Source's tree), in order.
	type candidate struct {
		folder string
		md     LearntFile
	}
	var cands []candidate
	for _, folder := range folders {
		i := slices.IndexFunc(byFolder[folder], func(f LearntFile) bool { return f.Path == folder+"/"+SkillFile })
		if i >= 0 {
			cands = append(cands, candidate{folder, byFolder[folder][i]})
		}
	}
	room := c.limits.MaxSkills - len(c.skills)
	// Read the SKILL.md files the cache lacks of the candidates that may
	// be offered, at once; a folder named like a bundled skill never is
	// (a valid skill's name is its folder's), so it is not read.
	entries := make([]*learntEntry, len(cands))
	readErrs := make([]error, len(cands))
	var misses []int
	offerable := 0
	for i, cd := range cands {
		if offerable >= room {
			break
		}
		if c.bundled[cd.folder] {
			continue
		}
		offerable++
		if !c.cached(cd.folder, cd.md) {
			misses = append(misses, i)
		}
	}
	if len(misses) > 1 {
		var wg sync.WaitGroup
		sem := make(chan struct{}, learntReads)
		for _, i := range misses {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				entries[i], readErrs[i] = c.skillEntry(ctx, cands[i].folder, cands[i].md)
			}()
		}
		wg.Wait()
	}
	set := learntSet{files: map[string][]LearntFile{}}
	for i, cd := range cands {
		if err := ctx.Err(); err != nil {
			return learntSet{}, err
		}
		if c.bundled[cd.folder] {
			c.skip(ctx, cd.folder, cd.md.Version, fmt.Errorf("%w: a bundled skill is named %q, and wins over the learnt one", ErrDuplicate, cd.folder))
			continue
		}
		if len(set.skills) >= room {
			c.skip(ctx, cd.folder, cd.md.Version, fmt.Errorf("%w: the capability offers %d skills already, its most", ErrTooLarge, c.limits.MaxSkills))
			continue
		}
		e, err := entries[i], readErrs[i]
		if e == nil && err == nil {
			e, err = c.skillEntry(ctx, cd.folder, cd.md)
		}
		if err != nil {
			if ctx.Err() != nil {
				return learntSet{}, ctx.Err()
			}
			c.skip(ctx, cd.folder, cd.md.Version, err)
			continue
		}
		if e.err != nil {
			c.skip(ctx, cd.folder, cd.md.Version, e.err)
			continue
		}
		set.skills = append(set.skills, Skill{Name: e.name, Description: e.description})
		set.files[e.name] = byFolder[cd.folder]
	}
	return set, nil
}

// entryKey is the key in c.cache of what md, the SKILL.md of folder,
// makes of it under c's limits; "" when md has no Version.
func (c *Capability) entryKey(folder string, md LearntFile) string {
	if md.Version == "" {
		return ""
	}
	return "md\x00" + folder + "\x00" + md.Version + "\x00" + c.limitsKey
}

// cached reports whether c.cache holds what md makes of folder.
func (c *Capability) cached(folder string, md LearntFile) bool {
	key := c.entryKey(folder, md)
	if key == "" {
		return false
	}
	_, ok := c.cache.entry(key)
	return ok
}

// skillEntry is what md, the SKILL.md of folder, makes of it: from
// c.cache, else read (at most MaxFileBytes) and checked as a skill of
// that one file, and cached. An error is a read that failed, which is not
// cached.
func (c *Capability) skillEntry(ctx context.Context, folder string, md LearntFile) (*learntEntry, error) {
	key := c.entryKey(folder, md)
	if key != "" {
		if e, ok := c.cache.entry(key); ok {
			return e, nil
		}
	}
	data, err := readAtMost(func() (io.ReadCloser, error) { return md.Open(ctx) }, c.limits.MaxFileBytes)
	e := &learntEntry{}
	switch {
	case errors.Is(err, ErrTooLarge):
		e.err = fmt.Errorf("%s: %w", SkillFile, err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", SkillFile, err)
	default:
		s, err := fromFiles(folder, []File{{Path: SkillFile, Content: data}}, c.limits)
		e.name, e.description, e.err = s.Name, s.Description, err
	}
	if key != "" {
		c.cache.put(key, e)
	}
	return e, nil
}

// learntSkill reads the learnt skill the index of ctx's call names name,
// all its files, and checks it as New checks a bundled one; nil when the
// index has none of that name. A skill that breaks a rule fails with an
// *Error, reported once per version of its files.
func (c *Capability) learntSkill(ctx context.Context, set learntSet, name string) (*Skill, error) {
	files, ok := set.files[name]
	if !ok {
		return nil, nil
	}
	nodes := make([]node, 0, len(files))
	versions := make([]string, 0, len(files))
	known := true
	for _, f := range files {
		open := f.Open
		nodes = append(nodes, node{path: strings.TrimPrefix(f.Path, name+"/"), size: -1, open: func() (io.ReadCloser, error) { return open(ctx) }})
		versions = append(versions, f.Path+"\x00"+f.Version)
		known = known && f.Version != ""
	}
	s, err := readSkill(ctx, name, nodes, c.limits)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// The skill's version is its files'.
		version := ""
		if known {
			slices.Sort(versions)
			sum := sha256.Sum256([]byte(strings.Join(versions, "\x00")))
			version = hex.EncodeToString(sum[:])
		}
		return nil, c.skip(ctx, name, version, err)
	}
	// A store keeps no file modes: a script says it is one.
	for i := range s.Files {
		s.Files[i].Executable = strings.HasPrefix(s.Files[i].Content, "#!")
	}
	return &s, nil
}

// skip reports the learnt skill in folder, left out for err, to
// c.learnt.Skipped, unless c.cache remembers reporting it for that reason
// at that version of it (none: always), and returns the report.
func (c *Capability) skip(ctx context.Context, folder, version string, err error) error {
	e := &Error{Source: learntSource, Skill: folder, Err: err}
	if version == "" || c.cache.mark("skipped\x00"+version+"\x00"+e.Error()) {
		c.learnt.Skipped(ctx, e)
	}
	return e
}
