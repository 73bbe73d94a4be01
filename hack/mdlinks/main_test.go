package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSlugsAreGitHubs(t *testing.T) {
	var s slugger
	for _, c := range []struct{ heading, want string }{
		{"kubectl edgeota: following and pausing a rollout", "kubectl-edgeota-following-and-pausing-a-rollout"},
		{"The failure brake, and following a rollout", "the-failure-brake-and-following-a-rollout"},
		{"The owner's view", "the-owners-view"},
		{"`edgeota.io/paused`", "edgeotaiopaused"},
		{"Café & Crème", "café--crème"},
		{"[A link](x.md) and *emphasis*", "a-link-and-emphasis"},
		{"snake_case and _emphasis_", "snake_case-and-emphasis"},
		{"Exit codes — otactl", "exit-codes--otactl"},
		{"What limits the figures", "what-limits-the-figures"},
		{"What limits the figures", "what-limits-the-figures-1"},
		{"What limits the figures", "what-limits-the-figures-2"},
		{"What limits the figures 1", "what-limits-the-figures-1-1"},
	} {
		if got := s.slug(headingText(c.heading)); got != c.want {
			t.Errorf("slug(%q): got %q, want %q", c.heading, got, c.want)
		}
	}
}

func TestParseSkipsCode(t *testing.T) {
	d := parseMarkdown(strings.Join([]string{
		"# Title",
		"A [link](a.md#x) and `[not one](b.md)`.",
		"```go",
		"// [not one](c.md)",
		"# not a heading",
		"```",
		"Setext heading",
		"--------------",
		`<a id="custom"></a> [ref]: d.md`,
		"[ref]: e.md#y",
		`<a href="f.md">f</a>`,
	}, "\n"))
	var targets []string
	for _, l := range d.links {
		targets = append(targets, l.target)
	}
	if want := []string{"a.md#x", "e.md#y", "f.md"}; !slices.Equal(targets, want) {
		t.Errorf("got links %q, want %q", targets, want)
	}
	for _, a := range []string{"title", "setext-heading", "custom"} {
		if !d.anchors[a] {
			t.Errorf("no anchor %q in %v", a, d.anchors)
		}
	}
	if d.anchors["not-a-heading"] {
		t.Errorf("a comment in a code block made an anchor")
	}
}

func TestYAMLExamplesNeedAMarker(t *testing.T) {
	d := parseMarkdown(strings.Join([]string{
		"<!-- e2e: TestA, TestB/sub -->",
		"",
		"```yaml",
		"a: 1",
		"```",
		"",
		"```yaml",
		"# e2e: TestC",
		"b: 2",
		"```",
		"",
		"<!-- e2e: TestD -->",
		"Some text between.",
		"```yaml",
		"c: 3",
		"```",
	}, "\n"))
	var marked []bool
	for _, b := range d.yamlBlocks {
		marked = append(marked, b.marked)
	}
	if want := []bool{true, true, false}; !slices.Equal(marked, want) {
		t.Errorf("got blocks marked %v, want %v", marked, want)
	}
	var names []string
	for _, m := range d.markers {
		names = append(names, m.names...)
	}
	if want := []string{"TestA", "TestB/sub", "TestC", "TestD"}; !slices.Equal(names, want) {
		t.Errorf("got names %q, want %q", names, want)
	}
}

// TestCheckReportsEachBrokenLink runs the whole check on a small repository
// (not in git: every file counts) with one good and one broken example of
// each kind.
func TestCheckReportsEachBrokenLink(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("e2e/a_test.go", "package e2e\n\nfunc TestThere(t *testing.T) {\n\tt.Run(\"sub\", nil)\n}\n")
	write("code.go", "package x\n\nvar y = 1\n")
	write("docs/guide.md", strings.Join([]string{
		"# Guide",
		"## Holds and deadlines",
		"[ok](../README.md#front-door) [ok](#holds-and-deadlines) [ok](../code.go#L3) [ok](../docs) [ok](https://example.com/x#y)",
		"[bad](../README.md#front-doors) [bad](#holds) [bad](../code.go#L9) [bad](missing.md) [bad](../code.go#y)",
		"<!-- e2e: TestThere/sub -->",
		"```yaml",
		"a: 1",
		"```",
		"<!-- e2e: TestNowhere, TestThere/nosub -->",
		"```yaml",
		"a: 1",
		"```",
		"```yaml",
		"b: 2",
		"```",
	}, "\n"))
	write("README.md", "# Front door\n[guide](docs/guide.md)\n")
	write("deploy/examples/ok.yaml", "# e2e: TestThere\nkind: DaemonSet\n")
	write("deploy/examples/bad.yaml", "kind: DaemonSet\n")

	problems, st, err := check(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`docs/guide.md:4: broken link "../README.md#front-doors": no anchor #front-doors in README.md (did you mean #front-door?)`,
		`docs/guide.md:4: broken link "#holds": no anchor #holds in docs/guide.md (did you mean #holds-and-deadlines?)`,
		`docs/guide.md:4: broken link "../code.go#L9": code.go has 3 lines`,
		`docs/guide.md:4: broken link "missing.md": no such file or directory`,
		`docs/guide.md:4: broken link "../code.go#y": anchor #y in code.go, which is not Markdown (only #L<line> anchors are)`,
		`docs/guide.md:9: e2e marker names TestNowhere, which is no Test function in e2e/`,
		`docs/guide.md:9: e2e marker names subtest nosub of TestThere, but no string "nosub" is in e2e/`,
		`docs/guide.md:13: example manifest without an e2e marker: put <!-- e2e: TestName --> right above it, naming the scenario that runs it`,
		`deploy/examples/bad.yaml:1: example without an e2e marker: add a comment # e2e: TestName naming the scenario that applies it`,
	}
	slices.Sort(problems)
	slices.Sort(want)
	if !slices.Equal(problems, want) {
		t.Errorf("got problems\n%s\nwant\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	if st.files != 2 || st.links != 10 || st.markers != 3 {
		t.Errorf("got %+v, want 2 files, 10 relative links, 3 markers", st)
	}
}
