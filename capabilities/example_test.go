package capabilities_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/capabilities"
	"github.com/troupe-dev/troupe/runtime/sandbox"
	"github.com/troupe-dev/troupe/runtime/sandbox/local"
)

// exampleSession provisions a local sandbox for an example and returns
// the context a sandbox tool call gets, and a cleanup func.
func exampleSession(m sandbox.Manifest) (context.Context, func()) {
	root, err := os.MkdirTemp("", "capabilities-example")
	if err != nil {
		panic(err)
	}
	c, err := local.New(local.Config{Root: root})
	if err != nil {
		panic(err)
	}
	s, err := c.Create(context.Background(), sandbox.Spec{ID: "example", Manifest: m})
	if err != nil {
		panic(err)
	}
	return sandbox.WithSession(context.Background(), s), func() {
		_ = s.Stop(context.Background())
		_ = os.RemoveAll(root)
	}
}

// The default capabilities of a sandbox agent and the tools they add.
func ExampleDefault() {
	for _, c := range capabilities.Default() {
		var names []string
		for _, t := range c.Tools() {
			names = append(names, t.Spec().Name)
		}
		_, trims := c.(agents.Compactor)
		fmt.Printf("%s: tools %v, compactor %v\n", c.Name(), names, trims)
	}
	// Output:
	// shell: tools [exec_command], compactor false
	// filesystem: tools [apply_patch view_image], compactor false
	// compaction: tools [], compactor true
}

// exec_command runs a command in the workspace and answers in the OpenAI
// Agents SDK's plain-text shape. (The chunk id and wall time vary; they
// are masked here.)
func ExampleShell() {
	ctx, done := exampleSession(sandbox.Manifest{Entries: []sandbox.Entry{
		{Kind: sandbox.EntryFile, Path: "notes.txt", Content: "one\ntwo\n"},
	}})
	defer done()
	exec := capabilities.Shell().Tools()[0].(*agents.FunctionTool)
	out, err := exec.Call(ctx, `{"cmd":"wc -l < notes.txt; exit 2","workdir":null,"yield_time_ms":5000,"max_output_tokens":null}`)
	if err != nil {
		fmt.Println(err)
		return
	}
	out = regexp.MustCompile(`Chunk ID: \w+\nWall time: [\d.]+`).ReplaceAllString(out, "Chunk ID: …\nWall time: …")
	fmt.Print(out)
	// Output:
	// Chunk ID: …
	// Wall time: … seconds
	// Process exited with code 2
	// Output:
	// 2
}

// apply_patch applies a V4A patch to the workspace and reports each file.
func ExampleFilesystem() {
	ctx, done := exampleSession(sandbox.Manifest{Entries: []sandbox.Entry{
		{Kind: sandbox.EntryFile, Path: "app.py", Content: "def greet():\n    print(\"Hi\")\n"},
	}})
	defer done()
	apply := capabilities.Filesystem().Tools()[0].(*agents.FunctionTool)
	patch := `*** Begin Patch
*** Update File: app.py
@@ def greet():
-    print("Hi")
+    print("Hello, world!")
*** Add File: README.md
+# Greeter
*** End Patch`
	out, err := apply.Call(ctx, fmt.Sprintf(`{"input":%q}`, patch))
	fmt.Println(out, err)
	s, _ := sandbox.SessionFrom(ctx)
	data, _ := s.ReadFile(ctx, "app.py")
	fmt.Print(string(data))

	_, err = apply.Call(ctx, `{"input":"*** Begin Patch\n*** Add File: ../evil\n+x\n*** End Patch"}`)
	fmt.Println(err)
	// Output:
	// Updated app.py
	// Created README.md <nil>
	// def greet():
	//     print("Hello, world!")
	// apply_patch: line 2: sandbox: path escapes the workspace: "../evil" has a ".." element (paths are relative to the workspace root, and ".." is not allowed)
}

// ParsePatch reports what a patch does, and where it is malformed.
func ExampleParsePatch() {
	p, err := capabilities.ParsePatch("*** Begin Patch\n*** Update File: a.go\n*** Move to: b.go\n@@ func F() {\n-\treturn 1\n+\treturn 2\n*** Delete File: c.go\n*** End Patch")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range p.Files {
		fmt.Println(f.Op, f.Path, f.MoveTo, len(f.Hunks))
	}
	_, err = capabilities.ParsePatch("*** Begin Patch\n*** Update File: a.go\n@@\nreturn 1\n*** End Patch")
	fmt.Println(err)
	// Output:
	// update a.go b.go 1
	// delete c.go  0
	// apply_patch: line 4: in Update File a.go: expected a hunk line starting with " " (context), "-" (delete) or "+" (add), or "@@"; got "return 1"
}

// Compaction keeps the task and the latest turns, and says what it left
// out.
func ExampleCompaction() {
	items := []agents.Item{agents.UserMessage("Fix the build.")}
	for i := range 6 {
		id := fmt.Sprint("call_", i)
		items = append(items,
			agents.FunctionCall(id, "exec_command", `{"cmd":"make"}`),
			agents.FunctionCallOutput(id, "error "+fmt.Sprint(i)))
	}
	c := capabilities.Compaction(capabilities.CompactionConfig{MaxItems: 8, KeepLast: 4})
	for _, it := range c.(agents.Compactor).Trim(items) {
		fmt.Println(strings.TrimSpace(fmt.Sprint(it.Type, " ", it.CallID, " ", strings.SplitN(it.Content, ".", 2)[0]+it.Output)))
	}
	// Output:
	// message  Fix the build
	// message  [Context trimmed: 8 earlier items of this conversation were removed to stay within the context limit
	// function_call call_4
	// function_call_output call_4 error 4
	// function_call call_5
	// function_call_output call_5 error 5
}

// A view_image result becomes an image on the item the model sees.
func ExampleExpandImages() {
	out, _ := capabilities.ImageOutput{Text: "Image a.png (image/png, 3 bytes)", ImageURL: "data:image/png;base64,AAAA"}.MarshalJSON()
	items := capabilities.ExpandImages([]agents.Item{agents.FunctionCallOutput("call_1", string(out))})
	fmt.Println(string(out))
	fmt.Printf("%q %q\n", items[0].Output, items[0].Images)
	// Output:
	// {"type":"troupe.image_output","text":"Image a.png (image/png, 3 bytes)","image_url":"data:image/png;base64,AAAA"}
	// "Image a.png (image/png, 3 bytes)" ["data:image/png;base64,AAAA"]
}
