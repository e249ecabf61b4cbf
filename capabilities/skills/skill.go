package skills

// What a skill is, and the rules every skill passes whatever its source:
// SKILL.md's frontmatter, the name and description rules, the size
// limits, and workspace-relative paths without symlinks.

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

// SkillFile is the name of the file that makes a folder a skill.
const SkillFile = "SKILL.md"

// MaxDescription bounds a skill's description, in bytes: it goes into
// every turn's instructions.
const MaxDescription = 1024

// namePattern is the rule of skill names: lower-case letters, digits and
// dashes, starting with a letter or digit, at most 64 characters. A name
// is a folder name in every workspace and the word after "$" in a user's
// message, so it is kept plain.
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// Errors callers branch on. Every error of a source or of New wraps one
// of them (or sandbox.ErrPathEscape, or sandbox.ErrSourceNotAllowed) in
// an *Error that says which source and skill.
var (
	// ErrInvalidName reports a skill name that breaks the name rule, or
	// that differs from its folder's name.
	ErrInvalidName = errors.New("skills: invalid name")
	// ErrFrontmatter reports a SKILL.md that is missing, or whose YAML
	// frontmatter is missing or does not parse.
	ErrFrontmatter = errors.New("skills: invalid SKILL.md frontmatter")
	// ErrDescription reports a description that is empty or longer than
	// MaxDescription.
	ErrDescription = errors.New("skills: invalid description")
	// ErrTooLarge reports a file, a skill or a set of skills over a limit.
	ErrTooLarge = errors.New("skills: over a limit")
	// ErrSymlink reports a symlink in a skill's folder: skills are copied
	// into workspaces, and a link could point anywhere once there.
	ErrSymlink = errors.New("skills: symlinks are not allowed")
	// ErrDuplicate reports two skills with one name in one agent.
	ErrDuplicate = errors.New("skills: duplicate skill name")
	// ErrUnknown reports a skill name that the agent does not have.
	ErrUnknown = errors.New("skills: unknown skill")
)

// Error is a skill that cannot be used, and why.
type Error struct {
	// Source names where the skill came from (a directory, a repository).
	Source string
	// Skill is the skill's folder or name, when known.
	Skill string
	// Err is the reason; it wraps one of the package's errors.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("skills")
	if e.Source != "" {
		b.WriteString(": " + e.Source)
	}
	if e.Skill != "" {
		b.WriteString(": skill " + e.Skill)
	}
	return b.String() + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Limits bound what a skill may hold; zero fields take the defaults.
type Limits struct {
	// MaxFileBytes bounds one file; the default is 1 MiB.
	MaxFileBytes int64
	// MaxSkillBytes bounds a skill's files together; the default is 4 MiB.
	MaxSkillBytes int64
	// MaxFiles bounds a skill's files, SKILL.md included; the default is
	// 200.
	MaxFiles int
	// MaxSkills bounds the skills of one capability; the default is 100.
	MaxSkills int
}

// withDefaults returns l with its zero fields set to the defaults.
func (l Limits) withDefaults() Limits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = 1 << 20
	}
	if l.MaxSkillBytes <= 0 {
		l.MaxSkillBytes = 4 << 20
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = 200
	}
	if l.MaxSkills <= 0 {
		l.MaxSkills = 100
	}
	return l
}

// Skill is a folder of know-how: a SKILL.md (YAML frontmatter with at
// least name and description, then the instructions) and any scripts,
// references and assets beside it.
type Skill struct {
	// Name identifies the skill; it matches ^[a-z0-9][a-z0-9-]{0,63}$
	// and, for a skill read from a folder, the folder's name.
	Name string
	// Description says what the skill does and when to use it; it is
	// required and at most MaxDescription bytes.
	Description string
	// Instructions are SKILL.md's body, after the frontmatter.
	Instructions string
	// Files are the skill's files by slash-separated path relative to its
	// folder, sorted. A loaded skill's include SKILL.md; in an Inline
	// skill that leaves it out, one is made from the fields above.
	Files []File
}

// File is one file of a skill.
type File struct {
	// Path is relative to the skill's folder, slash-separated, with no
	// "." or ".." element.
	Path string
	// Content is the file's bytes.
	Content string
	// Executable marks a script: it is written with mode 0755 rather
	// than 0644.
	Executable bool
}

// frontmatter is what SKILL.md's YAML header must hold; other keys
// (license, metadata, allowed-tools) are allowed and ignored.
type frontmatter struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// ParseSkillFile splits a SKILL.md into its frontmatter's name and
// description and its body. The file must start with a line "---", and
// the frontmatter ends at the next line "---". It checks neither the name
// nor the description: Validate does.
func ParseSkillFile(content string) (name, description, body string, err error) {
	s := strings.TrimPrefix(content, "\ufeff")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	rest, ok := strings.CutPrefix(s, "---\n")
	if !ok {
		return "", "", "", fmt.Errorf("%w: %s must start with a line \"---\"", ErrFrontmatter, SkillFile)
	}
	var header string
	switch {
	case strings.HasPrefix(rest, "---\n") || rest == "---":
		header, body = "", strings.TrimPrefix(strings.TrimPrefix(rest, "---"), "\n")
	default:
		i := strings.Index(rest, "\n---\n")
		if i < 0 {
			if !strings.HasSuffix(rest, "\n---") {
				return "", "", "", fmt.Errorf("%w: no closing line \"---\"", ErrFrontmatter)
			}
			i = len(rest) - len("\n---")
			header, body = rest[:i], ""
		} else {
			header, body = rest[:i], rest[i+len("\n---\n"):]
		}
	}
	var fm frontmatter
	if err := yaml.Unmarshal([]byte(header), &fm); err != nil {
		return "", "", "", fmt.Errorf("%w: %w", ErrFrontmatter, err)
	}
	return strings.TrimSpace(fm.Name), strings.TrimSpace(fm.Description), strings.TrimLeft(body, "\n"), nil
}

// Validate checks s against lim (zero fields meaning the defaults): the
// name rule, a description present and bounded, every path clean and
// relative, no file twice, SKILL.md present and agreeing with Name and
// Description, and the size limits.
func (s *Skill) Validate(lim Limits) error {
	lim = lim.withDefaults()
	var errs []error
	if !namePattern.MatchString(s.Name) {
		errs = append(errs, fmt.Errorf("%w: %q must match %s", ErrInvalidName, s.Name, namePattern))
	}
	switch d := s.Description; {
	case strings.TrimSpace(d) == "":
		errs = append(errs, fmt.Errorf("%w: the description is empty", ErrDescription))
	case len(d) > MaxDescription:
		errs = append(errs, fmt.Errorf("%w: the description has %d bytes, over %d", ErrDescription, len(d), MaxDescription))
	case !utf8.ValidString(d):
		errs = append(errs, fmt.Errorf("%w: the description is not UTF-8", ErrDescription))
	}
	if len(s.Files) > lim.MaxFiles {
		errs = append(errs, fmt.Errorf("%w: %d files, over %d", ErrTooLarge, len(s.Files), lim.MaxFiles))
	}
	var total int64
	seen := map[string]bool{}
	hasSkillFile := false
	for _, f := range s.Files {
		if err := checkPath(f.Path); err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[f.Path] {
			errs = append(errs, fmt.Errorf("file %q twice", f.Path))
		}
		seen[f.Path] = true
		if n := int64(len(f.Content)); n > lim.MaxFileBytes {
			errs = append(errs, fmt.Errorf("%w: file %q has %d bytes, over %d", ErrTooLarge, f.Path, n, lim.MaxFileBytes))
		}
		total += int64(len(f.Content))
		if f.Path == SkillFile {
			hasSkillFile = true
			name, desc, body, err := ParseSkillFile(f.Content)
			switch {
			case err != nil:
				errs = append(errs, err)
			case name != s.Name || desc != strings.TrimSpace(s.Description) || body != s.Instructions:
				errs = append(errs, fmt.Errorf("%w: %s does not say what the skill's fields say", ErrFrontmatter, SkillFile))
			}
		}
	}
	if !hasSkillFile {
		errs = append(errs, fmt.Errorf("%w: no %s", ErrFrontmatter, SkillFile))
	}
	if total > lim.MaxSkillBytes {
		errs = append(errs, fmt.Errorf("%w: %d bytes in all, over %d", ErrTooLarge, total, lim.MaxSkillBytes))
	}
	return errors.Join(errs...)
}

// checkPath checks a file's path in its skill: relative, clean,
// slash-separated, without "..": nothing that could leave the skill's
// folder once written.
func checkPath(p string) error {
	if p == "" || strings.IndexByte(p, 0) >= 0 || strings.Contains(p, "\\") {
		return fmt.Errorf("%w: invalid file path %q", sandbox.ErrPathEscape, p)
	}
	if path.IsAbs(p) || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("%w: file path %q is not a clean relative path", sandbox.ErrPathEscape, p)
	}
	return nil
}

// fromFiles makes the skill in folder (its name, or "" when unknown)
// from its files, and validates it.
func fromFiles(folder string, files []File, lim Limits) (Skill, error) {
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	var s Skill
	i := slices.IndexFunc(files, func(f File) bool { return f.Path == SkillFile })
	if i < 0 {
		return s, fmt.Errorf("%w: no %s", ErrFrontmatter, SkillFile)
	}
	name, desc, body, err := ParseSkillFile(files[i].Content)
	if err != nil {
		return s, err
	}
	s = Skill{Name: name, Description: desc, Instructions: body, Files: files}
	if err := s.Validate(lim); err != nil {
		return s, err
	}
	if folder != "" && folder != name {
		return s, fmt.Errorf("%w: %q is in a folder named %q", ErrInvalidName, name, folder)
	}
	return s, nil
}

// skillFile renders a SKILL.md from s's fields.
func skillFile(s Skill) (string, error) {
	var b bytes.Buffer
	b.WriteString("---\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(frontmatter{Name: s.Name, Description: s.Description}); err != nil {
		return "", err
	}
	if err := enc.Close(); err != nil {
		return "", err
	}
	b.WriteString("---\n")
	b.WriteString(s.Instructions)
	return b.String(), nil
}

// file returns the skill's file at path p, if any.
func (s *Skill) file(p string) (File, bool) {
	i := slices.IndexFunc(s.Files, func(f File) bool { return f.Path == p })
	if i < 0 {
		return File{}, false
	}
	return s.Files[i], true
}
