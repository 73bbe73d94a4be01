package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/internal/exitcode"
)

func TestParseArgsTakesFlagsAnywhere(t *testing.T) {
	var o options
	fs := newFlags(&o, io.Discard)
	got, err := parseArgs(fs, []string{"--server", "10.0.0.1:1", "upgrade", "default/demo", "--wait", "--timeout", "2m"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "upgrade default/demo" || !o.wait || o.timeout != 2*time.Minute || o.server != "10.0.0.1:1" {
		t.Errorf("got %v wait=%v timeout=%s server=%s, want upgrade default/demo, --wait, 2m, 10.0.0.1:1", got, o.wait, o.timeout, o.server)
	}
}

func TestValidate(t *testing.T) {
	base := options{timeout: time.Minute}
	for _, tc := range []struct {
		args    []string
		change  func(*options)
		wantErr string
	}{
		{[]string{"list"}, nil, ""},
		{[]string{"upgrade", "a/b"}, func(o *options) { o.queueIfOffline = true }, ""},
		{nil, nil, "no command"},
		{[]string{"remove"}, nil, "unknown command"},
		{[]string{"pull"}, nil, "takes 1 argument"},
		{[]string{"list", "x"}, nil, "takes 0 argument"},
		{[]string{"list"}, func(o *options) { o.output = "yaml" }, "-o"},
		{[]string{"pull", "a/b"}, func(o *options) { o.timeout = 0 }, "--timeout"},
		{[]string{"list"}, func(o *options) { o.token, o.tokenFile = "t", "f" }, "give one"},
		{[]string{"list"}, func(o *options) { o.certFile = "c" }, "go together"},
		{[]string{"pull", "a/b"}, func(o *options) { o.queueIfOffline = true }, "upgrade, hold and release only"},
		{[]string{"hold"}, func(o *options) { o.holdFor = "2h" }, ""},
		{[]string{"hold", "a/b"}, func(o *options) { o.holdUntil, o.reason, o.queueIfOffline = "2026-11-25T18:00:00Z", "driving", true }, ""},
		{[]string{"hold"}, func(o *options) { o.all, o.holdUntil = true, "2026-11-25T19:00:00+01:00" }, ""},
		{[]string{"hold"}, nil, "give --for (e.g. 2h) or --until"},
		{[]string{"hold"}, func(o *options) { o.holdFor, o.holdUntil = "2h", "2026-11-25T18:00:00Z" }, "not both"},
		{[]string{"hold"}, func(o *options) { o.holdFor = "2 hours" }, "--for: duration"},
		{[]string{"hold"}, func(o *options) { o.holdFor = "31d" }, "the longest hold"},
		{[]string{"hold"}, func(o *options) { o.holdFor = "0s" }, "more than zero"},
		{[]string{"hold"}, func(o *options) { o.holdUntil = "tomorrow" }, "want RFC 3339"},
		{[]string{"hold", "a/b"}, func(o *options) { o.holdFor, o.all = "2h", true }, "an app or --all, not both"},
		{[]string{"hold", "a/b", "c/d"}, func(o *options) { o.holdFor = "2h" }, "takes at most 1 argument"},
		{[]string{"release"}, func(o *options) { o.queueIfOffline = true }, ""},
		{[]string{"release", "a/b"}, nil, ""},
		{[]string{"release"}, func(o *options) { o.reason = "x" }, "apply to hold only"},
		{[]string{"upgrade", "a/b"}, func(o *options) { o.holdFor = "2h" }, "apply to hold only"},
		{[]string{"upgrade", "a/b"}, func(o *options) { o.all = true }, "--all applies to hold and release only"},
		{[]string{"list"}, func(o *options) { o.token, o.server = "t", "10.0.0.5:10267" }, "refusing to send the bearer token in the clear to 10.0.0.5:10267"},
		{[]string{"list"}, func(o *options) { o.tokenFile, o.server = "f", "dns:///vehicle.example:10267" }, "refusing to send the bearer token in the clear"},
		{[]string{"list"}, func(o *options) { o.token, o.server, o.insecure = "t", "10.0.0.5:10267", true }, ""},
		{[]string{"list"}, func(o *options) { o.token, o.server, o.caFile = "t", "10.0.0.5:10267", "ca.crt" }, ""},
		{[]string{"list"}, func(o *options) { o.token, o.server = "t", "127.0.0.1:10267" }, ""},
		{[]string{"list"}, func(o *options) { o.token, o.server = "t", "[::1]:10267" }, ""},
		{[]string{"list"}, func(o *options) { o.token, o.server = "t", "localhost:10267" }, ""},
		{[]string{"list"}, func(o *options) { o.token, o.server = "t", "unix:/run/edgeota.sock" }, ""},
		{[]string{"list"}, func(o *options) { o.server = "10.0.0.5:10267" }, ""},
	} {
		o := base
		if tc.change != nil {
			tc.change(&o)
		}
		err := o.validate(tc.args)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%v: got %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}

func TestParseApp(t *testing.T) {
	if ns, ds, err := parseApp("kube-system/agent"); err != nil || ns != "kube-system" || ds != "agent" {
		t.Errorf("got %q %q %v, want kube-system agent", ns, ds, err)
	}
	for _, bad := range []string{"demo", "/demo", "ns/", "a/b/c"} {
		if _, _, err := parseApp(bad); exitCode(err) != exitcode.Usage {
			t.Errorf("%q: got %v (exit %d), want a usage error", bad, err, exitCode(err))
		}
	}
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, exitcode.OK},
		{&outcome{exitcode.Failed, "CrashLoopBackOff"}, exitcode.Failed},
		{&outcome{exitcode.Timeout, "timed out"}, exitcode.Timeout},
		{status.Error(codes.NotFound, "no app"), exitcode.NotFound},
		{status.Error(codes.Unavailable, "connection refused"), exitcode.Unreachable},
		{status.Error(codes.Unauthenticated, "token"), exitcode.Refused},
		{status.Error(codes.PermissionDenied, "group"), exitcode.Refused},
		{status.Error(codes.FailedPrecondition, "Pod is not-updatable"), exitcode.Refused},
		{status.Error(codes.DeadlineExceeded, "slow"), exitcode.Timeout},
		{context.DeadlineExceeded, exitcode.Timeout},
		{errors.New("other"), exitcode.Failed},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("%v: got exit %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(t.Context(), []string{"upgrade"}, io.Discard, &stderr); code != exitcode.Usage || !strings.Contains(stderr.String(), "takes 1 argument") {
		t.Errorf("got exit %d %q, want 2 and the reason", code, stderr.String())
	}
}

// TestUnreachableAgent runs the whole command against a port nothing serves.
func TestVersion(t *testing.T) {
	var stdout bytes.Buffer
	if code := run(t.Context(), []string{"--version"}, &stdout, io.Discard); code != exitcode.OK || !strings.HasPrefix(stdout.String(), "otactl ") {
		t.Errorf("got exit %d %q, want 0 and the version", code, stdout.String())
	}
}

func TestUnreachableAgent(t *testing.T) {
	var stderr bytes.Buffer
	code := run(t.Context(), []string{"list", "--server", "127.0.0.1:1"}, io.Discard, &stderr)
	if code != exitcode.Unreachable || !strings.Contains(stderr.String(), "agent unreachable") {
		t.Errorf("got exit %d %q, want %d naming the unreachable agent", code, stderr.String(), exitcode.Unreachable)
	}
}

func app(pod string, phase edgeotav1.UpgradePhase, reason string) *edgeotav1.App {
	return &edgeotav1.App{Namespace: "default", DaemonSet: "demo", Pod: pod, Phase: phase, Reason: reason}
}

const (
	available = edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADE_AVAILABLE
	upgrading = edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADING
	upgraded  = edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADED
	failed    = edgeotav1.UpgradePhase_UPGRADE_PHASE_FAILED
	requested = edgeotav1.UpgradePhase_UPGRADE_PHASE_PULL_REQUESTED
	pulled    = edgeotav1.UpgradePhase_UPGRADE_PHASE_PULLED
	pullFail  = edgeotav1.UpgradePhase_UPGRADE_PHASE_PULL_FAILED
)

// TestWaiter follows sequences of the app's states to their verdict.
func TestWaiter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		verb     string
		steps    []*edgeotav1.App
		wantDone bool
		wantCode int
	}{
		{"upgraded", "upgrade", []*edgeotav1.App{app("old", available, ""), app("old", upgrading, ""), app("new", upgrading, ""), app("new", upgraded, "")}, true, exitcode.OK},
		{"old pod's failure does not count", "upgrade", []*edgeotav1.App{app("old", failed, "CrashLoopBackOff")}, false, 0},
		{"new pod crash-loops", "upgrade", []*edgeotav1.App{app("old", available, ""), app("new", failed, "CrashLoopBackOff")}, true, exitcode.Failed},
		{"still upgrading", "upgrade", []*edgeotav1.App{app("old", upgrading, ""), app("new", upgrading, "ContainerCreating")}, false, 0},
		{"pulled", "pull", []*edgeotav1.App{app("p", available, ""), app("p", requested, ""), app("p", pulled, "")}, true, exitcode.OK},
		{"pulled already", "pull", []*edgeotav1.App{app("p", pulled, "")}, true, exitcode.OK},
		{"an earlier failed pull does not count", "pull", []*edgeotav1.App{app("p", pullFail, "PullImageFail")}, false, 0},
		{"pull fails", "pull", []*edgeotav1.App{app("p", pullFail, "PullImageFail"), app("p", requested, ""), app("p", pullFail, "PullImageFail")}, true, exitcode.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWaiter(tc.verb, tc.steps[0], false)
			var done bool
			var err error
			for _, s := range tc.steps {
				if done, err = w.observe(s); done {
					break
				}
			}
			if done != tc.wantDone || done && exitCode(err) != tc.wantCode {
				t.Errorf("got done=%v err=%v (exit %d), want done=%v exit %d", done, err, exitCode(err), tc.wantDone, tc.wantCode)
			}
			if done && tc.wantCode == exitcode.Failed && !strings.Contains(err.Error(), tc.steps[len(tc.steps)-1].GetReason()) {
				t.Errorf("got %q, want the reason named", err)
			}
		})
	}
}

func TestProgressWithoutATerminalIsPlainLines(t *testing.T) {
	var out bytes.Buffer
	p := &progress{out: &out, start: time.Now(), what: "upgrade default/demo"}
	p.show(app("old", upgrading, ""))
	p.show(nil)
	p.show(app("new", upgrading, ""))
	p.show(app("new", upgraded, ""))
	p.finish()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "upgrade default/demo: UPGRADING") || !strings.HasPrefix(lines[1], "upgrade default/demo: UPGRADED") {
		t.Errorf("got %q, want one line per phase", out.String())
	}
	if strings.ContainsAny(out.String(), "\r\033") {
		t.Errorf("got escape codes in %q, want none off a terminal", out.String())
	}

	out.Reset()
	live := &progress{out: &out, cols: func() int { return 80 }, start: time.Now(), what: "upgrade default/demo"}
	live.show(app("old", upgrading, ""))
	live.show(nil)
	live.finish()
	if !strings.Contains(out.String(), "\r\033[K") || strings.Count(out.String(), "UPGRADING") != 2 {
		t.Errorf("got %q, want the line redrawn in place", out.String())
	}

	// On a narrow terminal the line is cut, never wrapped: "\r" would
	// only return to the start of its last row.
	out.Reset()
	narrow := &progress{out: &out, cols: func() int { return 20 }, start: time.Now(), what: "upgrade default/demo"}
	narrow.show(app("old", upgrading, ""))
	if want := "\r\033[Kupgrade default/..."; out.String() != want {
		t.Errorf("got %q on a terminal 20 wide, want %q", out.String(), want)
	}
}

func TestPrintTable(t *testing.T) {
	var out bytes.Buffer
	a := app("demo-x", available, "")
	a.CurrentImages = map[string]string{"b": "img:b", "a": "img:a"}
	a.TargetImages = map[string]string{"a": "img:a2"}
	if err := printTable(&out, []*edgeotav1.App{a}, time.UTC); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "UPGRADE_AVAILABLE") || !strings.Contains(out.String(), "img:a,img:b") || !strings.Contains(out.String(), "img:a2") {
		t.Errorf("got\n%s\nwant the phase, current and target images", out.String())
	}
	if rows := strings.Split(strings.TrimSpace(out.String()), "\n"); len(rows) != 2 || strings.Join(strings.Fields(rows[1])[7:], " ") != "- - -" {
		t.Errorf("got\n%s\nwant no hold, limit or deadline shown as dashes", out.String())
	}
}

// heldApp is an app held until 18:00 UTC for a reason, whose hold ends at
// its limit, with an OTA deadline.
func heldApp(reason string) *edgeotav1.App {
	a := app("demo-x", available, "")
	a.Hold = &edgeotav1.OwnerHold{Until: timestamppb.New(time.Date(2026, 11, 25, 18, 0, 0, 0, time.UTC)), Reason: reason, By: "uli"}
	a.HoldLimit = timestamppb.New(time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC))
	a.UpgradeDeadline = timestamppb.New(time.Date(2026, 12, 2, 1, 30, 0, 0, time.UTC))
	return a
}

func TestPrintTableShowsHoldLimitAndDeadline(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printTable(&out, []*edgeotav1.App{heldApp("driving"), heldApp(strings.Repeat("long ", 20))}, berlin); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for _, want := range []string{"HELD UNTIL", "HOLD LIMIT", "DEADLINE"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("header %q: want %s", lines[0], want)
		}
	}
	for _, want := range []string{"2026-11-25 19:00 CET (driving)", "2026-11-26 07:00 CET", "2026-12-02 02:30 CET"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row %q: want %q, in the user's zone", lines[1], want)
		}
	}
	if !strings.Contains(lines[2], "(long long long long long long l…)") {
		t.Errorf("row %q: want the long reason cut at 32 characters", lines[2])
	}
}

func TestAppLineShowsHoldLimitAndDeadline(t *testing.T) {
	got := appLine(heldApp("driving"), time.UTC)
	want := `default/demo UPGRADE_AVAILABLE pod=demo-x held-until=2026-11-25T18:00:00Z hold-reason="driving" hold-limit=2026-11-26T06:00:00Z deadline=2026-12-02T01:30:00Z`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := appLine(app("p", available, ""), time.UTC); strings.Contains(got, "hold") || strings.Contains(got, "deadline") {
		t.Errorf("got %s, want nothing about holds without one", got)
	}
}

// fakeAgent serves the OTA service on loopback with one app (default/demo,
// pod demo-x), records the holds and releases it gets, and answers them
// with err when set.
type fakeAgent struct {
	edgeotav1.UnimplementedOTAServiceServer
	err      error
	holds    chan *edgeotav1.HoldRequest
	releases chan *edgeotav1.ReleaseHoldRequest
	addr     string
}

func startFakeAgent(t *testing.T, err error) *fakeAgent {
	t.Helper()
	f := &fakeAgent{err: err, holds: make(chan *edgeotav1.HoldRequest, 1), releases: make(chan *edgeotav1.ReleaseHoldRequest, 1)}
	l, lerr := net.Listen("tcp", "127.0.0.1:0")
	if lerr != nil {
		t.Fatal(lerr)
	}
	s := grpc.NewServer()
	edgeotav1.RegisterOTAServiceServer(s, f)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	f.addr = l.Addr().String()
	return f
}

func (f *fakeAgent) ListUpgrades(context.Context, *edgeotav1.ListUpgradesRequest) (*edgeotav1.ListUpgradesResponse, error) {
	return &edgeotav1.ListUpgradesResponse{Apps: []*edgeotav1.App{app("demo-x", available, "")}}, nil
}

func (f *fakeAgent) Hold(_ context.Context, req *edgeotav1.HoldRequest) (*edgeotav1.HoldResponse, error) {
	f.holds <- req
	if f.err != nil {
		return nil, f.err
	}
	return &edgeotav1.HoldResponse{Message: "Held it", Pods: []string{"default/demo-x"}}, nil
}

func (f *fakeAgent) ReleaseHold(_ context.Context, req *edgeotav1.ReleaseHoldRequest) (*edgeotav1.ReleaseHoldResponse, error) {
	f.releases <- req
	if f.err != nil {
		return nil, f.err
	}
	return &edgeotav1.ReleaseHoldResponse{Message: "Released it", Queued: req.GetQueueIfOffline()}, nil
}

// TestHoldAndRelease runs otactl's hold and release against an agent: what
// it asks for (the app's current pod, or every app), what it prints, and
// its exit codes.
func TestHoldAndRelease(t *testing.T) {
	f := startFakeAgent(t, nil)
	otactl := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), append([]string{"--server", f.addr}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	// The manual's spelling (docs/operator/holds-and-deadlines.md): every app
	// of the node.
	if code, out, errOut := otactl("hold", "--for", "2h", "--reason", "driving"); code != exitcode.OK || out != "Held it\n" {
		t.Errorf("hold --for 2h --reason driving: got exit %d %q %q, want 0 and the agent's message", code, out, errOut)
	}
	if req := <-f.holds; req.GetNamespace() != "" || req.GetName() != "" || req.GetDuration() != "2h" || req.GetReason() != "driving" || req.GetUntil() != nil {
		t.Errorf("got %v, want every app held for 2h, driving", req)
	}
	if code, out, _ := otactl("hold", "default/demo", "--until", "2026-11-25T19:00:00+01:00", "--queue-if-offline", "-o", "json"); code != exitcode.OK ||
		!strings.Contains(out, `"message":"Held it"`) || !strings.Contains(out, `"pods":["default/demo-x"]`) {
		t.Errorf("hold of an app: got exit %d %q, want 0 and the answer in JSON", code, out)
	}
	if req := <-f.holds; req.GetNamespace() != "default" || req.GetName() != "demo-x" || !req.GetQueueIfOffline() ||
		!req.GetUntil().AsTime().Equal(time.Date(2026, 11, 25, 18, 0, 0, 0, time.UTC)) || req.GetDuration() != "" {
		t.Errorf("got %v, want the app's pod demo-x held until 18:00 UTC, queued if offline", req)
	}
	if code, out, _ := otactl("release", "--all", "--queue-if-offline"); code != exitcode.OK || out != "Released it\n" {
		t.Errorf("release --all: got exit %d %q, want 0", code, out)
	}
	if req := <-f.releases; req.GetNamespace() != "" || req.GetName() != "" || !req.GetQueueIfOffline() {
		t.Errorf("got %v, want every app released, queued if offline", req)
	}
	if code, _, errOut := otactl("release", "default/nope"); code != exitcode.NotFound || !strings.Contains(errOut, "no app default/nope") {
		t.Errorf("release of an unknown app: got exit %d %q, want 6", code, errOut)
	}
	if code, _, errOut := otactl("hold", "--for", "2 hours"); code != exitcode.Usage || !strings.Contains(errOut, "--for") {
		t.Errorf("hold --for '2 hours': got exit %d %q, want 2", code, errOut)
	}

	for _, tc := range []struct {
		err  error
		want int
	}{
		{status.Error(codes.InvalidArgument, "until 2020-01-01T00:00:00Z has passed"), exitcode.Refused},
		{status.Error(codes.FailedPrecondition, "Pod cannot be held: pod default/demo-x is being deleted"), exitcode.Refused},
		{status.Error(codes.PermissionDenied, "needs group edgeota:upgraders"), exitcode.Refused},
		{status.Error(codes.Unavailable, "the API server is unreachable"), exitcode.Unreachable},
		{status.Error(codes.NotFound, "no app on this node"), exitcode.NotFound},
	} {
		refusing := startFakeAgent(t, tc.err)
		var stderr bytes.Buffer
		code := run(t.Context(), []string{"--server", refusing.addr, "hold", "default/demo", "--for", "1h"}, io.Discard, &stderr)
		<-refusing.holds
		if code != tc.want || !strings.Contains(stderr.String(), status.Convert(tc.err).Message()) {
			t.Errorf("%v: got exit %d %q, want %d with the agent's message", tc.err, code, stderr.String(), tc.want)
		}
	}
}
