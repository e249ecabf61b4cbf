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
