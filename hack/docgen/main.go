// Command docgen writes the reference tables of the manual that the code
// already holds, so that each fact has one place: the code. `make docs` runs
// it; `make fresh` runs it and fails when what it writes differs from what
// git has.
//
//	docs/reference/annotations.md  package rollout's *Annotation constants and their doc comments
//	docs/reference/conditions.md   package podcondition's condition types and reasons
//	docs/reference/events.md       package rollout's Reason* constants, with the type each is recorded with
//	docs/reference/metrics.md      the client_golang options of every metric the binaries define
//	docs/reference/flags.md        the flag sets of the binaries under cmd/, as their --help prints them
//
// It reads the source of the packages the binaries under cmd/ link (`go
// list -deps`), so a key, a reason or a metric added to any of them, or a
// flag added to any binary, is in the next run with no change here. What it
// cannot read (a metric whose name is not a constant, a key without a doc
// comment) fails the run, naming the file and line.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", "docs/reference", "directory to write the pages into")
	root := flag.String("root", ".", "the repository's root")
	goTool := flag.String("go", "go", "the go command")
	flag.Parse()
	if err := run(*goTool, *root, *out); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}

func run(goTool, root, out string) error {
	s, err := load(goTool, root)
	if err != nil {
		return err
	}
	pages := []struct {
		name string
		gen  func() (string, error)
	}{
		{"annotations.md", func() (string, error) { return annotations(s) }},
		{"conditions.md", func() (string, error) { return conditions(s) }},
		{"events.md", func() (string, error) { return events(s) }},
		{"metrics.md", func() (string, error) { return metrics(s) }},
		{"flags.md", func() (string, error) { return flags(s, goTool, root) }},
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, p := range pages {
		text, err := p.gen()
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		path := filepath.Join(out, p.name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, []byte(text)) {
			continue
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return err
		}
		fmt.Println("docgen: wrote", path)
	}
	return nil
}
