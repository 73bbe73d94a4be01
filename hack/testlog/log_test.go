package main

import (
	"bytes"
	"strings"
	"testing"
)

// events is a `go test -json` stream of two parallel tests, one passing and
// one failing (with a subtest), a test skipped with a reason, one skipped
// without, and one still running at the end, as a -timeout panic leaves it.
const events = `{"Time":"2026-11-28T10:00:00Z","Action":"start","Package":"e2e"}
{"Time":"2026-11-28T10:00:00Z","Action":"run","Package":"e2e","Test":"TestA"}
{"Time":"2026-11-28T10:00:00Z","Action":"output","Package":"e2e","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Time":"2026-11-28T10:00:00Z","Action":"pause","Package":"e2e","Test":"TestA"}
{"Time":"2026-11-28T10:00:01Z","Action":"run","Package":"e2e","Test":"TestB"}
{"Time":"2026-11-28T10:00:01Z","Action":"pause","Package":"e2e","Test":"TestB"}
{"Time":"2026-11-28T10:00:02Z","Action":"cont","Package":"e2e","Test":"TestA"}
{"Time":"2026-11-28T10:00:02Z","Action":"cont","Package":"e2e","Test":"TestB"}
{"Time":"2026-11-28T10:00:03Z","Action":"output","Package":"e2e","Test":"TestB","Output":"    b_test.go:10: cluster up\n"}
{"Time":"2026-11-28T10:00:03Z","Action":"run","Package":"e2e","Test":"TestB/sub"}
{"Time":"2026-11-28T10:00:04Z","Action":"output","Package":"e2e","Test":"TestB/sub","Output":"    b_test.go:20: got 3, want 2\n"}
{"Time":"2026-11-28T10:00:04Z","Action":"fail","Package":"e2e","Test":"TestB/sub","Elapsed":1}
{"Time":"2026-11-28T10:00:05Z","Action":"output","Package":"e2e","Test":"TestA","Output":"    a_test.go:5: fine\n"}
{"Time":"2026-11-28T10:01:32Z","Action":"pass","Package":"e2e","Test":"TestA","Elapsed":90}
{"Time":"2026-11-28T10:01:33Z","Action":"fail","Package":"e2e","Test":"TestB","Elapsed":91.5}
{"Time":"2026-11-28T10:01:34Z","Action":"run","Package":"e2e","Test":"TestSkipped"}
{"Time":"2026-11-28T10:01:34Z","Action":"output","Package":"e2e","Test":"TestSkipped","Output":"    s_test.go:3: needs cgroup v1\n"}
{"Time":"2026-11-28T10:01:34Z","Action":"output","Package":"e2e","Test":"TestSkipped","Output":"--- SKIP: TestSkipped (0.00s)\n"}
{"Time":"2026-11-28T10:01:34Z","Action":"skip","Package":"e2e","Test":"TestSkipped","Elapsed":0}
{"Time":"2026-11-28T10:01:35Z","Action":"run","Package":"e2e","Test":"TestSilentSkip"}
{"Time":"2026-11-28T10:01:35Z","Action":"output","Package":"e2e","Test":"TestSilentSkip","Output":"--- SKIP: TestSilentSkip (0.00s)\n"}
{"Time":"2026-11-28T10:01:35Z","Action":"skip","Package":"e2e","Test":"TestSilentSkip","Elapsed":0}
{"Time":"2026-11-28T10:01:36Z","Action":"run","Package":"e2e","Test":"TestHangs"}
{"Time":"2026-11-28T10:01:36Z","Action":"output","Package":"e2e","Test":"TestHangs","Output":"    h_test.go:8: waiting for the rollout\n"}
{"Time":"2026-11-28T10:03:36Z","Action":"output","Package":"e2e","Output":"panic: test timed out after 3m0s\n"}
`

func TestLogShowsStartsEndsAndFailuresWhole(t *testing.T) {
	var out bytes.Buffer
	l := newLog(&out)
	var sideBySide []string
	l.onSideBySide = func() { sideBySide = append(sideBySide, out.String()) }
	if err := l.read(strings.NewReader(events)); err != nil {
		t.Fatal(err)
	}
	problems := l.finish()
	// Called once, as the first parallel test resumes.
	if len(sideBySide) != 1 || !strings.HasSuffix(sideBySide[0], "[00:01] === RUN   TestB\n") {
		t.Errorf("side by side: got calls after %q, want one, as TestA resumes", sideBySide)
	}
	got := out.String()
	for _, want := range []string{
		"[00:00] === RUN   TestA\n",
		"[00:02] === CONT  TestB\n",
		"[01:32] --- PASS: TestA (90.00s)\n",
		// A failure prints the test's output whole, its subtests' included,
		// after the line that says it failed.
		"[01:33] --- FAIL: TestB (91.50s), its output:\n    b_test.go:10: cluster up\n    b_test.go:20: got 3, want 2\n",
		"[01:34] --- SKIP: TestSkipped (0.00s), its output:\n    s_test.go:3: needs cgroup v1\n",
		"panic: test timed out after 3m0s\n",
		"testlog: TestHangs was still running when the run ended (started at [01:36]), its output:\n    h_test.go:8: waiting for the rollout\n",
		"testlog: 1 tests passed, 1 failed, 2 skipped, 1 did not finish\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the log lacks %q; got:\n%s", want, got)
		}
	}
	// A passing test's output stays out of the log.
	if strings.Contains(got, "a_test.go:5: fine") {
		t.Errorf("the log shows a passing test's output:\n%s", got)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "TestSilentSkip was skipped without a stated reason") {
		t.Errorf("problems: got %q, want one naming TestSilentSkip's skip without a reason", problems)
	}
}

func TestSlowestRanksTopLevelTests(t *testing.T) {
	tests, err := readReport(strings.NewReader(events))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printSlowest(&out, tests, 3)
	want := `The 3 slowest tests:
   1.  120.00s  running TestHangs
   2.   91.50s  fail    TestB
   3.   90.00s  pass    TestA
`
	if got := out.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
