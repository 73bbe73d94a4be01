package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
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
		{[]string{"pull", "a/b"}, func(o *options) { o.queueIfOffline = true }, "upgrade only"},
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
		if _, _, err := parseApp(bad); exitCode(err) != exitUsage {
			t.Errorf("%q: got %v (exit %d), want a usage error", bad, err, exitCode(err))
		}
	}
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{&outcome{exitFailed, "CrashLoopBackOff"}, exitFailed},
		{&outcome{exitTimeout, "timed out"}, exitTimeout},
		{status.Error(codes.NotFound, "no app"), exitUnknownApp},
		{status.Error(codes.Unavailable, "connection refused"), exitUnreachable},
		{status.Error(codes.Unauthenticated, "token"), exitRefused},
		{status.Error(codes.PermissionDenied, "group"), exitRefused},
		{status.Error(codes.FailedPrecondition, "Pod is not-updatable"), exitRefused},
		{status.Error(codes.DeadlineExceeded, "slow"), exitTimeout},
		{context.DeadlineExceeded, exitTimeout},
		{errors.New("other"), exitFailed},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("%v: got exit %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(t.Context(), []string{"upgrade"}, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "takes 1 argument") {
		t.Errorf("got exit %d %q, want 2 and the reason", code, stderr.String())
	}
}

// TestUnreachableAgent runs the whole command against a port nothing serves.
func TestVersion(t *testing.T) {
	var stdout bytes.Buffer
	if code := run(t.Context(), []string{"--version"}, &stdout, io.Discard); code != exitOK || !strings.HasPrefix(stdout.String(), "otactl ") {
		t.Errorf("got exit %d %q, want 0 and the version", code, stdout.String())
	}
}

func TestUnreachableAgent(t *testing.T) {
	var stderr bytes.Buffer
	code := run(t.Context(), []string{"list", "--server", "127.0.0.1:1"}, io.Discard, &stderr)
	if code != exitUnreachable || !strings.Contains(stderr.String(), "agent unreachable") {
		t.Errorf("got exit %d %q, want %d naming the unreachable agent", code, stderr.String(), exitUnreachable)
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
		{"upgraded", "upgrade", []*edgeotav1.App{app("old", available, ""), app("old", upgrading, ""), app("new", upgrading, ""), app("new", upgraded, "")}, true, exitOK},
		{"old pod's failure does not count", "upgrade", []*edgeotav1.App{app("old", failed, "CrashLoopBackOff")}, false, 0},
		{"new pod crash-loops", "upgrade", []*edgeotav1.App{app("old", available, ""), app("new", failed, "CrashLoopBackOff")}, true, exitFailed},
		{"still upgrading", "upgrade", []*edgeotav1.App{app("old", upgrading, ""), app("new", upgrading, "ContainerCreating")}, false, 0},
		{"pulled", "pull", []*edgeotav1.App{app("p", available, ""), app("p", requested, ""), app("p", pulled, "")}, true, exitOK},
		{"pulled already", "pull", []*edgeotav1.App{app("p", pulled, "")}, true, exitOK},
		{"an earlier failed pull does not count", "pull", []*edgeotav1.App{app("p", pullFail, "PullImageFail")}, false, 0},
		{"pull fails", "pull", []*edgeotav1.App{app("p", pullFail, "PullImageFail"), app("p", requested, ""), app("p", pullFail, "PullImageFail")}, true, exitFailed},
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
			if done && tc.wantCode == exitFailed && !strings.Contains(err.Error(), tc.steps[len(tc.steps)-1].GetReason()) {
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
	live := &progress{out: &out, terminal: true, start: time.Now(), what: "upgrade default/demo"}
	live.show(app("old", upgrading, ""))
	live.show(nil)
	live.finish()
	if !strings.Contains(out.String(), "\r\033[K") || strings.Count(out.String(), "UPGRADING") != 2 {
		t.Errorf("got %q, want the line redrawn in place", out.String())
	}
}

func TestPrintTable(t *testing.T) {
	var out bytes.Buffer
	a := app("demo-x", available, "")
	a.CurrentImages = map[string]string{"b": "img:b", "a": "img:a"}
	a.TargetImages = map[string]string{"a": "img:a2"}
	if err := printTable(&out, []*edgeotav1.App{a}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "UPGRADE_AVAILABLE") || !strings.Contains(out.String(), "img:a,img:b") || !strings.Contains(out.String(), "img:a2") {
		t.Errorf("got\n%s\nwant the phase, current and target images", out.String())
	}
}
