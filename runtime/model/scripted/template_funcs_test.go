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
