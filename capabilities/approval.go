package capabilities

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/troupe-dev/troupe/agents"
)

// CommandApproval is an approval policy for exec_command (see
// agents.Approval): a call waits for a human's decision when needs
// returns true for its command. CommandApproval(func(cmd string) bool {
// return !ReadOnlyCommand(cmd) }) asks before anything but reading.
func CommandApproval(needs func(cmd string) bool) agents.Approval {
	return agents.When("exec_command", func(_ context.Context, raw json.RawMessage) (bool, error) {
		var args ExecCommandArgs
		if err := json.Unmarshal(raw, &args); err != nil {
			return true, fmt.Errorf("exec_command arguments: %w", err)
		}
		return needs(args.Cmd), nil
	})
}

// PatchApproval is an approval policy for apply_patch: a call waits for a
// human's decision when needs returns true for the paths its patch
// touches (each file's path, and the new path of a moved file). A patch
// that does not parse waits too: the human sees what the model sent.
func PatchApproval(needs func(paths []string) bool) agents.Approval {
	return agents.When("apply_patch", func(_ context.Context, raw json.RawMessage) (bool, error) {
		var args ApplyPatchArgs
		if err := json.Unmarshal(raw, &args); err != nil {
			return true, fmt.Errorf("apply_patch arguments: %w", err)
		}
		p, err := ParsePatch(args.Input)
		if err != nil {
			return true, err
		}
		return needs(PatchPaths(p)), nil
	})
}

// PatchPaths are the paths a patch touches, in patch order: each file's
// path and the new path of a moved file.
func PatchPaths(p *Patch) []string {
	var paths []string
	for _, f := range p.Files {
		paths = append(paths, f.Path)
		if f.MoveTo != "" {
			paths = append(paths, f.MoveTo)
		}
	}
	return paths
}

// readOnlyPrograms are programs that only read, whatever their arguments,
// except for the arguments writers lists.
var readOnlyPrograms = []string{"cat", "ls", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "find", "sed", "awk",
	"stat", "file", "pwd", "echo", "tree", "du", "diff", "cmp", "sort", "uniq", "cut", "tr", "nl", "less", "more", "true", "which", "basename", "dirname", "realpath", "go"}

// readOnlyGit are git's subcommands that only read.
var readOnlyGit = []string{"log", "diff", "show", "status", "grep", "blame", "ls-files", "rev-parse", "branch", "describe", "shortlog"}

// readOnlyGo are go's subcommands that only read (go vet writes to its
// build cache only, outside the workspace).
var readOnlyGo = []string{"vet", "list", "doc", "version", "env"}

// ReadOnlyCommand reports whether a shell command only reads the
// workspace, by a conservative reading of it: every command of its
// pipelines, lists and command substitutions is a program that only reads
// (cat, ls, grep, rg, find, sed, awk, git log, ...), with no redirection
// but to /dev/null, no backquotes, no background job, no assignment or
// program named by path, and none of the arguments that make a reader
// write or run something (sed -i, find -delete or -exec, sort -o, awk's
// system or print to a file or command). When in doubt it says no, so a
// policy built on it asks a human. It is a policy's reading, not a
// boundary: the sandbox is that.
func ReadOnlyCommand(cmd string) bool {
	segs, ok := shellCommands(cmd, 0)
	if !ok {
		return false
	}
	for _, words := range segs {
		if !readOnlyWords(words) {
			return false
		}
	}
	return true
}

// readOnlyWords reports whether one simple command (its words, quotes
// removed) only reads.
func readOnlyWords(words []string) bool {
	if len(words) == 0 {
		return true
	}
	prog, args := words[0], words[1:]
	if strings.Contains(prog, "=") || strings.Contains(prog, "/") {
		return false // An assignment, or a program by path.
	}
	switch {
	case prog == "git":
		if len(args) == 0 || !slices.Contains(readOnlyGit, args[0]) || slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--output") }) {
			return false
		}
	case prog == "go":
		if len(args) == 0 || !slices.Contains(readOnlyGo, args[0]) {
			return false
		}
	case !slices.Contains(readOnlyPrograms, prog):
		return false
	}
	for _, a := range args {
		switch {
		case prog == "sed" && (strings.HasPrefix(a, "-i") || strings.HasPrefix(a, "--in-place") || strings.Contains(a, "w ") || strings.HasSuffix(a, "/e")),
			prog == "find" && slices.Contains([]string{"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}, a),
			prog == "sort" && (strings.HasPrefix(a, "-o") || strings.HasPrefix(a, "--output")),
			prog == "awk" && (strings.Contains(a, "system") || strings.Contains(a, "getline") || awkWrites.MatchString(a)),
			prog == "rg" && strings.HasPrefix(a, "--pre"):
			return false
		}
	}
	return true
}

// awkWrites finds an awk print or printf to a file or a command.
var awkWrites = regexp.MustCompile(`printf?[^;}]*(>|\|\s*")`)

// shellCommands splits a command line into its simple commands, each as
// its words with quotes removed, command substitutions $(...) included as
// commands of their own. ok is false for what it does not read: a
// backquote, a redirection to anything but /dev/null or another
// descriptor, a lone & (a background job), an unclosed quote, or nesting
// too deep.
func shellCommands(cmd string, depth int) (segs [][]string, ok bool) {
	if depth > 4 {
		return nil, false
	}
	var words []string
	var word strings.Builder
	inWord := false
	endWord := func() {
		if inWord {
			words = append(words, word.String())
			word.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			segs = append(segs, words)
		}
		words = nil
	}
	rs := []rune(cmd)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\\':
			if i+1 < len(rs) {
				i++
				word.WriteRune(rs[i])
				inWord = true
			}
		case r == '\'':
			j := i + 1
			for j < len(rs) && rs[j] != '\'' {
				j++
			}
			if j == len(rs) {
				return nil, false
			}
			word.WriteString(string(rs[i+1 : j]))
			inWord, i = true, j
		case r == '"':
			j := i + 1
			for ; j < len(rs) && rs[j] != '"'; j++ {
				if rs[j] == '\\' {
					j++
				} else if rs[j] == '`' || rs[j] == '$' && j+1 < len(rs) && rs[j+1] == '(' {
					return nil, false // A substitution inside quotes: not read here.
				}
			}
			if j >= len(rs) {
				return nil, false
			}
			word.WriteString(string(rs[i+1 : j]))
			inWord, i = true, j
		case r == '`':
			return nil, false
		case r == '$' && i+1 < len(rs) && rs[i+1] == '(':
			end, found := closing(rs, i+2)
			if !found {
				return nil, false
			}
			inner, ok := shellCommands(string(rs[i+2:end]), depth+1)
			if !ok {
				return nil, false
			}
			segs = append(segs, inner...)
			word.WriteString("$(...)")
			inWord, i = true, end
		case r == '>':
			rest := strings.TrimLeft(string(rs[i+1:]), ">")
			rest = strings.TrimLeft(rest, " \t")
			switch {
			case strings.HasPrefix(rest, "/dev/null"):
				i += len([]rune(string(rs[i+1:]))) - len([]rune(rest)) + len("/dev/null")
			case strings.HasPrefix(rest, "&") && len(rest) > 1 && rest[1] >= '0' && rest[1] <= '9':
				i += len([]rune(string(rs[i+1:]))) - len([]rune(rest)) + 2
			default:
				return nil, false
			}
			// A descriptor number before the > is not a word of its own.
			if inWord && strings.Trim(word.String(), "0123456789") == "" {
				word.Reset()
				inWord = false
			}
		case r == '&':
			if i+1 < len(rs) && rs[i+1] == '&' {
				i++
				endCmd()
			} else {
				return nil, false
			}
		case r == '|' || r == ';' || r == '\n' || r == '(' || r == ')':
			endCmd()
		case r == ' ' || r == '\t':
			endWord()
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	endCmd()
	return segs, true
}

// closing is the index of the ) that closes a ( opened before from.
func closing(rs []rune, from int) (int, bool) {
	depth := 1
	for i := from; i < len(rs); i++ {
		switch rs[i] {
		case '\'':
			for i++; i < len(rs) && rs[i] != '\''; i++ {
			}
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i, true
			}
		}
	}
	return 0, false
}
