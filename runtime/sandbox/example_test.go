package sandbox_test

import (
	"errors"
	"fmt"

	"github.com/troupe-dev/troupe/runtime/sandbox"
)

func ExampleCleanPath() {
	for _, p := range []string{"./src//main.go", "../etc/passwd", "/etc/passwd"} {
		clean, err := sandbox.CleanPath(p)
		fmt.Printf("%q %v\n", clean, errors.Is(err, sandbox.ErrPathEscape))
	}
	// Output:
	// "src/main.go" false
	// "" true
	// "" true
}

func ExampleCapOutput() {
	text, truncated := sandbox.CapOutput([]byte("first line\n...many lines...\nlast line\n"), 20)
	fmt.Println(truncated)
	fmt.Print(text)
	// Output:
	// true
	// first line
	// …[18 bytes truncated]…
	// last line
}

func ExampleManifest_Validate() {
	m := sandbox.Manifest{Entries: []sandbox.Entry{
		{Kind: sandbox.EntryFile, Path: "notes.md", Content: "# Notes\n"},
		{Kind: sandbox.EntryLocalFile, Path: "passwd", Source: "/etc/passwd"},
	}}
	err := m.Validate(sandbox.Policy{}) // The zero Policy allows no host source.
	fmt.Println(errors.Is(err, sandbox.ErrSourceNotAllowed))
	// Output:
	// true
}
