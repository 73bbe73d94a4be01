package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/internal/appreason"
	"github.com/edgeota/edgeota/internal/exitcode"
	"github.com/edgeota/edgeota/internal/terminal"
)

// cli runs one command against the agent.
type cli struct {
	client edgeotav1.OTAServiceClient
	out    io.Writer
	opts   options
	// tty is out when it is a terminal where progress is redrawn in place
	// (terminal.Of); nil anywhere else (a pipe, a file, CI, TERM=dumb),
	// where it is printed as plain lines.
	tty *os.File
	// zone is where times are shown: the user's (TZ).
	zone *time.Location
}

// phaseName is a phase without its enum prefix, e.g. UPGRADE_AVAILABLE.
func phaseName(p edgeotav1.UpgradePhase) string {
	return strings.TrimPrefix(p.String(), "UPGRADE_PHASE_")
}

// jsonOutput is the agent's REST JSON: camelCase names, enums by full name.
var jsonOutput = protojson.MarshalOptions{}

func (c *cli) list(ctx context.Context) error {
	resp, err := c.client.ListUpgrades(ctx, &edgeotav1.ListUpgradesRequest{})
	if err != nil {
		return err
	}
	if c.opts.output == "json" {
		return c.printJSON(resp)
	}
	return printTable(c.out, resp.GetApps(), c.zone)
}

// printTable writes apps as a table, one row per app, times in zone: the
// owner's hold (until when, why), the limit that ends a hold, and the OTA
// upgrade deadline.
func printTable(w io.Writer, apps []*edgeotav1.App, zone *time.Location) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tDAEMONSET\tPOD\tPHASE\tCURRENT\tTARGET\tREASON\tHELD UNTIL\tHOLD LIMIT\tDEADLINE")
	for _, a := range apps {
		held := "-"
		if h := a.GetHold(); h != nil {
			held = tableTime(h.GetUntil(), zone)
			if r := h.GetReason(); r != "" {
				held += " (" + shorten(r, maxTableReason) + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.GetNamespace(), a.GetDaemonSet(), orDash(a.GetPod()),
			phaseName(a.GetPhase()), orDash(images(a.GetCurrentImages())), orDash(images(a.GetTargetImages())), orDash(a.GetReason()),
			held, tableTime(a.GetHoldLimit(), zone), tableTime(a.GetUpgradeDeadline(), zone))
	}
	return tw.Flush()
}

// maxTableReason bounds a hold's reason in the table (-o json has it all).
const maxTableReason = 32

// tableTime is a time as a person reads it, in zone, to the minute; "-"
// for none.
func tableTime(t *timestamppb.Timestamp, zone *time.Location) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().In(zone).Format("2006-01-02 15:04 MST")
}

// lineTime is a time in a line of key=value pairs: RFC 3339 in zone.
func lineTime(t *timestamppb.Timestamp, zone *time.Location) string {
	return t.AsTime().In(zone).Format(time.RFC3339)
}

// shorten cuts s to at most n characters, marking the cut.
func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// images lists an app's images, sorted by container name.
func images(m map[string]string) string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]string, 0, len(names))
	for _, name := range names {
		out = append(out, m[name])
	}
	return strings.Join(out, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (c *cli) printJSON(m proto.Message) error {
	b, err := jsonOutput.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.out, "%s\n", b)
	return err
}

func (c *cli) watch(ctx context.Context) error {
	stream, err := c.client.WatchUpgrades(ctx, &edgeotav1.WatchUpgradesRequest{})
	if err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: a normal end of a watch
			}
			return err
		}
		if c.opts.output == "json" {
			if err := c.printJSON(m); err != nil {
				return err
			}
			continue
		}
		at := time.Now().Format(time.TimeOnly)
		switch m.GetType() {
		case edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_SNAPSHOT:
			if err := printTable(c.out, m.GetApps(), c.zone); err != nil {
				return err
			}
		case edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_HEARTBEAT:
		case edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_DELETE:
			fmt.Fprintf(c.out, "%s %s/%s gone\n", at, m.GetApp().GetNamespace(), m.GetApp().GetDaemonSet())
		default:
			fmt.Fprintf(c.out, "%s %s\n", at, appLine(m.GetApp(), c.zone))
		}
	}
}

// appLine is one line about an app: phase, pod, reason, and the hold, its
// limit and the upgrade deadline when there are any, times in zone.
func appLine(a *edgeotav1.App, zone *time.Location) string {
	line := fmt.Sprintf("%s/%s %s pod=%s", a.GetNamespace(), a.GetDaemonSet(), phaseName(a.GetPhase()), orDash(a.GetPod()))
	if img := images(a.GetTargetImages()); img != "" {
		line += " target=" + img
	}
	if a.GetReason() != "" {
		line += " reason=" + a.GetReason()
	}
	if h := a.GetHold(); h != nil {
		line += " held-until=" + lineTime(h.GetUntil(), zone)
		if h.GetReason() != "" {
			line += " hold-reason=" + strconv.Quote(h.GetReason())
		}
	}
	if a.GetHoldLimit() != nil {
		line += " hold-limit=" + lineTime(a.GetHoldLimit(), zone)
	}
	if a.GetUpgradeDeadline() != nil {
		line += " deadline=" + lineTime(a.GetUpgradeDeadline(), zone)
	}
	return line
}

// hold holds or releases an app (namespace and daemonSet; both empty: every
// app of the node). The app's current pod is found in ListUpgrades, which
// the agent answers from its cache, so that a hold can be queued while the
// agent cannot reach the API server.
func (c *cli) hold(ctx context.Context, verb, namespace, daemonSet string) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.timeout)
	defer cancel()
	var pod string
	if daemonSet != "" {
		list, err := c.client.ListUpgrades(ctx, &edgeotav1.ListUpgradesRequest{})
		if err != nil {
			return err
		}
		app := findApp(list.GetApps(), namespace, daemonSet)
		if app == nil {
			return status.Errorf(codes.NotFound, "no app %s/%s on this node (otactl list shows them)", namespace, daemonSet)
		}
		if pod = app.GetPod(); pod == "" {
			return status.Errorf(codes.FailedPrecondition, "app %s/%s has no pod right now (%s); try again", namespace, daemonSet, phaseName(app.GetPhase()))
		}
	}
	var resp proto.Message
	var message string
	if verb == "hold" {
		req := &edgeotav1.HoldRequest{Namespace: namespace, Name: pod, Duration: c.opts.holdFor, Reason: c.opts.reason, QueueIfOffline: c.opts.queueIfOffline}
		if c.opts.holdUntil != "" {
			until, err := c.opts.until()
			if err != nil {
				return err
			}
			req.Until = timestamppb.New(until)
		}
		r, err := c.client.Hold(ctx, req)
		if err != nil {
			return err
		}
		resp, message = r, r.GetMessage()
	} else {
		r, err := c.client.ReleaseHold(ctx, &edgeotav1.ReleaseHoldRequest{Namespace: namespace, Name: pod, QueueIfOffline: c.opts.queueIfOffline})
		if err != nil {
			return err
		}
		resp, message = r, r.GetMessage()
	}
	if c.opts.output == "json" {
		return c.printJSON(resp)
	}
	_, err := fmt.Fprintln(c.out, message)
	return err
}

// findApp is the app of that namespace and DaemonSet, nil if none.
func findApp(apps []*edgeotav1.App, namespace, daemonSet string) *edgeotav1.App {
	for _, a := range apps {
		if a.GetNamespace() == namespace && a.GetDaemonSet() == daemonSet {
			return a
		}
	}
	return nil
}

// act pulls or upgrades an app: it finds the app's current pod, watches the
// app from before the request (so no change is missed), asks, and with
// --wait follows the app until the goal or a failure.
func (c *cli) act(ctx context.Context, verb, namespace, daemonSet string) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.timeout)
	defer cancel()
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	stream, err := c.client.WatchUpgrades(wctx, &edgeotav1.WatchUpgradesRequest{})
	if err != nil {
		return err
	}
	snap, err := stream.Recv()
	if err != nil {
		return err
	}
	app := findApp(snap.GetApps(), namespace, daemonSet)
	if app == nil {
		return status.Errorf(codes.NotFound, "no app %s/%s on this node (otactl list shows them)", namespace, daemonSet)
	}
	if app.GetPod() == "" {
		return status.Errorf(codes.FailedPrecondition, "app %s/%s has no pod right now (%s); try again", namespace, daemonSet, phaseName(app.GetPhase()))
	}

	var message string
	queued := false
	switch verb {
	case "pull":
		resp, err := c.client.ImagePull(ctx, &edgeotav1.ImagePullRequest{Namespace: namespace, Name: app.GetPod()})
		if err != nil {
			return err
		}
		message, queued = resp.GetMessage(), resp.GetQueued()
	default:
		resp, err := c.client.Upgrade(ctx, &edgeotav1.UpgradeRequest{Namespace: namespace, Name: app.GetPod(), QueueIfOffline: c.opts.queueIfOffline})
		if err != nil {
			return err
		}
		message, queued = resp.GetMessage(), resp.GetQueued()
	}
	fmt.Fprintln(c.out, message)
	if !c.opts.wait {
		return nil
	}
	w := newWaiter(verb, app, queued)
	p := &progress{out: c.out, start: time.Now(), what: fmt.Sprintf("%s %s/%s", verb, namespace, daemonSet)}
	if c.tty != nil {
		p.cols = func() int {
			cols, _ := terminal.Size(c.tty)
			return cols
		}
	}
	defer p.finish()
	p.show(app)
	if done, err := w.observe(app); done {
		return err
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	events := make(chan *edgeotav1.WatchUpgradesResponse)
	errs := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				errs <- err
				return
			}
			select {
			case events <- m:
			case <-wctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-tick.C:
			p.show(nil)
		case err := <-errs:
			if ctx.Err() != nil {
				return &outcome{exitcode.Timeout, fmt.Sprintf("timed out after %s waiting for %s/%s: last %s", c.opts.timeout, namespace, daemonSet, phaseName(w.last.GetPhase()))}
			}
			return err
		case <-ctx.Done():
			return &outcome{exitcode.Timeout, fmt.Sprintf("timed out after %s waiting for %s/%s: last %s", c.opts.timeout, namespace, daemonSet, phaseName(w.last.GetPhase()))}
		case m := <-events:
			a := m.GetApp()
			if m.GetType() != edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_UPSERT || a.GetNamespace() != namespace || a.GetDaemonSet() != daemonSet {
				continue
			}
			p.show(a)
			if done, err := w.observe(a); done {
				return err
			}
		}
	}
}

// waiter decides when a followed pull or upgrade is over.
//
// Invariant: a phase counts only once it can be the request's own doing. A
// pull is done at PULLED (a pull already done counts: ImagePull is
// idempotent) and failed at PULL_FAILED seen after the request was taken up
// (PULL_REQUESTED or QUEUED seen). An upgrade is done at UPGRADED, and failed
// at FAILED, only once the app's pod was replaced or seen UPGRADING: until
// then what the agent shows is the old pod's state. An upgrade in place
// keeps the pod: it has started once seen UPGRADING (the request, then the
// patch) or at another revision (the patch, when the view caught none of
// its UPGRADING), and its refusal (FAILED, reason UpgradeRequestRefused) is
// the request's own doing whenever it is seen.
type waiter struct {
	verb        string
	oldPod      string
	oldRevision string
	started     bool
	last        *edgeotav1.App
}

func newWaiter(verb string, app *edgeotav1.App, queued bool) *waiter {
	return &waiter{verb: verb, oldPod: app.GetPod(), oldRevision: app.GetCurrentRevision(), started: queued && verb == "pull"}
}

// observe takes the app's latest state and reports whether the wait is over,
// with nil for success or the failure.
func (w *waiter) observe(a *edgeotav1.App) (bool, error) {
	w.last = a
	phase := a.GetPhase()
	if w.verb == "pull" {
		switch phase {
		case edgeotav1.UpgradePhase_UPGRADE_PHASE_PULL_REQUESTED, edgeotav1.UpgradePhase_UPGRADE_PHASE_QUEUED:
			w.started = true
		case edgeotav1.UpgradePhase_UPGRADE_PHASE_PULLED:
			return true, nil
		case edgeotav1.UpgradePhase_UPGRADE_PHASE_PULL_FAILED:
			if w.started {
				return true, failure("pull", a)
			}
		}
		return false, nil
	}
	if phase == edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADING || a.GetPod() != w.oldPod || a.GetCurrentRevision() != w.oldRevision ||
		a.GetReason() == appreason.UpgradeRequestRefused {
		w.started = true
	}
	if !w.started {
		return false, nil
	}
	switch phase {
	case edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADED:
		return true, nil
	case edgeotav1.UpgradePhase_UPGRADE_PHASE_FAILED:
		return true, failure("upgrade", a)
	}
	return false, nil
}

// failure is a failed pull or upgrade, with the agent's reason and message.
func failure(what string, a *edgeotav1.App) error {
	msg := fmt.Sprintf("%s of %s/%s failed: %s", what, a.GetNamespace(), a.GetDaemonSet(), orDash(a.GetReason()))
	if a.GetMessage() != "" {
		msg += ": " + a.GetMessage()
	}
	return &outcome{exitcode.Failed, msg}
}

// progress shows where a followed app stands: redrawn in place on a
// terminal, once per change of phase elsewhere (plain lines, no escape codes).
type progress struct {
	out io.Writer
	// cols is the terminal's width; nil off a terminal.
	cols    func() int
	start   time.Time
	what    string
	last    *edgeotav1.App
	printed string
	drawn   bool
}

// show displays app (nil: the last one again, with the elapsed time).
func (p *progress) show(app *edgeotav1.App) {
	if app != nil {
		p.last = app
	}
	if p.last == nil {
		return
	}
	line := fmt.Sprintf("%s: %s", p.what, phaseName(p.last.GetPhase()))
	if r := p.last.GetReason(); r != "" {
		line += " (" + r + ")"
	}
	if p.cols == nil {
		if line != p.printed {
			fmt.Fprintf(p.out, "%s after %s\n", line, time.Since(p.start).Round(time.Second))
			p.printed = line
		}
		return
	}
	// Cut to the width, never wrapped: "\r" returns to the start of the
	// cursor's line only.
	line = fmt.Sprintf("%s  %s", line, time.Since(p.start).Round(time.Second))
	fmt.Fprintf(p.out, "\r\033[K%s", terminal.Fit(terminal.Clean(line), p.cols()-1))
	p.drawn = true
}

// finish ends the live line on a terminal.
func (p *progress) finish() {
	if p.drawn {
		fmt.Fprintln(p.out)
	}
}
