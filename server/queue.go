package server

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/ownerauth"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/statedir"
)

// The actions that can be queued, spelled as the REST paths spell them
// (releasehold: the DELETE of a hold).
const (
	ActionImagePull   = "imagepull"
	ActionUpgrade     = "upgrade"
	ActionHold        = "hold"
	ActionReleaseHold = "releasehold"
)

// slotOf is where an action waits in the queue: one per pod and slot. A hold
// and its release share one, so that the later request replaces the earlier.
func slotOf(action string) string {
	if action == ActionReleaseHold {
		return ActionHold
	}
	return action
}

// DefaultQueuedActionTTL is how long a queued action waits for the API server
// before it expires, and how long its outcome is kept at least.
const DefaultQueuedActionTTL = 24 * time.Hour

// The queue's file in the state directory, and its format.
const (
	actionsFile    = "actions.json"
	actionsKind    = "ActionQueue"
	actionsVersion = 1
)

// maxOutcomesPerAction bounds the outcomes kept per pod and action: the
// latest few, each kept for twice the TTL, so at least the TTL.
const maxOutcomesPerAction = 5

// How a queued action ended, as stored.
const (
	resultDone      = "done"
	resultRefused   = "refused"
	resultExpired   = "expired"
	resultCancelled = "cancelled"
)

// queuedAction is an action the owner asked for while the API server was
// unreachable, as checked against the last known view of the pod.
type queuedAction struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Action    string `json:"action"`
	// PodUID is the pod the owner saw: a pod replaced meanwhile is not acted
	// on.
	PodUID types.UID `json:"podUID"`
	// TargetRevision is the revision the owner agreed to; empty for a hold
	// or a release, which need none.
	TargetRevision string `json:"targetRevision"`
	// Hold is what a queued hold writes (By is Caller, At QueuedAt); nil for
	// other actions.
	Hold *queuedHold `json:"hold,omitempty"`
	// Caller is who asked; nil for an anonymous caller.
	Caller    *ownerauth.Identity `json:"caller,omitempty"`
	QueuedAt  time.Time           `json:"queuedAt"`
	ExpiresAt time.Time           `json:"expiresAt"`
	// DeleteSent is set, on the disk, before an upgrade's delete (or, for
	// a pod that moves in place, its request) is sent: its answer may be
	// lost (a timeout, a power cut), so from then on the pod with PodUID
	// found gone or terminating, or carrying the request, or patched to
	// TargetRevision, means the upgrade started.
	DeleteSent bool `json:"deleteSent,omitempty"`
}

// queuedHold is a queued hold's end, fixed when asked (by the API server's
// clock as last seen), and its reason.
type queuedHold struct {
	Until  time.Time `json:"until"`
	Reason string    `json:"reason,omitempty"`
}

// hold is the hold a queued hold writes.
func (a *queuedAction) hold() *podchannel.Hold {
	return &podchannel.Hold{Until: metav1.NewTime(a.Hold.Until), Reason: a.Hold.Reason, By: userOf(a.Caller), At: metav1.NewTime(a.QueuedAt)}
}

// actionKey identifies a queued action's slot: one per pod and slot (see
// slotOf).
type actionKey struct{ namespace, name, slot string }

func (a *queuedAction) key() actionKey { return actionKey{a.Namespace, a.Name, slotOf(a.Action)} }

// callerName is the user who queued the action, as the audit log names it.
func (a *queuedAction) callerName() string { return callerName(a.Caller) }

// actionOutcome is how a queued action ended.
type actionOutcome struct {
	Action     queuedAction `json:"action"`
	Result     string       `json:"result"`
	Message    string       `json:"message"`
	FinishedAt time.Time    `json:"finishedAt"`
}

// queueData is the queue's file: the actions waiting and the outcomes kept.
type queueData struct {
	Actions  []queuedAction  `json:"actions"`
	Outcomes []actionOutcome `json:"outcomes"`
}

// ActionQueue holds the upgrades, image pre-pulls, holds and releases asked
// for with queue_if_offline while the API server was unreachable, and the
// outcomes of those that ended. It lives in the state directory: every change is on the
// disk (fsynced) before it is acknowledged, so a queued action survives
// restarts and power cuts. Server.RunQueue carries the actions out.
type ActionQueue struct {
	dir *statedir.Dir
	ttl time.Duration
	now func() time.Time

	mu       sync.Mutex
	actions  map[actionKey]queuedAction
	outcomes []actionOutcome // oldest first
	// wake tells RunQueue that an action was queued.
	wake chan struct{}
	// changed, if set, is told of every change (see onChange).
	changed func()
}

// onChange calls f, which must not block, after every change to the queue:
// the owner's view shows queued actions.
func (q *ActionQueue) onChange(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.changed = f
}

// NewActionQueue returns the queue kept in dir, with the actions and outcomes
// a previous run left there. A file it cannot use is logged and ignored, and
// entries that are not valid are dropped. ttl is how long an action waits
// (DefaultQueuedActionTTL when zero); clock tells the time (nil: the node's).
func NewActionQueue(ctx context.Context, dir *statedir.Dir, ttl time.Duration, clock *APIServerClock) *ActionQueue {
	if ttl <= 0 {
		ttl = DefaultQueuedActionTTL
	}
	q := &ActionQueue{dir: dir, ttl: ttl, now: clock.Now, actions: map[actionKey]queuedAction{}, wake: make(chan struct{}, 1)}
	logger := klog.FromContext(ctx)
	var data queueData
	if err := dir.ReadJSON(actionsFile, actionsKind, actionsVersion, &data); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			logger.Error(err, "Ignoring the stored action queue", "dir", dir.Path())
		}
		return q
	}
	dropped := 0
	for _, a := range data.Actions {
		if !a.valid() {
			dropped++
			continue
		}
		q.actions[a.key()] = a
	}
	for _, o := range data.Outcomes {
		if !o.Action.valid() {
			dropped++
			continue
		}
		q.outcomes = append(q.outcomes, o)
	}
	if dropped > 0 {
		logger.Error(nil, "Dropped invalid entries of the stored action queue", "dropped", dropped)
	}
	if len(q.actions) > 0 {
		logger.Info("Loaded queued actions", "actions", len(q.actions))
	}
	return q
}

// valid reports whether a stored action names a pod and an action this agent
// knows, with what the action needs (a revision, a valid hold), and is timed.
func (a *queuedAction) valid() bool {
	if validatePodRef(a.Namespace, a.Name) != nil || a.QueuedAt.IsZero() || a.ExpiresAt.IsZero() {
		return false
	}
	switch a.Action {
	case ActionImagePull, ActionUpgrade:
		return a.TargetRevision != ""
	case ActionHold:
		return a.Hold != nil && a.hold().Validate() == nil
	case ActionReleaseHold:
		return true
	}
	return false
}

// add queues the actions, each replacing the same pod's earlier action in
// its slot, and returns once they are on the disk (all, or none of them).
func (q *ActionQueue) add(actions ...queuedAction) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	prev := maps.Clone(q.actions)
	for _, a := range actions {
		q.actions[a.key()] = a
	}
	if err := q.saveLocked(); err != nil {
		q.actions = prev
		return err
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return nil
}

// cancel ends the queued action with a cancelled outcome.
func (q *ActionQueue) cancel(namespace, name, action, by string) (queuedAction, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	a, ok := q.actions[actionKey{namespace, name, slotOf(action)}]
	if !ok || a.Action != action {
		return a, status.Errorf(codes.NotFound, "no %s is queued for pod %s/%s", action, namespace, name)
	}
	outcomes := q.outcomes
	q.endLocked(a, resultCancelled, "cancelled by "+by)
	if err := q.saveLocked(); err != nil {
		q.actions[a.key()], q.outcomes = a, outcomes
		return a, status.Errorf(codes.Internal, "cancelling the %s of pod %s/%s: %v", action, namespace, name, err)
	}
	return a, nil
}

// finish ends a with result, unless it was replaced or cancelled meanwhile
// (then the newer entry stays, and finish reports false). A failure to store
// the outcome is logged by the caller: the action stays ended in memory, and
// after a restart its checks would refuse to run it twice.
func (q *ActionQueue) finish(a queuedAction, result, message string) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if cur, ok := q.actions[a.key()]; !ok || !cur.QueuedAt.Equal(a.QueuedAt) {
		return false, nil
	}
	q.endLocked(a, result, message)
	return true, q.saveLocked()
}

// markDeleteSent records, on the disk, that a's delete is about to be sent,
// unless a was replaced or cancelled meanwhile (then it reports false).
func (q *ActionQueue) markDeleteSent(a queuedAction) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	cur, ok := q.actions[a.key()]
	if !ok || !cur.QueuedAt.Equal(a.QueuedAt) {
		return false, nil
	}
	if cur.DeleteSent {
		return true, nil
	}
	cur.DeleteSent = true
	q.actions[a.key()] = cur
	return true, q.saveLocked()
}

// expired removes the actions past their expiry, with an expired outcome each,
// and returns them.
func (q *ActionQueue) expired() ([]queuedAction, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	var out []queuedAction
	for _, a := range q.sortedLocked() {
		if !now.Before(a.ExpiresAt) {
			msg := "expired before the API server was reachable"
			if a.Hold != nil && !now.Before(a.Hold.Until) {
				msg = holdEnded(a.Hold.Until)
			}
			q.endLocked(a, resultExpired, msg)
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, q.saveLocked()
}

// endLocked removes a and records its outcome, keeping the latest
// maxOutcomesPerAction per pod and action, for twice the TTL.
func (q *ActionQueue) endLocked(a queuedAction, result, message string) {
	delete(q.actions, a.key())
	now := q.now()
	outcomes := append(q.outcomes, actionOutcome{Action: a, Result: result, Message: message, FinishedAt: now})
	per := map[actionKey]int{}
	var kept []actionOutcome
	for i := len(outcomes) - 1; i >= 0; i-- { // newest first
		o := outcomes[i]
		k := o.Action.key()
		if per[k] >= maxOutcomesPerAction || now.Sub(o.FinishedAt) >= 2*q.ttl {
			continue
		}
		per[k]++
		kept = append(kept, o)
	}
	slices.Reverse(kept)
	q.outcomes = kept
}

func (q *ActionQueue) saveLocked() error {
	if q.changed != nil {
		q.changed()
	}
	data := queueData{Actions: q.sortedLocked(), Outcomes: q.outcomes}
	return q.dir.WriteJSON(actionsFile, actionsKind, actionsVersion, data)
}

// due returns the queued actions in the order they run: by pod, and for one
// pod the image pre-pull before the upgrade.
func (q *ActionQueue) due() []queuedAction {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.sortedLocked()
}

func (q *ActionQueue) sortedLocked() []queuedAction {
	out := slices.Collect(maps.Values(q.actions))
	slices.SortFunc(out, runOrder)
	return out
}

// runOrder orders queued actions as they run: by pod, and for one pod by
// action name ("imagepull" sorts before "upgrade": the pull runs first).
func runOrder(a, b queuedAction) int {
	if c := strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name); c != 0 {
		return c
	}
	return strings.Compare(a.Action, b.Action)
}

// has reports whether an action is queued for the pod.
func (q *ActionQueue) has(namespace, name, action string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	a, ok := q.actions[actionKey{namespace, name, slotOf(action)}]
	return ok && a.Action == action
}

// Queued returns the actions queued for one pod, in the order they run:
// what a view of the pod's applications shows as queued.
func (q *ActionQueue) Queued(namespace, name string) []*edgeotav1.QueuedAction {
	q.mu.Lock()
	defer q.mu.Unlock()
	var mine []queuedAction
	for _, slot := range []string{ActionImagePull, ActionUpgrade, ActionHold} {
		if a, ok := q.actions[actionKey{namespace, name, slot}]; ok {
			mine = append(mine, a)
		}
	}
	slices.SortFunc(mine, runOrder)
	var out []*edgeotav1.QueuedAction
	for _, a := range mine {
		out = append(out, a.toProto())
	}
	return out
}

// list returns every queued action and the kept outcomes, newest first.
func (q *ActionQueue) list() *edgeotav1.ListActionsResponse {
	q.mu.Lock()
	defer q.mu.Unlock()
	resp := &edgeotav1.ListActionsResponse{}
	for _, a := range q.sortedLocked() {
		resp.Actions = append(resp.Actions, a.toProto())
	}
	for i := len(q.outcomes) - 1; i >= 0; i-- {
		o := q.outcomes[i]
		resp.Outcomes = append(resp.Outcomes, &edgeotav1.ActionOutcome{
			Action:     o.Action.toProto(),
			Result:     resultToProto(o.Result),
			Message:    o.Message,
			FinishedAt: timestamppb.New(o.FinishedAt),
		})
	}
	return resp
}

func (a *queuedAction) toProto() *edgeotav1.QueuedAction {
	out := &edgeotav1.QueuedAction{
		Namespace:      a.Namespace,
		Name:           a.Name,
		Action:         a.Action,
		TargetRevision: a.TargetRevision,
		Caller:         a.callerName(),
		QueuedAt:       timestamppb.New(a.QueuedAt),
		ExpiresAt:      timestamppb.New(a.ExpiresAt),
		PodUid:         string(a.PodUID),
	}
	if a.Hold != nil {
		out.HoldUntil, out.HoldReason = timestamppb.New(a.Hold.Until), a.Hold.Reason
	}
	return out
}

func resultToProto(r string) edgeotav1.ActionResult {
	switch r {
	case resultDone:
		return edgeotav1.ActionResult_ACTION_RESULT_DONE
	case resultRefused:
		return edgeotav1.ActionResult_ACTION_RESULT_REFUSED
	case resultExpired:
		return edgeotav1.ActionResult_ACTION_RESULT_EXPIRED
	case resultCancelled:
		return edgeotav1.ActionResult_ACTION_RESULT_CANCELLED
	default:
		return edgeotav1.ActionResult_ACTION_RESULT_UNSPECIFIED
	}
}
