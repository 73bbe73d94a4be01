package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/internal/appreason"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// offeredInPlace puts the controller's offer of revision hash on the pod,
// saying that it moves in place.
func offeredInPlace(hash string) podOption {
	value, err := podchannel.Encode(&podchannel.Offer{Revision: hash, Images: map[string]string{"app": "nginx:1.19.5"}, InPlace: true})
	if err != nil {
		panic(err)
	}
	return withAnnotation(rollout.OfferAnnotation, value)
}

// TestUpgradeInPlaceWritesTheRequest: the owner's Upgrade of a pod offered
// in place deletes nothing: one status patch writes the owner's request,
// bound to the pod's UID and the revision offered, conditional on the UID
// and resourceVersion the pod was checked at; the answer is the contract's.
func TestUpgradeInPlaceWritesTheRequest(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, dsPod("p", offeredInPlace(testHash)))
	resp := f.do(http.MethodPost, "/openyurt.io/v1/namespaces/default/pods/p/upgrade", "")
	if resp.status != http.StatusOK || resp.body != "Start updating pod default/p\n" {
		t.Fatalf("got %d %q, want 200 and the contract's sentence", resp.status, resp.body)
	}
	writes := f.writes()
	if len(writes) != 1 {
		t.Fatalf("got writes %v, want one status patch", writes)
	}
	p, ok := writes[0].(k8stesting.PatchActionImpl)
	if !ok || p.GetSubresource() != "status" {
		t.Fatalf("got %v, want a patch of pods/status", writes[0])
	}
	var body struct {
		Metadata struct {
			UID             string            `json:"uid"`
			ResourceVersion string            `json:"resourceVersion"`
			Annotations     map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
		t.Fatal(err)
	}
	if body.Metadata.UID != "uid-p" || body.Metadata.ResourceVersion != "7" {
		t.Errorf("got preconditions uid %q resourceVersion %q, want uid-p and 7", body.Metadata.UID, body.Metadata.ResourceVersion)
	}
	r, err := podchannel.ParseRequest(body.Metadata.Annotations[rollout.UpgradeRequestAnnotation])
	if err != nil || !r.For("uid-p", testHash) || r.At.IsZero() {
		t.Errorf("got request %+v (%v), want one for uid-p and %s, timed", r, err, testHash)
	}
}

// TestUpgradeInPlaceAnswerLost: a request whose answer was lost, but which
// the pod carries when read again, is the upgrade started.
func TestUpgradeInPlaceAnswerLost(t *testing.T) {
	l := &link{}
	f := newFixture(t, fixtureOptions{link: l, watcher: watch.NewFakeWithChanSize(1, false)}, dsPod("p", offeredInPlace(testHash)))
	l.lose.Store(true)
	resp := f.do(http.MethodPost, "/openyurt.io/v1/namespaces/default/pods/p/upgrade", "")
	if resp.status != http.StatusOK || resp.body != "Start updating pod default/p\n" {
		t.Errorf("got %d %q, want 200: the pod carries the request", resp.status, resp.body)
	}
}

// inPlacePod is the app's pod as an upgrade in place shows it: at revision
// rev, generation gen observed up to observed, its container app running
// under the container ID, Ready (or not), since started.
func inPlacePod(rev string, gen, observed int64, id string, ready bool, started time.Time, opts ...podOption) *corev1.Pod {
	p := appPod("p", rev, opts...)
	p.Generation, p.Status.ObservedGeneration = gen, observed
	p.Spec.Containers[0].Image = map[string]string{"r1": "nginx:1.19.4"}[rev]
	if p.Spec.Containers[0].Image == "" {
		p.Spec.Containers[0].Image = "nginx:1.19.5"
	}
	st := corev1.ContainerStatus{Name: "app", ContainerID: id, Ready: ready, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}
	if id != "c1" {
		st.RestartCount = 1
		st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ContainerID: "c1", FinishedAt: metav1.NewTime(started)}}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{st}
	return p
}

func requestOn(rev string) podOption {
	value, err := podchannel.Encode(&podchannel.UpgradeRequest{UID: "uid-p", Revision: rev, At: metav1.NewTime(appT0)})
	if err != nil {
		panic(err)
	}
	return withAnnotation(rollout.UpgradeRequestAnnotation, value)
}

// TestAppFollowsAnUpgradeInPlace: the owner's view of an upgrade in place,
// the same pod throughout: UPGRADING from the request, through the patch,
// while the kubelet has not observed it or still reports the old container;
// UPGRADED only once the new container runs and is Ready, and it stays so
// (the kill's last state is no restart), never on the label and images the
// patch wrote.
func TestAppFollowsAnUpgradeInPlace(t *testing.T) {
	r := phaseRule{deadline: health.DefaultDeadline}
	mem := &appMemory{}
	now := appT0.Add(time.Minute)
	steps := []struct {
		name   string
		pod    *corev1.Pod
		want   edgeotav1.UpgradePhase
		reason string
	}{
		{"offered", inPlacePod("r1", 1, 1, "c1", true, appT0, needs(testHash), offeredInPlace(testHash)), upgradeAvailable, ""},
		{"requested", inPlacePod("r1", 1, 1, "c1", true, appT0, needs(testHash), offeredInPlace(testHash), requestOn(testHash)), upgrading, appreason.UpgradeRequested},
		{"patched, not observed", inPlacePod(testHash, 2, 1, "c1", true, appT0, upToDateMark(), requestOn(testHash)), upgrading, appreason.UpdatingInPlace},
		{"observed, the old container still reported", inPlacePod(testHash, 2, 2, "c1", true, appT0, upToDateMark(), requestOn(testHash)), upgrading, appreason.UpdatingInPlace},
		{"a new container, not Ready", inPlacePod(testHash, 2, 2, "c2", false, now, upToDateMark(), requestOn(testHash)), upgrading, ""},
		{"a new container, Ready", inPlacePod(testHash, 2, 2, "c2", true, now, upToDateMark(), requestOn(testHash)), upgraded, ""},
		{"and then", inPlacePod(testHash, 2, 2, "c2", true, now, upToDateMark(), requestOn(testHash)), upgraded, ""},
	}
	for _, s := range steps {
		app := look(r, mem, now, s.pod)
		if app.GetPhase() != s.want || s.reason != "" && app.GetReason() != s.reason {
			t.Fatalf("%s: got %s (%s: %s), want %s %s", s.name, app.GetPhase(), app.GetReason(), app.GetMessage(), s.want, s.reason)
		}
	}
}

// TestAppShowsARefusedRequest: a request the controller will not carry out
// is FAILED, UpgradeRequestRefused, saying why: another revision offered
// since, or the offer withdrawn when the rollout halted.
func TestAppShowsARefusedRequest(t *testing.T) {
	r := phaseRule{deadline: health.DefaultDeadline}
	halted := withCondition(corev1.PodCondition{Type: podcondition.NeedUpgrade, Status: corev1.ConditionFalse, Reason: podcondition.ReasonRolloutHalted,
		Message: podcondition.FailureMessage(testHash, "rollout halted: 2 nodes failed (max-failed 2)")})
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"a newer revision":   {inPlacePod("r1", 1, 1, "c1", true, appT0, needs("newer"), offeredInPlace("newer"), requestOn(testHash)), "revision newer is offered now"},
		"the rollout halted": {inPlacePod("r1", 1, 1, "c1", true, appT0, halted, requestOn(testHash)), "RolloutHalted"},
	} {
		app := look(r, &appMemory{}, appT0.Add(time.Minute), tc.pod)
		if app.GetPhase() != failed || app.GetReason() != appreason.UpgradeRequestRefused || !strings.Contains(app.GetMessage(), tc.want) {
			t.Errorf("%s: got %s (%s: %s), want FAILED, %s, naming %q", name, app.GetPhase(), app.GetReason(), app.GetMessage(), appreason.UpgradeRequestRefused, tc.want)
		}
	}
}

// TestUpgradeInPlaceThroughGRPC: the same over gRPC, with the caller named
// in the request.
func TestUpgradeInPlaceThroughGRPC(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, dsPod("p", offeredInPlace(testHash)))
	if _, err := f.rpc.Upgrade(context.Background(), &edgeotav1.UpgradeRequest{Namespace: "default", Name: "p"}); err != nil {
		t.Fatalf("Upgrade: %v", err)
	}
	for _, a := range f.writes() {
		if a.GetVerb() == "delete" {
			t.Errorf("got a delete of %s, want the request alone", a.(k8stesting.DeleteActionImpl).GetName())
		}
	}
}
