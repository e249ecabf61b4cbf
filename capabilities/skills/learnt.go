package skills

// Learnt skills: the skills an agent learnt from earlier work, which
// memory consolidation writes (memories/skills/<name>/ of the agent's
// memory scope), beside the bundled ones its sources gave it. They change
// between turns, as consolidation runs in the background, so a capability
// bound to a Learnt (WithLearnt) reads them again at every model call
// (the index) and tool call (load_skill, read_skill), in those
// activities. Each passes the rules every skill passes (skill.go); one
// that does not is left out and reported, and the call goes on.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

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
	// the capability needs it.
	List(ctx context.Context) ([]LearntFile, error)
	// Skipped is told, for the log, of each learnt skill the capability
	// leaves out, with an *Error that says why: it breaks a rule (wrapping
	// the sentinel a Source's error would), a bundled skill has its name
	// (ErrDuplicate: the bundled one wins), or it is past the
	// capability's Limits.MaxSkills (ErrTooLarge).
	Skipped(ctx context.Context, err error)
}

// LearntFile is one file of a learnt skill, listed but not read.
type LearntFile struct {
	// Path is slash-separated from the folder that holds the skills: the
	// skill's folder, then the file's path in it.
	Path string
	// Open reads the file. The capability reads at most
	// Limits.MaxFileBytes of it (one byte more tells it is over), and
	// stops a skill at Limits.MaxSkillBytes: a listing gives no sizes, so
	// the limits are checked as the files are read.
	Open func(ctx context.Context) (io.ReadCloser, error)
}

// learntSource names learnt skills in errors.
const learntSource = "learnt"

// WithLearnt returns caps with its first Lazy or Text skills capability
// replaced by a copy that also offers the skills learnt finds, and true;
// or caps as they are, and false, when caps has no such capability. An
// Eager capability takes no learnt skills: it copies its skills in as
// the workspace is provisioned, and learnt skills change after.
//
// The copy lists the learnt skills in its index after the bundled ones,
// marked as learnt from earlier work, at every model call
// (DynamicInstructions); load_skill copies one into .agents/skills/<name>/
// and read_skill reads one, as they do a bundled skill; a user names one
// as $name. The skills of every skills capability of caps are bundled:
// each wins over a learnt skill of its name, which is left out and
// reported to learnt.Skipped. Learnt skills count towards the
// capability's Limits.MaxSkills.
func WithLearnt(caps []agents.Capability, learnt Learnt) ([]agents.Capability, bool) {
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
	c.tools = c.makeTools()
	out := slices.Clone(caps)
	out[at] = &c
	return out, true
}

// OffersLearnt reports whether c offers learnt skills (see WithLearnt).
func (c *Capability) OffersLearnt() bool { return c.learnt != nil }

// learntSkills reads the learnt skills for the call of ctx: those that
// pass the rules and whose names no bundled skill has, by folder name,
// within the capability's MaxSkills. It reports each one it leaves out to
// c.learnt.Skipped, one whose file cannot be read (gone since the
// listing, say) too. Only a listing that fails is an error.
func (c *Capability) learntSkills(ctx context.Context) ([]Skill, error) {
	if c.learnt == nil {
		return nil, nil
	}
	files, err := c.learnt.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("skills: list the learnt skills: %w", err)
	}
	byFolder := map[string][]node{}
	var folders []string
	for _, f := range files {
		folder, p, ok := strings.Cut(f.Path, "/")
		if !ok || p == "" || f.Open == nil {
			continue // Beside the skills' folders: no skill's file.
		}
		if _, seen := byFolder[folder]; !seen {
			folders = append(folders, folder)
		}
		open := f.Open
		byFolder[folder] = append(byFolder[folder], node{path: p, size: -1, open: func() (io.ReadCloser, error) { return open(ctx) }})
	}
	slices.Sort(folders)
	skip := func(folder string, err error) {
		c.learnt.Skipped(ctx, &Error{Source: learntSource, Skill: folder, Err: err})
	}
	room := c.limits.MaxSkills - len(c.skills)
	var out []Skill
	for _, folder := range folders {
		nodes := byFolder[folder]
		if !slices.ContainsFunc(nodes, func(n node) bool { return n.path == SkillFile }) {
			continue // No SKILL.md: not a skill, as in a Source's tree.
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// A valid skill's name is its folder's: one named like a bundled
		// skill is never offered, so it is not read.
		if c.bundled[folder] {
			skip(folder, fmt.Errorf("%w: a bundled skill is named %q, and wins over the learnt one", ErrDuplicate, folder))
			continue
		}
		if len(out) >= room {
			skip(folder, fmt.Errorf("%w: the capability offers %d skills already, its most", ErrTooLarge, c.limits.MaxSkills))
			continue
		}
		s, err := readSkill(ctx, folder, nodes, c.limits)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			skip(folder, err)
			continue
		}
		// A store keeps no file modes: a script says it is one.
		for i := range s.Files {
			s.Files[i].Executable = strings.HasPrefix(s.Files[i].Content, "#!")
		}
		out = append(out, s)
	}
	return out, nil
}
