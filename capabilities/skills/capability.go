package skills

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// Mode says how an agent's skills reach it.
type Mode string

// The modes.
const (
	// Lazy, the default, puts only the index (name, description, path)
	// in the instructions; the load_skill tool copies one skill into the
	// workspace when the model asks for it. It needs a sandbox agent.
	Lazy Mode = "lazy"
	// Eager copies every skill into the workspace as it is provisioned,
	// before the first command, and puts the index in the instructions.
	// It needs a sandbox agent.
	Eager Mode = "eager"
	// Text serves agents without a sandbox: the index goes into the
	// instructions, and the read_skill tool returns a skill's SKILL.md, or
	// one of its files, as text.
	Text Mode = "text"
)

// WorkspaceDir is where skills live in a workspace: each in
// .agents/skills/<name>/.
const WorkspaceDir = ".agents/skills"

// MaxReadBytes bounds what one read_skill call returns; a longer file is
// cut, with a note that says so.
const MaxReadBytes = 64 << 10

// Config configures the skills of an agent. Its zero value gives an
// agent no skills, lazily.
type Config struct {
	// Sources are read once, in order, by New.
	Sources []Source
	// Mode is how the skills reach the agent; empty means Lazy.
	Mode Mode
	// Policy bounds the host paths that sources may read (see
	// LoadOptions). The zero Policy allows none: Dir sources and local Git
	// sources need a root here.
	Policy sandbox.Policy
	// Limits bound each skill; zero fields take the defaults.
	Limits Limits
}

// Capability is the Skills capability: an agents.Capability whose
// instructions index its skills and whose tools or manifest bring them
// to the agent, as its Mode says. Build it with New; WithLearnt makes a
// copy that offers the agent's learnt skills as well.
type Capability struct {
	mode         Mode
	limits       Limits
	skills       []Skill
	instructions string
	tools        []agents.Tool
	manifest     sandbox.Manifest
	// learnt, when set, finds the learnt skills at each call, and bundled
	// names every skill of the agent's skills capabilities, which win over
	// a learnt skill of their name; cache keeps what the calls read of
	// them, under limitsKey (learnt.go).
	learnt    Learnt
	bundled   map[string]bool
	cache     *LearntCache
	limitsKey string
}

// New loads cfg's sources and returns the capability. It fails, with
// errors that wrap *Error, on a source that cannot be read, a skill that
// breaks a rule (see Skill.Validate and Source), two skills with one
// name (ErrDuplicate), and an unknown Mode. Call it where the graph is
// built, so that a bad skill stops the worker before it serves a run.
func New(ctx context.Context, cfg Config) (*Capability, error) {
	mode := cfg.Mode
	if mode == "" {
		mode = Lazy
	}
	switch mode {
	case Lazy, Eager, Text:
	default:
		return nil, fmt.Errorf("skills: unknown mode %q", cfg.Mode)
	}
	lim := cfg.Limits.withDefaults()
	opts := LoadOptions{Policy: cfg.Policy, Limits: lim}
	var all []Skill
	var errs []error
	seen := map[string]bool{}
	for _, src := range cfg.Sources {
		if src == nil {
			errs = append(errs, errors.New("skills: nil source"))
			continue
		}
		loaded, err := src.Load(ctx, opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, s := range loaded {
			if seen[s.Name] {
				errs = append(errs, &Error{Skill: s.Name, Err: fmt.Errorf("%w: %q", ErrDuplicate, s.Name)})
				continue
			}
			seen[s.Name] = true
			all = append(all, s)
		}
	}
	if len(all) > lim.MaxSkills {
		errs = append(errs, &Error{Err: fmt.Errorf("%w: %d skills, over %d", ErrTooLarge, len(all), lim.MaxSkills)})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c := &Capability{mode: mode, limits: lim, skills: all}
	c.instructions = instructions(mode, all, nil)
	if mode == Eager {
		c.manifest = manifest(all)
	}
	c.tools = c.makeTools()
	return c, nil
}

// makeTools makes the tools of c's mode, bound to c: load_skill (Lazy),
// read_skill (Text), none (Eager).
func (c *Capability) makeTools() []agents.Tool {
	switch c.mode {
	case Lazy:
		return []agents.Tool{agents.MustFunctionTool("load_skill",
			"Copies a skill into the workspace, under .agents/skills/<name>/, and returns its instructions (SKILL.md).",
			c.load, agents.InSandbox())}
	case Text:
		return []agents.Tool{agents.MustFunctionTool("read_skill",
			"Returns a skill's instructions (SKILL.md), or one of its files when path is given.",
			c.read, agents.AsActivity())}
	}
	return nil
}

// Name implements agents.Capability.
func (c *Capability) Name() string { return "skills" }

// Instructions implements agents.Capability: the index of the skills and
// when to use one. It lists the bundled skills only: the model activity
// calls DynamicInstructions, which adds the learnt ones.
func (c *Capability) Instructions() string { return c.instructions }

// DynamicInstructions implements agents.DynamicCapability: the index as
// it stands for this model call, the learnt skills (see WithLearnt) after
// the bundled ones. Without learnt skills it is Instructions. It reads the
// learnt skills, so it runs in an activity (the model activity), never in
// workflow code.
func (c *Capability) DynamicInstructions(ctx context.Context, rc agents.RunContext) (string, error) {
	if c.learnt == nil {
		return c.instructions, nil
	}
	learnt, err := c.learntIndex(agents.WithRunContext(ctx, rc))
	if err != nil {
		return "", err
	}
	return instructions(c.mode, c.skills, learnt.skills), nil
}

// Tools implements agents.Capability: load_skill (Lazy) or read_skill
// (Text); none for Eager.
func (c *Capability) Tools() []agents.Tool { return c.tools }

// Manifest implements agents.Capability: for Eager, every skill's files
// under .agents/skills/<name>/; nothing otherwise.
func (c *Capability) Manifest() sandbox.Manifest { return c.manifest }

// Mode is the capability's mode.
func (c *Capability) Mode() Mode { return c.mode }

// Skills returns the capability's skills, in the order of their sources.
func (c *Capability) Skills() []Skill { return append([]Skill(nil), c.skills...) }

// Path is where the named skill lives in a workspace.
func Path(name string) string { return WorkspaceDir + "/" + name }

// skill returns the named skill, a bundled one or else a learnt one (read
// now, for the call of ctx: an *Error when it breaks a rule), or an error
// wrapping ErrUnknown that lists the names there are.
func (c *Capability) skill(ctx context.Context, name string) (*Skill, error) {
	for i := range c.skills {
		if c.skills[i].Name == name {
			return &c.skills[i], nil
		}
	}
	learnt, err := c.learntIndex(ctx)
	if err != nil {
		return nil, err
	}
	if s, err := c.learntSkill(ctx, learnt, name); s != nil || err != nil {
		return s, err
	}
	var names []string
	for _, s := range slices.Concat(c.skills, learnt.skills) {
		names = append(names, s.Name)
	}
	return nil, fmt.Errorf("%w %q; the skills are: %s", ErrUnknown, name, strings.Join(names, ", "))
}

// instructions renders the index and the rules of use: the bundled
// skills, then the learnt ones, marked.
func instructions(mode Mode, bundled, learnt []Skill) string {
	all := slices.Concat(bundled, learnt)
	if len(all) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Skills\n")
	b.WriteString("A skill is a set of instructions, with scripts and resources, for one kind of task. These skills are available:\n")
	for i, s := range all {
		desc := strings.Join(strings.Fields(s.Description), " ")
		var notes []string
		if i >= len(bundled) {
			notes = append(notes, "learnt from earlier work")
		}
		if mode != Text {
			notes = append(notes, "file: "+Path(s.Name)+"/"+SkillFile)
		}
		fmt.Fprintf(&b, "- %s: %s", s.Name, desc)
		if len(notes) > 0 {
			b.WriteString(" (" + strings.Join(notes, "; ") + ")")
		}
		b.WriteString("\n")
	}
	b.WriteString("\nHow to use skills:\n")
	b.WriteString("- When the user names a skill as `$name` (for example `$" + all[0].Name + "`), or the task clearly matches a skill's description, use that skill for this turn. Use only the skills that apply, and do not carry a skill into later turns unless it is named again or still applies.\n")
	switch mode {
	case Eager:
		b.WriteString("- To use a skill, read its SKILL.md at the path above before you start, and follow it. Paths it mentions are relative to its folder; run its scripts from there rather than rewriting them.\n")
	case Lazy:
		b.WriteString("- To use a skill, call `load_skill` with its name first: it copies the skill to the path above and returns its instructions. Then follow them. Paths they mention are relative to the skill's folder; run its scripts from there rather than rewriting them.\n")
	case Text:
		b.WriteString("- To use a skill, call `read_skill` with its name to read its instructions, then follow them. Call it with a path as well to read one of the files they mention.\n")
	}
	b.WriteString("- If a skill cannot be loaded or does not fit the task, say so briefly and carry on as best you can.")
	return b.String()
}

// manifest is the entries that put every skill in the workspace.
func manifest(all []Skill) sandbox.Manifest {
	var m sandbox.Manifest
	for _, s := range all {
		m.Entries = append(m.Entries, sandbox.Entry{Kind: sandbox.EntryDir, Path: Path(s.Name)})
		for _, f := range s.Files {
			m.Entries = append(m.Entries, sandbox.Entry{Kind: sandbox.EntryFile, Path: Path(s.Name) + "/" + f.Path, Content: f.Content, Mode: uint32(fileMode(f))})
		}
	}
	return m
}

func fileMode(f File) fs.FileMode {
	if f.Executable {
		return 0o755
	}
	return 0o644
}

// LoadSkillArgs are load_skill's arguments.
type LoadSkillArgs struct {
	// Name is the skill to load.
	Name string `json:"name" jsonschema:"description=The name of the skill to load, as the skills list gives it."`
}

// load is load_skill: it writes the skill's files through the agent's
// sandbox session, and returns its instructions.
func (c *Capability) load(ctx context.Context, args LoadSkillArgs) (string, error) {
	s, ok := sandbox.SessionFrom(ctx)
	if !ok {
		return "", capabilities.ErrNoSession
	}
	sk, err := c.skill(ctx, strings.TrimPrefix(strings.TrimSpace(args.Name), "$"))
	if err != nil {
		return "", err
	}
	dir := Path(sk.Name)
	for _, f := range sk.Files {
		if err := s.WriteFile(ctx, dir+"/"+f.Path, []byte(f.Content), fileMode(f)); err != nil {
			return "", fmt.Errorf("load_skill: write %s/%s: %w", dir, f.Path, err)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Skill %s is loaded in %s/ (files: ", sk.Name, dir)
	for i, f := range sk.Files {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.Path)
	}
	fmt.Fprintf(&b, "). Its instructions (%s):\n\n%s", SkillFile, bounded(sk.Instructions, dir+"/"+SkillFile))
	return b.String(), nil
}

// ReadSkillArgs are read_skill's arguments.
type ReadSkillArgs struct {
	// Name is the skill to read.
	Name string `json:"name" jsonschema:"description=The name of the skill, as the skills list gives it."`
	// Path, when set, is one of the skill's files, relative to its folder;
	// empty means its instructions (SKILL.md).
	Path string `json:"path,omitempty" jsonschema:"description=A file of the skill to read, relative to the skill's folder (for example scripts/check.sh); leave it out to read the skill's instructions."`
}

// read is read_skill.
func (c *Capability) read(ctx context.Context, args ReadSkillArgs) (string, error) {
	sk, err := c.skill(ctx, strings.TrimPrefix(strings.TrimSpace(args.Name), "$"))
	if err != nil {
		return "", err
	}
	p := strings.TrimPrefix(strings.TrimSpace(args.Path), "./")
	if p == "" {
		p = SkillFile
	}
	if err := checkPath(p); err != nil {
		return "", err
	}
	f, ok := sk.file(p)
	if !ok {
		names := make([]string, len(sk.Files))
		for i, f := range sk.Files {
			names[i] = f.Path
		}
		return "", fmt.Errorf("skill %s has no file %q; its files are: %s", sk.Name, p, strings.Join(names, ", "))
	}
	if p == SkillFile {
		return bounded(sk.Instructions, ""), nil
	}
	if strings.IndexByte(f.Content, 0) >= 0 || !utf8.ValidString(f.Content) {
		return fmt.Sprintf("%s of skill %s is a binary file of %d bytes; it cannot be shown as text.", p, sk.Name, len(f.Content)), nil
	}
	return bounded(f.Content, ""), nil
}

// bounded cuts text to MaxReadBytes, never inside a character, with a
// note that says so (and where the whole file is, when it is in the
// workspace).
func bounded(text, where string) string {
	if len(text) <= MaxReadBytes {
		return text
	}
	n := MaxReadBytes
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	note := fmt.Sprintf("\n\n[cut: %d bytes in all; the first %d are shown", len(text), n)
	if where != "" {
		note += "; read the rest in " + where
	}
	return text[:n] + note + "]"
}

// CheckAgent checks the skills of all of a's skills capabilities
// together: two with one name fail with ErrDuplicate, as would two
// Eager capabilities writing the same folder. Each capability has
// checked its own skills already (New). The worker calls it for every
// agent of the graphs it serves.
func CheckAgent(a *agents.Agent) error {
	owner := map[string]int{}
	var errs []error
	for i, c := range a.Capabilities {
		sc, ok := c.(*Capability)
		if !ok || sc == nil {
			continue
		}
		for _, s := range sc.skills {
			if j, dup := owner[s.Name]; dup {
				errs = append(errs, &Error{Skill: s.Name, Err: fmt.Errorf("%w: agent %s has %q in capabilities %d and %d", ErrDuplicate, a.Name, s.Name, j, i)})
				continue
			}
			owner[s.Name] = i
		}
	}
	return errors.Join(errs...)
}
