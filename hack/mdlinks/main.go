// Command mdlinks keeps the manual from rotting. It fails, naming the file and
// line, on:
//
//   - a relative link in any Markdown file of the repository to a file or
//     directory git does not have (tracked, or new and not ignored: what
//     GitHub will show), or to an anchor that the target does not define
//     (GitHub's anchors: a heading lower-cased, its punctuation dropped, its
//     spaces made hyphens, a repeated one suffixed -1, -2, ...; <a id>
//     and <a name>; #L12 and #L12-L20 in other files). Links with a scheme
//     (https:, mailto:) are not followed;
//   - an e2e marker (<!-- e2e: TestName --> in Markdown, # e2e: TestName in
//     YAML) naming a scenario that is not a Test function of e2e/, or a
//     subtest (TestName/sub) whose name is not a string in e2e/;
//   - an example manifest without a marker: a ```yaml block of README.md or
//     docs/ not right below one (or holding one as a comment), a file of
//     deploy/examples/ holding none.
//
// `make mdlinks` runs it, and so `make check` and `make test`.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	problems, stats, err := check(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mdlinks:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Printf("mdlinks: %d broken link(s), anchor(s) or e2e marker(s) in %d Markdown files\n", len(problems), stats.files)
		os.Exit(1)
	}
	fmt.Printf("mdlinks: %d Markdown files, %d relative links and %d e2e markers checked\n", stats.files, stats.links, stats.markers)
}

// stats is what a check looked at.
type stats struct{ files, links, markers int }

// repo is the repository as GitHub shows it: its files (tracked, or new and
// not ignored) and the directories holding them.
type repo struct {
	root  string
	files map[string]bool
	dirs  map[string]bool
	docs  map[string]*document
}

// check checks every Markdown file and example of the repository at root.
func check(root string) ([]string, stats, error) {
	files, err := listFiles(root)
	if err != nil {
		return nil, stats{}, err
	}
	r := &repo{root: root, files: map[string]bool{}, dirs: map[string]bool{".": true}, docs: map[string]*document{}}
	for _, f := range files {
		r.files[f] = true
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			r.dirs[d] = true
		}
	}
	tests, sources, err := scenarios(root)
	if err != nil {
		return nil, stats{}, err
	}
	var problems []string
	var st stats
	report := func(file string, line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s", file, line, fmt.Sprintf(format, args...)))
	}
	checkMarker := func(file string, m marker) {
		st.markers++
		for _, name := range m.names {
			test, sub, _ := strings.Cut(name, "/")
			switch {
			case !tests[test]:
				report(file, m.line, "e2e marker names %s, which is no Test function in e2e/", test)
			case sub != "" && !bytes.Contains(sources, []byte(strconv.Quote(sub))):
				report(file, m.line, "e2e marker names subtest %s of %s, but no string %q is in e2e/", sub, test, sub)
			}
		}
	}
	for _, f := range files {
		switch {
		case strings.HasSuffix(f, ".md"):
			st.files++
			d, err := r.doc(f)
			if err != nil {
				return nil, st, err
			}
			for _, l := range d.links {
				if why := r.broken(f, l.target); why != "" {
					report(f, l.line, "broken link %q: %s", l.target, why)
				}
				if isRelative(l.target) {
					st.links++
				}
			}
			for _, m := range d.markers {
				checkMarker(f, m)
			}
			if f == "README.md" || strings.HasPrefix(f, "docs/") {
				for _, b := range d.yamlBlocks {
					if !b.marked {
						report(f, b.line, "example manifest without an e2e marker: put <!-- e2e: TestName --> right above it, naming the scenario that runs it")
					}
				}
			}
		case strings.HasSuffix(f, ".yaml") || strings.HasSuffix(f, ".yml"):
			data, err := os.ReadFile(filepath.Join(root, f))
			if err != nil {
				return nil, st, err
			}
			found := false
			for i, line := range strings.Split(string(data), "\n") {
				if t := strings.TrimSpace(line); strings.HasPrefix(t, "#") && e2eMarker.MatchString(t) {
					found = true
					d := &document{}
					d.addMarker(i+1, t)
					checkMarker(f, d.markers[0])
				}
			}
			if !found && strings.HasPrefix(f, "deploy/examples/") {
				report(f, 1, "example without an e2e marker: add a comment # e2e: TestName naming the scenario that applies it")
			}
		}
	}
	return problems, st, nil
}

// scheme starts an absolute URL (https:, mailto:, ...).
var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

func isRelative(target string) bool {
	return target != "" && !scheme.MatchString(target) && !strings.HasPrefix(target, "//")
}

// lineAnchor is GitHub's anchor of a line, or of lines, of a file it shows.
var lineAnchor = regexp.MustCompile(`^L(\d+)(?:-L(\d+))?$`)

// broken says what is wrong with a link from file to target, or "".
func (r *repo) broken(file, target string) string {
	if target == "" {
		return "empty target"
	}
	if !isRelative(target) {
		return ""
	}
	p, fragment, _ := strings.Cut(target, "#")
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	p, err := url.PathUnescape(p)
	if err != nil {
		return "not a valid path: " + err.Error()
	}
	dest := file
	switch {
	case p == "":
	case strings.HasPrefix(p, "/"):
		dest = path.Clean(strings.TrimPrefix(p, "/"))
	default:
		dest = path.Join(path.Dir(file), p)
	}
	if dest == ".." || strings.HasPrefix(dest, "../") {
		return "outside the repository"
	}
	isDir := r.dirs[dest] && !r.files[dest]
	switch {
	case r.files[dest], isDir:
	case fileExists(filepath.Join(r.root, dest)):
		return "not in git (ignored): GitHub will not have it"
	default:
		return "no such file or directory"
	}
	if fragment == "" {
		return ""
	}
	if fragment, err = url.PathUnescape(fragment); err != nil {
		return "not a valid anchor: " + err.Error()
	}
	if isDir {
		readme := path.Join(dest, "README.md")
		if !r.files[readme] {
			return "an anchor in a directory without a README.md"
		}
		dest = readme
	}
	if !strings.HasSuffix(dest, ".md") {
		m := lineAnchor.FindStringSubmatch(fragment)
		if m == nil {
			return fmt.Sprintf("anchor #%s in %s, which is not Markdown (only #L<line> anchors are)", fragment, dest)
		}
		lines, err := countLines(filepath.Join(r.root, dest))
		if err != nil {
			return err.Error()
		}
		for _, n := range m[1:] {
			if v, _ := strconv.Atoi(n); n != "" && (v < 1 || v > lines) {
				return fmt.Sprintf("%s has %d lines", dest, lines)
			}
		}
		return ""
	}
	d, err := r.doc(dest)
	if err != nil {
		return err.Error()
	}
	if !d.anchors[fragment] {
		return fmt.Sprintf("no anchor #%s in %s%s", fragment, dest, suggest(fragment, d.anchors))
	}
	return ""
}

// suggest names the anchor closest to the one asked for, if one shares its
// start: a renamed heading is the usual cause.
func suggest(fragment string, anchors map[string]bool) string {
	var best string
	bestLen := 0
	for a := range anchors {
		n := 0
		for n < len(a) && n < len(fragment) && a[n] == fragment[n] {
			n++
		}
		if n > bestLen || n == bestLen && n > 0 && a < best {
			best, bestLen = a, n
		}
	}
	if bestLen < 4 {
		return ""
	}
	return " (did you mean #" + best + "?)"
}

// doc parses a Markdown file of the repository, once.
func (r *repo) doc(file string) (*document, error) {
	if d, ok := r.docs[file]; ok {
		return d, nil
	}
	data, err := os.ReadFile(filepath.Join(r.root, file))
	if err != nil {
		return nil, err
	}
	d := parseMarkdown(string(data))
	r.docs[file] = d
	return d, nil
}

// listFiles lists the repository's files as GitHub will show them: tracked
// ones and new ones git does not ignore. Outside git, every file but those
// of .git, bin/, .cache/, .kwok/ and node_modules/.
func listFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err == nil {
		var files []string
		for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
			// A file deleted but not yet staged is listed, yet gone.
			if f != "" && fileExists(filepath.Join(root, f)) {
				files = append(files, f)
			}
		}
		slices.Sort(files)
		return slices.Compact(files), nil
	}
	var files []string
	err = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if e.IsDir() {
			switch e.Name() {
			case ".git", "bin", ".cache", ".kwok", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	return files, err
}

// testFunc is a scenario of the end-to-end suite.
var testFunc = regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]*)\(\w+ \*testing\.T\)`)

// scenarios returns the Test functions of e2e/ and its sources, in which a
// subtest's name must appear.
func scenarios(root string) (map[string]bool, []byte, error) {
	paths, err := filepath.Glob(filepath.Join(root, "e2e", "*_test.go"))
	if err != nil {
		return nil, nil, err
	}
	if len(paths) == 0 {
		return nil, nil, errors.New("no e2e/*_test.go: run from the repository's root, or pass -root")
	}
	tests := map[string]bool{}
	var all []byte
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, err
		}
		for _, m := range testFunc.FindAllSubmatch(data, -1) {
			tests[string(m[1])] = true
		}
		all = append(all, data...)
	}
	return tests, all, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func countLines(p string) (int, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	n := bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return n, nil
}
