package mcp

import (
	"fmt"
	"regexp"
	"sort"
)

// minimalEnv names the worker variables a stdio server inherits: enough to
// find programs and behave as the worker's user, and nothing secret.
var minimalEnv = []string{"PATH", "HOME", "USER", "LANG", "TERM", "TMPDIR"}

// envRef is a reference to a worker variable in a declaration's value. Only
// the braced form counts, so a value with a bare '$' (a password, a regex)
// stays as written.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces the ${NAME} references in value. field says where the
// value comes from, for the error about an unset variable.
func expandEnv(value, field string, lookup func(string) (string, bool)) (string, error) {
	var missing string
	out := envRef.ReplaceAllStringFunc(value, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		v, ok := lookup(name)
		if !ok && missing == "" {
			missing = name
		}
		return v
	})
	if missing != "" {
		return "", fmt.Errorf("environment variable %s (named in %s) is not set on the worker", missing, field)
	}
	return out, nil
}

// expandMap expands every value of m; field names the map for errors.
func expandMap(m map[string]string, field string, lookup func(string) (string, bool)) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for _, k := range sortedKeys(m) {
		v, err := expandEnv(m[k], fmt.Sprintf("%s[%q]", field, k), lookup)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// serverEnv is a stdio server's whole environment: the minimal set copied
// from the worker's environment as lookup sees it, then the declaration's
// Env (expanded with lookup) on top.
func serverEnv(env map[string]string, lookup func(string) (string, bool)) ([]string, error) {
	vars := map[string]string{}
	for _, k := range minimalEnv {
		if v, ok := lookup(k); ok {
			vars[k] = v
		}
	}
	own, err := expandMap(env, "Env", lookup)
	if err != nil {
		return nil, err
	}
	for k, v := range own {
		vars[k] = v
	}
	out := make([]string, 0, len(vars))
	for _, k := range sortedKeys(vars) {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
