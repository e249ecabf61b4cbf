package scripted

import (
	"strings"
	"testing"
	"text/template"
)

func TestTemplateFuncs(t *testing.T) {
	tests := []struct {
		name, tmpl, want string
		data             TemplateData
	}{
		{"after then field", `{{field (after .LastOutput "Output:\n") "discount_pct"}}`, "35",
			TemplateData{LastOutput: "Wall time: 0.01 seconds\nProcess exited with code 0\nOutput:\n{\"discount_pct\":35}"}},
		{"after without marker keeps all", `{{after .LastOutput "Output:\n"}}`, "plain", TemplateData{LastOutput: "plain"}},
		{"join", `{{join .Outputs "+"}}`, "a+b", TemplateData{Outputs: []string{"a", "b"}}},
		{"json", `{{json .Outputs}}`, `["a"]`, TemplateData{Outputs: []string{"a"}}},
		{"match first submatch", "{{match .LastOutput `(?m)^\\+\\+\\+ b/(\\S+)`}}", "auth/login.go",
			TemplateData{LastOutput: "--- a/auth/login.go\n+++ b/auth/login.go\n@@ -1,3 +1,4 @@\n+++ b/other.go\n"}},
		{"match without group is the whole match", `{{match .LastOutput "code [0-9]+"}}`, "code 2",
			TemplateData{LastOutput: "Process exited with code 2\nOutput:\n"}},
		{"match nothing is empty", `{{or (match .LastOutput "nope (x)") "none"}}`, "none", TemplateData{LastOutput: "text"}},
		{"add a count to a match", "{{add (match .LastInput `^ok (\\d+)$`) 1}}", "42", TemplateData{LastInput: "ok 41"}},
		{"add counts no match as 0", "{{add (match .LastInput `^ok (\\d+)$`) 1}}", "1", TemplateData{LastInput: "go"}},
		{"add numbers", `{{add 2 " 3 " -1}}`, "4", TemplateData{}},
		{"before", `{{before .User "# REMOVED"}}`, "# ADDED\n- a\n", TemplateData{User: "# ADDED\n- a\n# REMOVED\n- b"}},
		{"before without marker keeps all", `{{before .User "# REMOVED"}}`, "plain", TemplateData{User: "plain"}},
		{"matches joins distinct submatches in order", "{{matches .User `(?m)^- (.+)$` \"; \"}}", "b; a",
			TemplateData{User: "x\n- b\n- a\n- b\n"}},
		{"matches without group", "{{matches .User `[0-9]+` \",\"}}", "1,22", TemplateData{User: "1 22 1"}},
		{"matches nothing is empty", "{{matches .User `z` \",\"}}", "", TemplateData{User: "abc"}},
		{"instructions", "{{match .Instructions `(?m)^- Acme: (.*)$`}}", "approved", TemplateData{Instructions: "## Memory\n- Acme: approved\n"}},
		{"sha256 and len of a message", "{{len .LastUser}} {{sha256 .LastUser}}", "3 ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", TemplateData{LastUser: "abc"}},
		{"match then json", "{{json (match .LastOutput `:(\\d+):`)}}", `"12"`, TemplateData{LastOutput: "repo/a.go:12:x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := template.Must(template.New("t").Funcs(templateFuncs).Parse(tc.tmpl)).Execute(&b, tc.data); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got %q, want %q", b.String(), tc.want)
			}
		})
	}
}

func TestTemplateMatchInvalidPattern(t *testing.T) {
	tmpl := template.Must(template.New("t").Funcs(templateFuncs).Parse(`{{match .LastOutput "("}}`))
	err := tmpl.Execute(&strings.Builder{}, TemplateData{LastOutput: "x"})
	if err == nil || !strings.Contains(err.Error(), "match: error parsing regexp") {
		t.Errorf("err = %v, want a match error naming the bad pattern", err)
	}
}

func TestTemplateAddNotANumber(t *testing.T) {
	tmpl := template.Must(template.New("t").Funcs(templateFuncs).Parse(`{{add .LastInput 1}}`))
	err := tmpl.Execute(&strings.Builder{}, TemplateData{LastInput: "seven"})
	if err == nil || !strings.Contains(err.Error(), `add: "seven" is not an integer`) {
		t.Errorf("err = %v, want an add error naming the text", err)
	}
}
