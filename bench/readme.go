package main

import (
	"bytes"
	"fmt"
	"os"
)

// The README shows the latest table between these markers, so that the
// figures a reader sees first are the last run's.
const (
	readmeFile  = "bench/README.md"
	latestBegin = "<!-- bench:latest -->\n"
	latestEnd   = "<!-- /bench:latest -->\n"
)

// updateReadme replaces what lies between the markers of the README at path
// with report.
func updateReadme(path, report string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	before, rest, found := bytes.Cut(data, []byte(latestBegin))
	_, after, foundEnd := bytes.Cut(rest, []byte(latestEnd))
	if !found || !foundEnd {
		return fmt.Errorf("%s lacks the markers %q and %q", path, latestBegin, latestEnd)
	}
	var b bytes.Buffer
	b.Write(before)
	b.WriteString(latestBegin)
	b.WriteString(report)
	b.WriteString(latestEnd)
	b.Write(after)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
