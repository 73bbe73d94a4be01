//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docBlock is a fenced code block of the manual: its language and lines.
type docBlock struct {
	lang  string
	lines []string
}

// text is the block as written.
func (b docBlock) text() string { return strings.Join(b.lines, "\n") + "\n" }

// fenceLine opens or closes a fenced code block.
var fenceLine = regexp.MustCompile("^```\\s*(\\S*)\\s*$")

// markedBlocks reads the Markdown file (relative to the checkout) and
// returns, for each e2e marker naming scenario, the code blocks that follow
// it up to the next prose: the blocks the marker says the scenario runs.
// The scenarios read their examples from the manual itself, so that an
// example changed there is the example they run (hack/mdlinks checks that
// every marker names a scenario that exists). No marker naming the scenario
// fails the test: an example without a scenario is what this prevents.
func markedBlocks(t *testing.T, root, file, scenario string) [][]docBlock {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var found [][]docBlock
	for i := 0; i < len(lines); i++ {
		if !isMarker(lines[i], scenario) {
			continue
		}
		var blocks []docBlock
		for j := i + 1; j < len(lines); j++ {
			l := lines[j]
			if strings.TrimSpace(l) == "" {
				continue
			}
			m := fenceLine.FindStringSubmatch(l)
			if m == nil {
				break // prose: the marked examples end
			}
			b := docBlock{lang: m[1]}
			for j++; j < len(lines) && !fenceLine.MatchString(lines[j]); j++ {
				b.lines = append(b.lines, lines[j])
			}
			blocks = append(blocks, b)
		}
		found = append(found, blocks)
	}
	if len(found) == 0 {
		t.Fatalf("%s has no <!-- e2e: %s --> marker", file, scenario)
	}
	return found
}

// isMarker reports whether line is an e2e marker naming scenario (as the
// whole name, or as the whole of its subtest's).
func isMarker(line, scenario string) bool {
	_, names, ok := strings.Cut(line, "e2e:")
	if !ok || !strings.Contains(line, "<!--") {
		return false
	}
	names, _, _ = strings.Cut(names, "-->")
	for _, n := range strings.FieldsFunc(names, func(r rune) bool { return r == ',' || r == ' ' }) {
		if n == scenario {
			return true
		}
	}
	return false
}
