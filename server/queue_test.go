package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/ownerauth"
	"github.com/edgeota/edgeota/podcondition"
)

const (
	queuedUpgradePath   = "/openyurt.io/v1/namespaces/default/pods/p/upgrade?queue_if_offline=true"
	queuedImagePullPath = "/openyurt.io/v1/namespaces/default/pods/p/imagepull?queue_if_offline=true"
)

// eventually polls cond until it holds, failing the test after 20 s: an
// answer, not a hang.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// link is the fake API server's reachability for the agent's live calls (the
// cache keeps what it has): cut, every get, delete and patch of a pod fails
// as a dead link does; with a refusal set, every delete that gets through is
// refused with it. With lose set, a delete or patch reaches the API server
// and is carried out, but its answer is lost as a timed-out request's is
// (and with dieAfter set the link is cut right after); with drop set, it is
// lost on the way there. All are atomics because the agent's queue calls the
// fake from its own goroutine, and the fake's reactor chain must not change
// while it runs. With terminate set, a delete that gets through leaves the
// pod terminating (as a finalizer does) instead of gone.
type link struct {
	cut, lose, dieAfter, drop, terminate atomic.Bool
	refuse                               atomic.Pointer[error]
}

// errLinkDown is what a dead link answers, word for word as net/http
// words it.
//
//lint:ignore ST1005 the text is client-go's, capital letter included
var errLinkDown = errors.New(`Get "https://10.0.0.1:6443/api/v1/namespaces/default/pods/p": dial tcp 10.0.0.1:6443: i/o timeout`)

// errAnswerLost is what a request whose answer was lost returns.
var errAnswerLost = errors.New(`Delete "https://10.0.0.1:6443/api/v1/namespaces/default/pods/p": context deadline exceeded`)

// install puts the link in front of the fake API server; newFixture calls it
// before the agent starts (see fixtureOptions.link).
func (l *link) install(client *fake.Clientset) {
	carryOut := k8stesting.ObjectReaction(client.Tracker())
	for _, verb := range []string{"list", "delete", "patch"} {
		client.PrependReactor(verb, "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if verb == "list" && !liveRead(a) {
				// The pod cache's list of the node's pods goes through.
				return false, nil, nil
			}
			write := verb != "list"
			switch {
			case l.cut.Load():
				return true, nil, errLinkDown
			case write && l.drop.Load():
				return true, nil, errAnswerLost
			case write && l.lose.Load():
				if err := l.carryOut(client, carryOut, a); err != nil {
					return true, nil, err
				}
				if l.dieAfter.Load() {
					l.cut.Store(true)
				}
				return true, nil, errAnswerLost
			}
			if err := l.refuse.Load(); err != nil && a.GetVerb() == "delete" {
				return true, nil, *err
			}
			return false, nil, nil
		})
	}
}

// carryOut does what the API server does with a write that gets through.
func (l *link) carryOut(client *fake.Clientset, react k8stesting.ReactionFunc, a k8stesting.Action) error {
	del, ok := a.(k8stesting.DeleteAction)
	if !ok || !l.terminate.Load() {
		_, _, err := react(a)
		return err
	}
	obj, err := client.Tracker().Get(podsGVR, del.GetNamespace(), del.GetName())
	if err != nil {
		return err
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	now := metav1.Now()
	pod.DeletionTimestamp = &now
	return client.Tracker().Update(podsGVR, pod, pod.Namespace)
}

// offlineFixture is a fixture with a state directory whose API server link
// starts cut.
func offlineFixture(t *testing.T, opts fixtureOptions, objs ...runtime.Object) (*fixture, *link) {
	t.Helper()
	if opts.stateDir == nil {
		opts.stateDir = openStateDir(t)
	}
	l := &link{}
	l.cut.Store(true)
	opts.link = l
	return newFixture(t, opts, objs...), l
}

// actions lists the queue over gRPC.
func (f *fixture) actions() *edgeotav1.ListActionsResponse {
	f.t.Helper()
	resp, err := f.rpc.ListActions(context.Background(), &edgeotav1.ListActionsRequest{})
	if err != nil {
		f.t.Fatalf("ListActions: %v", err)
	}
	return resp
}

// outcome waits for the first outcome of the pod's action and returns it.
func (f *fixture) outcome(action string) *edgeotav1.ActionOutcome {
	f.t.Helper()
	var got *edgeotav1.ActionOutcome
	eventually(f.t, "an outcome of the queued "+action, func() bool {
		for _, o := range f.actions().GetOutcomes() {
			if o.GetAction().GetAction() == action {
				got = o
				return true
			}
		}
		return false
	})
	return got
}

// TestQueuedUpgradeRunsOnReconnection: cut off, an upgrade asked with
// queue_if_offline is answered 202 with the contract's sentence, listed, and
// carried out (a delete with the preconditions of the live pod) once the link
// is back; its outcome is kept.
func TestQueuedUpgradeRunsOnReconnection(t *testing.T) {
	t.Parallel()
	f, l := offlineFixture(t, fixtureOptions{}, dsPod("p"))

	resp := f.do(http.MethodPost, queuedUpgradePath, "")
	if want := "Upgrade of pod default/p queued until the API server is reachable\n"; resp.status != http.StatusAccepted || resp.body != want {
		t.Fatalf("got %d %q, want 202 %q", resp.status, resp.body, want)
	}
	asJSON := f.do(http.MethodPost, queuedUpgradePath, "application/json")
	var body struct {
		Message string `json:"message"`
		Queued  bool   `json:"queued"`
	}
	if err := json.Unmarshal([]byte(asJSON.body), &body); err != nil || asJSON.status != http.StatusAccepted || !body.Queued ||
		body.Message != "Upgrade of pod default/p queued until the API server is reachable" {
		t.Errorf("JSON: got %d %q (%v), want 202 with message and queued true", asJSON.status, asJSON.body, err)
	}
	grpcResp, err := f.rpc.Upgrade(context.Background(), &edgeotav1.UpgradeRequest{Namespace: "default", Name: "p", QueueIfOffline: true})
	if err != nil || !grpcResp.GetQueued() {
		t.Errorf("gRPC: got %v, %v; want OK with queued true", grpcResp, err)
	}
	listed := f.actions().GetActions()
	if len(listed) != 1 || listed[0].GetAction() != ActionUpgrade || listed[0].GetTargetRevision() != testHash ||
		listed[0].GetCaller() != anonymousUser || listed[0].GetPodUid() != "uid-p" ||
		!listed[0].GetExpiresAt().AsTime().After(listed[0].GetQueuedAt().AsTime()) {
		t.Fatalf("got queued %v, want one upgrade of p to %s", listed, testHash)
	}
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("cut off, got writes %v, want none", w)
	}

	l.cut.Store(false)
	o := f.outcome(ActionUpgrade)
	if o.GetResult() != edgeotav1.ActionResult_ACTION_RESULT_DONE || o.GetMessage() != "Start updating pod default/p" {
		t.Errorf("got outcome %v, want done", o)
	}
	writes := f.writes()
	if len(writes) != 1 {
		t.Fatalf("got writes %v, want one delete", writes)
	}
	del, ok := writes[0].(k8stesting.DeleteActionImpl)
	if !ok || del.DeleteOptions.Preconditions == nil || *del.DeleteOptions.Preconditions.UID != "uid-p" {
		t.Errorf("got %v, want a delete with the pod's UID as precondition", writes[0])
	}
	if left := f.actions().GetActions(); len(left) != 0 {
		t.Errorf("got %v still queued, want none", left)
	}
}

// TestQueueChangesNothingOnline: with the API server reachable the flag
// changes nothing; without it a cut-off agent still answers 503.
func TestQueueChangesNothingOnline(t *testing.T) {
	f, l := offlineFixture(t, fixtureOptions{}, dsPod("p"))
	if resp := f.do(http.MethodPost, "/openyurt.io/v1/namespaces/default/pods/p/upgrade", ""); resp.status != http.StatusServiceUnavailable {
		t.Errorf("cut off, without the flag: got %d %q, want 503", resp.status, resp.body)
	}
	l.cut.Store(false)
	if resp := f.do(http.MethodPost, queuedImagePullPath, ""); resp.status != http.StatusOK || resp.body != "Image pre-pull requested for pod default/p\n" {
		t.Errorf("online, with the flag: got %d %q, want 200 and the live sentence", resp.status, resp.body)
	}
	if got := f.actions(); len(got.GetActions())+len(got.GetOutcomes()) != 0 {
		t.Errorf("got %v, want nothing queued", got)
	}
}

// TestQueueingChecksTheLastKnownView: the contract's checks that need no API
// call are made on the cached pod, in order, before anything is queued.
func TestQueueingChecksTheLastKnownView(t *testing.T) {
	elsewhere := dsPod("elsewhere")
	elsewhere.Spec.NodeName = "edge-2"
	deleting := dsPod("deleting")
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	bare := dsPod("bare")
	bare.OwnerReferences = nil
	failedPull := dsPod("failed", func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: podcondition.ImageReady,
			Status: corev1.ConditionFalse, Reason: podcondition.ReasonPullImageFail, Message: testTarget})
	})
	f, _ := offlineFixture(t, fixtureOptions{}, elsewhere, deleting, bare, failedPull,
		dsPod("current", withoutCondition(podcondition.NeedUpgrade)))
	for _, tc := range []struct {
		pod, action string
		want        int
		wantInBody  string
	}{
		{"ghost", "upgrade", 404, "not found in the agent's last known view"},
		// The view holds this node's pods only (the cache lists them by
		// spec.nodeName), so another node's pod is not known at all.
		{"elsewhere", "upgrade", 404, "not found in the agent's last known view"},
		{"deleting", "imagepull", 403, "is being deleted"},
		{"bare", "upgrade", 400, "not controlled by a DaemonSet"},
		{"current", "imagepull", 403, "has no newer version"},
		{"failed", "upgrade", 403, "has not succeeded"},
		{"Bad_Name", "upgrade", 400, "invalid pod name"},
	} {
		resp := f.do(http.MethodPost, fmt.Sprintf("/openyurt.io/v1/namespaces/default/pods/%s/%s?queue_if_offline=true", tc.pod, tc.action), "")
		if resp.status != tc.want || !strings.Contains(resp.body, tc.wantInBody) {
			t.Errorf("%s %s: got %d %q, want %d containing %q", tc.action, tc.pod, resp.status, resp.body, tc.want, tc.wantInBody)
		}
	}
	if got := f.actions().GetActions(); len(got) != 0 {
		t.Errorf("got %v queued, want nothing", got)
	}
}

// TestQueueingWithoutStateDirIsRefused: no state directory, no queue.
func TestQueueingWithoutStateDirIsRefused(t *testing.T) {
	l := &link{}
	l.cut.Store(true)
	f := newFixture(t, fixtureOptions{link: l}, dsPod("p"))
	_, err := f.rpc.Upgrade(context.Background(), &edgeotav1.UpgradeRequest{Namespace: "default", Name: "p", QueueIfOffline: true})
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "--state-dir") {
		t.Errorf("got %v %q, want FailedPrecondition naming --state-dir", st.Code(), st.Message())
	}
	if resp := f.do(http.MethodPost, queuedUpgradePath, ""); resp.status != http.StatusForbidden {
		t.Errorf("REST: got %d %q, want 403", resp.status, resp.body)
	}
}

// TestLaterRequestReplacesTheEarlier: one entry per pod and action.
func TestLaterRequestReplacesTheEarlier(t *testing.T) {
	f, _ := offlineFixture(t, fixtureOptions{}, dsPod("p"))
	for range 2 {
		if resp := f.do(http.MethodPost, queuedUpgradePath, ""); resp.status != http.StatusAccepted {
			t.Fatalf("got %d %q, want 202", resp.status, resp.body)
		}
	}
	first := f.actions().GetActions()
	time.Sleep(10 * time.Millisecond) // a later request has a later queued-at
	f.do(http.MethodPost, queuedUpgradePath, "")
	f.do(http.MethodPost, queuedImagePullPath, "")
	got := f.actions().GetActions()
	if len(got) != 2 || got[0].GetAction() != ActionImagePull || got[1].GetAction() != ActionUpgrade {
		t.Fatalf("got %v, want one pull then one upgrade", got)
	}
	if !got[1].GetQueuedAt().AsTime().After(first[0].GetQueuedAt().AsTime()) {
		t.Errorf("got queued-at %s, want the later request's, after %s", got[1].GetQueuedAt().AsTime(), first[0].GetQueuedAt().AsTime())
	}
}

// TestQueuedActionExpires: past the TTL an action is dropped with an
// expired outcome, and never runs.
func TestQueuedActionExpires(t *testing.T) {
	t.Parallel()
	f, l := offlineFixture(t, fixtureOptions{queuedActionTTL: 50 * time.Millisecond}, dsPod("p"))
	if resp := f.do(http.MethodPost, queuedUpgradePath, ""); resp.status != http.StatusAccepted {
		t.Fatalf("got %d %q, want 202", resp.status, resp.body)
	}
	if o := f.outcome(ActionUpgrade); o.GetResult() != edgeotav1.ActionResult_ACTION_RESULT_EXPIRED {
		t.Fatalf("got %v, want expired", o)
	}
	l.cut.Store(false)
	// The runner has had its chance: another action, queued and run after,
	// proves a pass went by.
	l.cut.Store(true)
	f.do(http.MethodPost, queuedImagePullPath, "")
	l.cut.Store(false)
	f.outcome(ActionImagePull)
	for _, w := range f.writes() {
		if w.GetVerb() == "delete" {
			t.Errorf("got %v, want the expired upgrade never run", w)
		}
	}
}

var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

// setCondition sets one condition of a pod in the fake API server's store,
// past the agent's cut link, as the controller would.
func (f *fixture) setCondition(name string, want corev1.PodCondition) {
	f.t.Helper()
	obj, err := f.client.Tracker().Get(podsGVR, "default", name)
	if err != nil {
		f.t.Fatal(err)
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	pod.Status.Conditions = slices.DeleteFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == want.Type })
	pod.Status.Conditions = append(pod.Status.Conditions, want)
	if err := f.client.Tracker().Update(podsGVR, pod, "default"); err != nil {
		f.t.Fatal(err)
	}
}

// deletePod deletes a pod from the fake API server's store, past the agent's
// cut link.
func (f *fixture) deletePod(name string) {
	f.t.Helper()
	if err := f.client.Tracker().Delete(podsGVR, "default", name); err != nil {
		f.t.Fatal(err)
	}
}

// TestQueuedUpgradeIsRefused covers each reason a queued upgrade is not run
// when the link is back, and that it says why.
func TestQueuedUpgradeIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(*fixture, *link)
		want   string
	}{
		{"target moved", func(f *fixture, _ *link) {
			f.setCondition("p", corev1.PodCondition{Type: podcondition.NeedUpgrade, Status: corev1.ConditionTrue,
				Message: podcondition.RevisionMessage("9f9f9f9f9")})
		}, "moved from " + testHash + " to 9f9f9f9f9 since the upgrade was queued"},
		{"pod gone", func(f *fixture, _ *link) { f.deletePod("p") }, "pod default/p is gone"},
		{"pod replaced", func(f *fixture, _ *link) {
			f.deletePod("p")
			again := dsPod("p")
			again.UID = "uid-p-2"
			if err := f.client.Tracker().Add(again); err != nil {
				f.t.Fatal(err)
			}
		}, "was replaced since the upgrade was queued"},
		{"refused by the API server", func(_ *fixture, l *link) {
			var err error = apierrors.NewForbidden(podsResource, "p", errors.New("denied by node-scope policy"))
			l.refuse.Store(&err)
		}, "denied by node-scope policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, l := offlineFixture(t, fixtureOptions{}, dsPod("p"))
			if resp := f.do(http.MethodPost, queuedUpgradePath, ""); resp.status != http.StatusAccepted {
				t.Fatalf("got %d %q, want 202", resp.status, resp.body)
			}
			tc.change(f, l)
			l.cut.Store(false)
			o := f.outcome(ActionUpgrade)
			if o.GetResult() != edgeotav1.ActionResult_ACTION_RESULT_REFUSED || !strings.Contains(o.GetMessage(), tc.want) {
				t.Errorf("got %v %q, want refused containing %q", o.GetResult(), o.GetMessage(), tc.want)
			}
		})
	}
}

// TestQueuedActionCallerMustStillBeAllowed: an action queued by an upgrader
// whose token no longer grants upgrades, after a restart with another token
// file, is refused.
func TestQueuedActionCallerMustStillBeAllowed(t *testing.T) {
	dir := openStateDir(t)
	first, _ := offlineFixture(t, fixtureOptions{stateDir: dir, auth: ownerauth.Authenticator{Tokens: mustTokens(t, testTokens)}}, dsPod("p"))
	resp := first.do(http.MethodPost, queuedUpgradePath, "", "Authorization", "Bearer upgrader-token")
	if resp.status != http.StatusAccepted {
		t.Fatalf("got %d %q, want 202", resp.status, resp.body)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	// The same token now makes uli a viewer only.
	demoted := `upgrader-token,uli,1002,"edgeota:viewers"` + "\n"
	second := newFixture(t, fixtureOptions{stateDir: dir, auth: ownerauth.Authenticator{Tokens: mustTokens(t, demoted)}}, dsPod("p"))
	var o *edgeotav1.ActionOutcome
	eventually(t, "the queued upgrade's outcome", func() bool {
		list, err := second.rpc.ListActions(withToken(context.Background(), "upgrader-token"), &edgeotav1.ListActionsRequest{})
		if err != nil {
			t.Fatalf("ListActions as a viewer: %v", err)
		}
		if outcomes := list.GetOutcomes(); len(outcomes) > 0 {
			o = outcomes[0]
		}
		return o != nil
	})
	if o.GetResult() != edgeotav1.ActionResult_ACTION_RESULT_REFUSED || !strings.Contains(o.GetMessage(), "uli is no longer allowed") {
		t.Errorf("got %v %q, want refused: no longer allowed", o.GetResult(), o.GetMessage())
	}
	if o.GetAction().GetCaller() != "uli" {
		t.Errorf("got caller %q, want uli", o.GetAction().GetCaller())
	}
	for _, w := range second.writes() {
		if w.GetVerb() == "delete" {
			t.Errorf("got %v, want no delete", w)
		}
	}
}

// TestQueuedPullRunsBeforeTheUpgrade: the pull is requested first; the
// upgrade waits while the pull is pending and runs once it succeeded.
func TestQueuedPullRunsBeforeTheUpgrade(t *testing.T) {
	t.Parallel()
	f, l := offlineFixture(t, fixtureOptions{}, dsPod("p"))
	// Queued upgrade first, pull second: the order of the requests does not
	// change the order they run in.
	f.do(http.MethodPost, queuedUpgradePath, "")
	f.do(http.MethodPost, queuedImagePullPath, "")
	l.cut.Store(false)
	if o := f.outcome(ActionImagePull); o.GetResult() != edgeotav1.ActionResult_ACTION_RESULT_DONE {
		t.Fatalf("got pull outcome %v, want done", o)
	}
	writes := f.writes()
	if len(writes) != 1 || writes[0].GetVerb() != "patch" {
		t.Fatalf("got writes %v, want only the pull's patch", writes)
	}
	// The pull is pending (PullImageRequested): the upgrade waits across
	// passes of the runner.
	time.Sleep(2 * queueRetryInterval)
	if got := f.actions().GetActions(); len(got) != 1 || got[0].GetAction() != ActionUpgrade {
		t.Fatalf("got %v queued, want the upgrade waiting", got)
	}
	f.setCondition("p", corev1.PodCondition{Type: podcondition.ImageReady,
		Status: corev1.ConditionTrue, Reason: podcondition.ReasonPullImageSuccess, Message: testTarget})
	if o := f.outcome(ActionUpgrade); o.GetResult() != edgeotav1.ActionResult_ACTION_RESULT_DONE {
		t.Fatalf("got upgrade outcome %v, want done", o)
	}
	writes = f.writes()
	if len(writes) != 2 || writes[0].GetVerb() != "patch" || writes[1].GetVerb() != "delete" {
		t.Errorf("got writes %v, want the pull's patch then the upgrade's delete", writes)
	}
}

// TestQueueSurvivesARestart: a queued action is on the disk when it is
// acknowledged, and the next agent runs it.
func TestQueueSurvivesARestart(t *testing.T) {
	dir := openStateDir(t)
	first, _ := offlineFixture(t, fixtureOptions{stateDir: dir}, dsPod("p"))
	if resp := first.do(http.MethodPost, queuedUpgradePath, ""); resp.status != http.StatusAccepted {
		t.Fatalf("got %d %q, want 202", resp.status, resp.body)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	second := newFixture(t, fixtureOptions{stateDir: dir}, dsPod("p"))
	if o := second.outcome(ActionUpgrade); o.GetResult() != edgeotav1.ActionResult_ACTION_RESULT_DONE {
		t.Errorf("got %v, want done", o)
	}
}

// TestCancelAction: the owner cancels a queued action; the cancellation is
// its outcome, and a second cancel finds nothing.
func TestCancelAction(t *testing.T) {
	f, _ := offlineFixture(t, fixtureOptions{}, dsPod("p"))
	f.do(http.MethodPost, queuedUpgradePath, "")
	path := "/edgeota.io/v1/namespaces/default/pods/p/actions/upgrade"
	if resp := f.do(http.MethodDelete, path, ""); resp.status != http.StatusOK || resp.body != "Queued upgrade of pod default/p cancelled\n" {
		t.Errorf("got %d %q, want 200 and the sentence", resp.status, resp.body)
	}
	if o := f.outcome(ActionUpgrade); o.GetResult() != edgeotav1.ActionResult_ACTION_RESULT_CANCELLED {
		t.Errorf("got %v, want cancelled", o)
	}
	if resp := f.do(http.MethodDelete, path, ""); resp.status != http.StatusNotFound {
		t.Errorf("second cancel: got %d %q, want 404", resp.status, resp.body)
	}
	if resp := f.do(http.MethodDelete, "/edgeota.io/v1/namespaces/default/pods/p/actions/reboot", ""); resp.status != http.StatusBadRequest {
		t.Errorf("unknown action: got %d %q, want 400", resp.status, resp.body)
	}
}

// TestBadQueueFileIsIgnored: a queue file the agent cannot use is logged and
// ignored; the agent starts with an empty queue.
func TestBadQueueFileIsIgnored(t *testing.T) {
	dir := openStateDir(t)
	if err := dir.WriteFile(actionsFile, []byte(`{"kind":"ActionQueue","version":1,"data":{"actions":[{"namesp`)); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureOptions{stateDir: dir}, dsPod("p"))
	if got := f.actions(); len(got.GetActions()) != 0 {
		t.Errorf("got %v, want an empty queue", got)
	}
}
