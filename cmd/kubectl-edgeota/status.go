package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/internal/exitcode"
	"github.com/edgeota/edgeota/internal/kube"
	"github.com/edgeota/edgeota/internal/terminal"
	"github.com/edgeota/edgeota/rollout"
	"github.com/edgeota/edgeota/window"
)

// cli runs the commands in one namespace.
type cli struct {
	client    kubernetes.Interface
	namespace string
	out       io.Writer
	now       func() time.Time
	zone      *time.Location // times are shown in it: the user's
	// tty is out when it is a terminal status --watch draws its live view
	// on (nil: text blocks); color says whether the view may use colors.
	tty   *os.File
	color bool
	// stderr and logs, where client-go's log lines go (nil: nowhere the
	// plugin can move), are for the live view to put them above its frame.
	stderr io.Writer
	logs   *logOutput
}

// stage is where a rollout stands, as far as the plugin can tell.
type stage int

const (
	// stageWaitingForController: the controller's status is missing, does
	// not parse, or is about an older revision than the DaemonSet's newest.
	stageWaitingForController stage = iota
	stageInProgress
	stagePaused
	stageHalted
	stageComplete
	// stageAsFarAsAllowed: every node the node selector and partition let
	// the rollout touch runs the revision, and nothing else will happen
	// until the operator changes them (kubectl's "partitioned roll out
	// complete").
	stageAsFarAsAllowed
)

// final reports whether the stage ends a watch.
func (s stage) final() bool {
	return s == stageHalted || s == stageComplete || s == stageAsFarAsAllowed
}

// view is a rollout as the plugin tells it.
type view struct {
	stage    stage
	headline string
	// status is the controller's, when it is about the newest revision.
	status *rollout.Status
	// annotation is the status as written, which tells two views apart.
	annotation string
	// window is the DaemonSet's maintenance window in canonical form, or
	// why it does not parse; empty when it has none.
	window string
	// limits are the DaemonSet's controls over the status's nodes.
	limits limits
}

// limits are the DaemonSet's controls that bound what the rollout status
// counts, which the live view shows beside the counts. Unknown when the
// DaemonSet's annotations do not parse (the controller's events say why).
type limits struct {
	known                     bool
	maxUnavailable, maxFailed int
	maxHold                   time.Duration
}

// limitsOf reads the DaemonSet's limits over total nodes as the controller
// does (decision.ParseSettings).
func limitsOf(ds *appsv1.DaemonSet, total int) limits {
	strategy, _, ok, err := rollout.StrategyOf(ds)
	if !ok || err != nil {
		return limits{}
	}
	settings, err := decision.ParseSettings(strategy, ds.Annotations, ds.Spec.MinReadySeconds)
	if err != nil {
		return limits{}
	}
	return limits{known: true, maxUnavailable: settings.MaxUnavailable(total), maxFailed: settings.MaxFailed(total), maxHold: settings.MaxHold}
}

// key tells views apart: a watch prints a view when it differs from the last.
func (v view) key() string {
	return v.headline + "\n" + v.annotation + "\n" + v.window
}

// status prints where the rollout of the DaemonSet stands, and with watch
// follows it until it completes or halts, or timeout (0: none) passes. A
// halted rollout is an error (exit 1), as is a DaemonSet edgeota does not
// roll out.
func (c *cli) status(ctx context.Context, name string, watch bool, timeout time.Duration) error {
	ds, err := c.client.AppsV1().DaemonSets(c.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	v, err := c.assess(ctx, ds)
	if err != nil {
		return err
	}
	d := c.display(watch)
	defer d.close()
	d.show(v)
	if watch && !v.stage.final() {
		if v, err = c.follow(ctx, name, v, timeout, d); err != nil {
			return err
		}
	}
	if v.stage == stageHalted {
		return &outcomeError{code: exitcode.Failed, message: v.headline}
	}
	return nil
}

// follow watches the one DaemonSet (a field selector on its name) and shows
// each view on d, until one is final or timeout passes. Each change of the
// rollout changes the DaemonSet: a new template, the controller's status.
func (c *cli) follow(ctx context.Context, name string, last view, timeout time.Duration, d display) (view, error) {
	ctx, cancel := watchtools.ContextWithOptionalTimeout(ctx, timeout)
	defer cancel()
	daemonSets := c.client.AppsV1().DaemonSets(c.namespace)
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	// A client that cannot stream the initial list (a fake one) is listed
	// instead.
	lw := kube.NewListWatch(c.client, daemonSets, func(opts *metav1.ListOptions) { opts.FieldSelector = selector })
	gone := apierrors.NewNotFound(appsv1.Resource("daemonsets"), name)
	exists := func(store cache.Store) (bool, error) {
		_, ok, err := store.Get(&metav1.ObjectMeta{Namespace: c.namespace, Name: name})
		if err == nil && !ok {
			err = gone
		}
		return err != nil, err
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &appsv1.DaemonSet{}, exists, func(e watch.Event) (bool, error) {
		if e.Type == watch.Deleted {
			return false, gone
		}
		ds, ok := e.Object.(*appsv1.DaemonSet)
		if !ok {
			return false, nil
		}
		v, err := c.assess(ctx, ds)
		if err != nil {
			return false, err
		}
		d.show(v)
		last = v
		return v.stage.final(), nil
	})
	switch {
	case err == nil:
		return last, nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return last, &outcomeError{code: exitcode.Timeout, message: fmt.Sprintf("timed out after %s; %s", timeout, last.headline)}
	case ctx.Err() != nil:
		return last, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return last, err
}

// assess reads where the DaemonSet's rollout stands: the controller's
// status, unless the DaemonSet controller or edgeota's controller has not
// caught up with the newest revision yet.
func (c *cli) assess(ctx context.Context, ds *appsv1.DaemonSet) (view, error) {
	if err := optedIn(ds); err != nil {
		return view{}, err
	}
	v := view{stage: stageWaitingForController, annotation: ds.Annotations[rollout.RolloutStatusAnnotation]}
	if value, ok := ds.Annotations[rollout.MaintenanceWindowAnnotation]; ok {
		if schedule, err := window.Parse(value); err != nil {
			v.window = "invalid, nothing is upgraded until it is fixed: " + err.Error()
		} else {
			v.window = schedule.String()
		}
	}
	newest, err := c.newestRevision(ctx, ds)
	if err != nil {
		return view{}, err
	}
	if ds.Status.ObservedGeneration < ds.Generation || newest == nil {
		v.headline = fmt.Sprintf("Waiting for the DaemonSet controller to take up the spec of daemonset %q", ds.Name)
		return v, nil
	}
	hash := newest.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
	value, ok := ds.Annotations[rollout.RolloutStatusAnnotation]
	if !ok {
		v.headline = fmt.Sprintf("Waiting for the controller: daemonset %q has no rollout status yet (if that lasts, its events say why: kubectl describe daemonset %s -n %s)",
			ds.Name, ds.Name, ds.Namespace)
		return v, nil
	}
	var s rollout.Status
	if err := json.Unmarshal([]byte(value), &s); err != nil {
		v.headline = fmt.Sprintf("Waiting for the controller: the rollout status of daemonset %q does not parse (%v)", ds.Name, err)
		return v, nil
	}
	if s.Revision != newest.Revision || s.Hash != hash {
		v.headline = fmt.Sprintf("Waiting for the controller to take up revision %d (%s) of daemonset %q: its rollout status is about revision %d (%s)",
			newest.Revision, hash, ds.Name, s.Revision, s.Hash)
		return v, nil
	}
	v.status = &s
	v.stage, v.headline = judge(ds.Name, &s)
	v.limits = limitsOf(ds, s.Total)
	return v, nil
}

// optedIn is an error unless the DaemonSet asks edgeota to roll it out.
func optedIn(ds *appsv1.DaemonSet) error {
	_, current := ds.Annotations[rollout.StrategyAnnotation]
	_, legacy := ds.Annotations[rollout.LegacyStrategyAnnotation]
	if current || legacy {
		return nil
	}
	return &outcomeError{code: exitcode.Failed, message: fmt.Sprintf(
		"daemonset %q is not rolled out by edgeota: it has no annotation %s (kubectl rollout status follows the native strategies)",
		ds.Name, rollout.StrategyAnnotation)}
}

// judge tells the stage of a rollout from its current status, and the
// headline saying so. Complete is the controller's rule for its
// RolloutCompleted event (RolloutStatus.Complete).
func judge(name string, s *rollout.Status) (stage, string) {
	switch {
	case s.Halted:
		reason := terminal.Escape(s.Reason)
		if reason == "" {
			reason = fmt.Sprintf("%s failed", nodes(s.Failed.Count))
		}
		return stageHalted, fmt.Sprintf("daemonset %q rollout halted: %s", name, reason)
	case s.Complete():
		return stageComplete, fmt.Sprintf("daemonset %q successfully rolled out: revision %d (%s) on all %s", name, s.Revision, s.Hash, nodes(s.Total))
	case s.Paused:
		return stagePaused, fmt.Sprintf("Waiting for daemonset %q rollout: paused (%s); %d of %s updated", name, rollout.PausedAnnotation, s.Updated, nodes(s.Total))
	case s.HeldBack > 0 && s.Updated+s.HeldBack == s.Total && s.InFlight == 0 && s.Failed.Count == 0 &&
		count(s.Held) == 0 && count(s.WaitingForWindow) == 0:
		return stageAsFarAsAllowed, fmt.Sprintf("daemonset %q rolled out as far as allowed: revision %d (%s) on %d of %s, %d held back by the node selector or partition",
			name, s.Revision, s.Hash, s.Updated, nodes(s.Total), s.HeldBack)
	}
	return stageInProgress, fmt.Sprintf("Waiting for daemonset %q rollout to finish: %d of %s updated", name, s.Updated, nodes(s.Total))
}

// newestRevision returns the DaemonSet's ControllerRevision with the highest
// number, the target the controller rolls out; nil when there is none yet.
func (c *cli) newestRevision(ctx context.Context, ds *appsv1.DaemonSet) (*appsv1.ControllerRevision, error) {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("the selector of daemonset %q: %w", ds.Name, err)
	}
	list, err := c.client.AppsV1().ControllerRevisions(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, fmt.Errorf("listing the controller revisions of daemonset %q: %w", ds.Name, err)
	}
	revisions := make([]*appsv1.ControllerRevision, len(list.Items))
	for i := range list.Items {
		revisions[i] = &list.Items[i]
	}
	return rollout.NewestRevision(ds.UID, revisions), nil
}

// print writes the view as a text block: its headline, then, unless the
// rollout is complete, a line for each figure that is not zero.
func (c *cli) print(v view) {
	var b strings.Builder
	b.WriteString(v.headline + "\n")
	for _, d := range c.details(v, false) {
		fmt.Fprintf(&b, "  %-10s %s\n", d.label, d.text)
	}
	fmt.Fprint(c.out, b.String())
}

// detail is a line of a view below its headline: a label and its text;
// state is the state of nodes it counts, which the live view's bar draws.
type detail struct {
	state       *nodeState
	label, text string
}

// details are the lines of the view below its headline, for each figure that
// is not zero. The text block shows none for a complete rollout. The live
// view (live) shows them for every stage, with the limits beside the counts
// they bound (max-unavailable, max-failed, max-hold), countdowns to the
// second, and the controller's reason for a wait.
func (c *cli) details(v view, live bool) []detail {
	var ds []detail
	line := func(state *nodeState, label, format string, args ...any) {
		ds = append(ds, detail{state: state, label: label, text: fmt.Sprintf(format, args...)})
	}
	limit := func(format string, args ...any) string {
		if !live || !v.limits.known {
			return ""
		}
		return fmt.Sprintf(format, args...)
	}
	if s := v.status; s != nil && (v.stage != stageComplete || live) {
		switch {
		case s.Strategy != "" && s.UpdateMethod != "":
			line(nil, "revision", "%d (%s), %s, %s", s.Revision, s.Hash, s.Strategy, s.UpdateMethod)
		case s.Strategy != "":
			line(nil, "revision", "%d (%s), %s", s.Revision, s.Hash, s.Strategy)
		default:
			line(nil, "revision", "%d (%s)", s.Revision, s.Hash)
		}
		line(&stateUpdated, "updated", "%d of %s", s.Updated, nodes(s.Total))
		if p := s.Proven; p != nil && p.Answer+p.Heartbeat > 0 {
			line(nil, "proven", "%s", provenBy(p))
		}
		if s.InFlight > 0 {
			if live {
				line(&stateInFlight, "in flight", "%s%s", nodes(s.InFlight), limit(", max-unavailable %d", v.limits.maxUnavailable))
			} else {
				line(&stateInFlight, "in flight", "%d", s.InFlight)
			}
		}
		if n := count(s.WaitingForWindow); n > 0 {
			if live {
				line(&stateWaiting, "waiting", "%s for the window%s", nodes(n), c.countdown(s.WaitingForWindow, ": opens", ""))
			} else {
				line(&stateWaiting, "waiting", "%s for the maintenance window%s", nodes(n), c.when(s.WaitingForWindow, ", the next opens"))
			}
		}
		if n := count(s.Held); n > 0 {
			if live {
				line(&stateHeld, "held", "%s by the owner%s", nodes(n), c.countdown(s.Held, ": the last hold ends", limit(", max-hold %s", span(v.limits.maxHold))))
			} else {
				line(&stateHeld, "held", "%s by the owner%s", nodes(n), c.when(s.Held, ", the last hold ends"))
			}
		}
		if s.Skipped > 0 {
			line(&stateSkipped, "skipped", "%s NotReady, upgraded when back", nodes(s.Skipped))
		}
		if s.HeldBack > 0 {
			line(&stateHeldBack, "held back", "%s by pause, node selector or partition", nodes(s.HeldBack))
		}
		if s.Failed.Count > 0 {
			halts := ""
			if !s.Halted {
				halts = limit(" (max-failed %d)", v.limits.maxFailed)
			}
			line(&stateFailed, "failed", "%s%s", failedNodes(s.Failed), halts)
		}
		if u := s.SettledUnavailable; u != nil && u.Count > 0 {
			line(&stateDown, "down", "%s settled, their pod unavailable now (holding the budget): %s", nodes(u.Count), strings.Join(u.Nodes, ", "))
		}
		if p := s.Pulls; p != nil {
			parts := []string{fmt.Sprintf("%d pulling", p.InFlight), fmt.Sprintf("%d pulled", p.Done)}
			if p.Failed > 0 {
				parts = append(parts, fmt.Sprintf("%d failed (no pod lost)", p.Failed))
			}
			if p.TimedOut > 0 {
				parts = append(parts, fmt.Sprintf("%d timed out", p.TimedOut))
			}
			if p.Waiting > 0 {
				parts = append(parts, fmt.Sprintf("%s waiting for their download", nodes(p.Waiting)))
			}
			line(nil, "downloads", "%s", strings.Join(parts, ", "))
		}
		if n := count(s.Offered); n > 0 {
			if live {
				line(&stateOffered, "offered", "%d not taken by the owner yet%s", n, c.countdown(s.Offered, ": the first deadline", ""))
			} else {
				line(&stateOffered, "offered", "%d not taken by the owner yet%s", n, c.when(s.Offered, ", the first deadline"))
			}
		}
		if live && s.Reason != "" && !s.Halted && !s.Paused {
			line(nil, "reason", "%s", terminal.Escape(s.Reason))
		}
		if r := s.Recreate; r != nil && r.Count > 0 {
			for _, why := range slices.Sorted(maps.Keys(r.Reasons)) {
				line(nil, "recreate", "%s instead of in place: %s", nodes(r.Reasons[why]), why)
			}
		}
		for _, arch := range slices.Sorted(maps.Keys(s.Pins)) {
			line(nil, "pinned", "%s", pinLine(arch, s.Pins[arch]))
		}
	}
	if v.window != "" && v.stage != stageComplete {
		line(nil, "window", "%s", v.window)
	}
	return ds
}

// when renders a TimedNodes' time after what, in the user's zone and from
// now; nothing when it has none.
func (c *cli) when(t *rollout.TimedNodes, what string) string {
	if t.At == nil {
		return ""
	}
	return fmt.Sprintf("%s %s (%s)", what, c.date(t.At.Time), relative(t.At.Sub(c.now())))
}

// countdown renders a TimedNodes' time for the live view: after what, the
// countdown to the second, then more, then the time in the user's zone;
// nothing when it has none. The countdown comes first, where a narrow
// terminal does not cut it off.
func (c *cli) countdown(t *rollout.TimedNodes, what, more string) string {
	if t.At == nil {
		return more
	}
	return fmt.Sprintf("%s %s%s (%s)", what, countdownTo(t.At.Sub(c.now())), more, c.date(t.At.Time))
}

// date renders a time in the user's zone, to the minute.
func (c *cli) date(t time.Time) string { return t.In(c.zone).Format("2006-01-02 15:04 MST") }

// relative renders a duration from now as people read it: in 3h12m, 1m30s
// ago, in 2d4h.
func relative(d time.Duration) string {
	past := d < 0
	if past {
		d = -d
	}
	var s string
	switch d = d.Round(time.Second); {
	case d < time.Minute:
		s = d.String()
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d.Minutes()))
		if seconds := int(d.Seconds()) % 60; seconds > 0 {
			s += fmt.Sprintf("%ds", seconds)
		}
	case d < 48*time.Hour:
		d = d.Round(time.Minute)
		s = fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		d = d.Round(time.Hour)
		s = fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
	}
	if past {
		return s + " ago"
	}
	return "in " + s
}

// failedNodes names the failed nodes the status records, with why when it
// says, and how many more there are.
func failedNodes(f rollout.FailedNodes) string {
	names := make([]string, 0, len(f.Nodes))
	for _, n := range f.Nodes {
		if why := f.Reasons[n]; why != "" {
			n += " (" + terminal.Escape(why) + ")"
		}
		names = append(names, n)
	}
	s := nodes(f.Count)
	if len(names) > 0 {
		s += ": " + strings.Join(names, ", ")
	}
	if more := f.Count - len(names) - f.Lost; more > 0 && len(names) > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	if f.Lost > 0 {
		s += fmt.Sprintf(" and %d no longer in the rollout record", f.Lost)
	}
	return s
}

// provenBy says what proved the updated nodes alive: how many by their
// agent's answer, how many by a heartbeat (no agent, or a slower one),
// leaving out a kind that proved none.
func provenBy(p *rollout.ProvenNodes) string {
	var parts []string
	if p.Answer > 0 {
		parts = append(parts, fmt.Sprintf("%d by the node agent's answer", p.Answer))
	}
	if p.Heartbeat > 0 {
		parts = append(parts, fmt.Sprintf("%d by heartbeat", p.Heartbeat))
	}
	return strings.Join(parts, ", ")
}

// count is how many nodes a TimedNodes counts; none when absent.
func count(t *rollout.TimedNodes) int {
	if t == nil {
		return 0
	}
	return t.Count
}

// nodes renders a count of nodes: "1 node", "3 nodes".
func nodes(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}

// pinLine renders one architecture's pin: its canary, and each container's
// pinned image or why it could not be pinned.
func pinLine(arch string, p rollout.Pin) string {
	if arch == "" {
		arch = "nodes without kubernetes.io/arch"
	}
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(p.Images)) {
		parts = append(parts, c+"="+p.Images[c])
	}
	for _, c := range slices.Sorted(maps.Keys(p.Unpinnable)) {
		parts = append(parts, c+" not pinned: "+p.Unpinnable[c])
	}
	return fmt.Sprintf("%s to what canary %s ran: %s", arch, p.Canary, strings.Join(parts, "; "))
}
