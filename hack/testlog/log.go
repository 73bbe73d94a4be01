package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// test is what the log knows of one test, subtests included.
type test struct {
	name    string
	started time.Time
	// output is the test's own output (a subtest's is its own).
	output []string
	// result is pass, fail or skip; "" while it runs.
	result  string
	elapsed time.Duration
}

// topLevel reports whether the test is a top-level one (a scenario), not a
// subtest.
func (t *test) topLevel() bool { return !strings.Contains(t.name, "/") }

// testLog turns the events into the log a person reads.
type testLog struct {
	w     io.Writer
	begin time.Time
	tests map[string]*test
	order []string
	// onSideBySide, if set, is called once, when the tests that run alone
	// are done (sideBySide).
	onSideBySide func()
}

// sideBySide reports, once, that the tests that run alone are done: go test
// resumes the parallel top-level tests only after them.
func (l *testLog) sideBySide() {
	if f := l.onSideBySide; f != nil {
		l.onSideBySide = nil
		f()
	}
}

func newLog(w io.Writer) *testLog {
	return &testLog{w: w, tests: map[string]*test{}}
}

// read logs every event of r until it ends. A line that is not an event (a
// build error, say) is printed as it is.
func (l *testLog) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(l.w, sc.Text())
			continue
		}
		l.add(&e)
	}
	return sc.Err()
}

// add logs one event: a top-level test's start and end, and the output of
// one that fails, skips or is still running at the end; the package's own
// output (ok, FAIL, a timeout's panic) at once.
func (l *testLog) add(e *event) {
	if l.begin.IsZero() && !e.Time.IsZero() {
		l.begin = e.Time
	}
	if e.Test == "" {
		if e.Action == "output" {
			fmt.Fprint(l.w, e.Output)
		}
		return
	}
	t := l.tests[e.Test]
	if t == nil {
		t = &test{name: e.Test, started: e.Time}
		l.tests[e.Test] = t
		l.order = append(l.order, e.Test)
	}
	switch e.Action {
	case "run":
		t.started = e.Time
		if t.topLevel() {
			fmt.Fprintf(l.w, "%s === RUN   %s\n", l.at(e.Time), t.name)
		}
	case "cont":
		if t.topLevel() {
			l.sideBySide()
			fmt.Fprintf(l.w, "%s === CONT  %s\n", l.at(e.Time), t.name)
		}
	case "output":
		t.output = append(t.output, e.Output)
	case "pass", "fail", "skip":
		t.result, t.elapsed = e.Action, time.Duration(e.Elapsed*float64(time.Second))
		if !t.topLevel() {
			return
		}
		switch e.Action {
		case "pass":
			fmt.Fprintf(l.w, "%s --- PASS: %s (%s)\n", l.at(e.Time), t.name, seconds(t.elapsed))
		default:
			fmt.Fprintf(l.w, "%s --- %s: %s (%s), its output:\n", l.at(e.Time), strings.ToUpper(e.Action), t.name, seconds(t.elapsed))
			l.printOutput(t.name)
		}
	}
}

// printOutput prints the output of the test and of its subtests, in the
// order they ran.
func (l *testLog) printOutput(name string) {
	for _, n := range l.order {
		if n == name || strings.HasPrefix(n, name+"/") {
			for _, line := range l.tests[n].output {
				fmt.Fprint(l.w, line)
			}
		}
	}
}

// reasonLine is a line a test logged (t.Skip's reason among them): indented,
// then file:line: and some text.
var reasonLine = regexp.MustCompile(`^\s+\S+\.go:\d+: .*\S`)

// finish prints what the events leave to say at the end: the tests still
// running when the run ended (a timeout's panic) with their output, and the
// counts. It returns what makes the run fail beyond the tests' own results:
// a test skipped without a stated reason.
func (l *testLog) finish() (problems []string) {
	var passed, failed, skipped int
	var running []*test
	for _, name := range l.order {
		t := l.tests[name]
		if t.result == "skip" && !slices.ContainsFunc(t.output, reasonLine.MatchString) {
			problems = append(problems, fmt.Sprintf("%s was skipped without a stated reason: t.Skip must say why", name))
		}
		if !t.topLevel() {
			continue
		}
		switch t.result {
		case "pass":
			passed++
		case "fail":
			failed++
		case "skip":
			skipped++
		default:
			running = append(running, t)
		}
	}
	for _, t := range running {
		fmt.Fprintf(l.w, "testlog: %s was still running when the run ended (started at %s), its output:\n", t.name, l.at(t.started))
		l.printOutput(t.name)
	}
	fmt.Fprintf(l.w, "testlog: %d tests passed, %d failed, %d skipped, %d did not finish\n", passed, failed, skipped, len(running))
	return problems
}

// at is a time as the offset from the run's first event, [mm:ss].
func (l *testLog) at(t time.Time) string {
	d := t.Sub(l.begin).Round(time.Second)
	return fmt.Sprintf("[%02d:%02d]", int(d.Minutes()), int(d.Seconds())%60)
}

// seconds renders a duration as go test does: 12.34s.
func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
