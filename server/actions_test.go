package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/podcondition"
)

// writes returns the fake API server's mutating actions on pods.
func (f *fixture) writes() []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range f.client.Actions() {
		if a.GetResource().Resource == "pods" && (a.GetVerb() == "delete" || a.GetVerb() == "patch" || a.GetVerb() == "update") {
			out = append(out, a)
		}
	}
	return out
}

func TestUpgradeDeletesWithUIDAndResourceVersionPreconditions(t *testing.T) {
	t.Parallel()
	pod := dsPod("p")
	f := newFixture(t, fixtureOptions{}, pod)
	if _, err := f.rpc.Upgrade(context.Background(), &edgeotav1.UpgradeRequest{Namespace: "default", Name: "p"}); err != nil {
		t.Fatalf("Upgrade: %v", err)
	}
	writes := f.writes()
	if len(writes) != 1 {
		t.Fatalf("got %d writes (%v), want 1 delete", len(writes), writes)
	}
	del, ok := writes[0].(k8stesting.DeleteActionImpl)
	if !ok {
		t.Fatalf("got %T, want a delete", writes[0])
	}
	pre := del.DeleteOptions.Preconditions
	if pre == nil || pre.UID == nil || *pre.UID != pod.UID || pre.ResourceVersion == nil || *pre.ResourceVersion != pod.ResourceVersion {
		t.Errorf("got preconditions %+v, want UID %s and resourceVersion %s", pre, pod.UID, pod.ResourceVersion)
	}
}

// TestLiveReadsAreNodeScoped: the agent reads one pod live as a list of its
// node's pods by name (the one read of a single pod a node's identity may
// make, and one that finds a pod gone instead of being refused), never with a
// GET; a pod not on this node is looked for with a dry-run delete that no
// pod's UID can pass, which deletes nothing.
func TestLiveReadsAreNodeScoped(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, dsPod("p"), dsPod("q", onNode("edge-2")))
	f.client.ClearActions()
	if _, err := f.rpc.ImagePull(context.Background(), &edgeotav1.ImagePullRequest{Namespace: "default", Name: "p"}); err != nil {
		t.Fatalf("ImagePull of this node's pod: %v", err)
	}
	for _, name := range []string{"q", "ghost"} {
		if _, err := f.rpc.Upgrade(context.Background(), &edgeotav1.UpgradeRequest{Namespace: "default", Name: name}); err == nil {
			t.Fatalf("Upgrade of %s: got nil, want a refusal", name)
		}
	}
	var reads, probes int
	for _, a := range f.client.Actions() {
		switch a := a.(type) {
		case k8stesting.GetActionImpl:
			t.Errorf("got a GET of pod %s, want lists by name", a.GetName())
		case k8stesting.ListActionImpl:
			if liveRead(a) {
				reads++
				if node, ok := a.GetListRestrictions().Fields.RequiresExactMatch("spec.nodeName"); !ok || node != testNode {
					t.Errorf("got a live read with field selector %s, want it scoped to spec.nodeName=%s", a.GetListRestrictions().Fields, testNode)
				}
			}
		case k8stesting.DeleteActionImpl:
			probes++
			pre := a.DeleteOptions.Preconditions
			if len(a.DeleteOptions.DryRun) != 1 || a.DeleteOptions.DryRun[0] != metav1.DryRunAll || pre == nil || pre.UID == nil || *pre.UID != probeUID {
				t.Errorf("got a delete of %s with %+v, want a dry run with precondition UID %s", a.GetName(), a.DeleteOptions, probeUID)
			}
		}
	}
	if reads != 3 || probes != 2 {
		t.Errorf("got %d live reads and %d probes, want 3 and 2", reads, probes)
	}
	if _, err := f.client.Tracker().Get(podsGVR, "default", "q"); err != nil {
		t.Errorf("another node's pod after the probe: %v, want it untouched", err)
	}
}

// patchedCondition decodes the one condition a status patch writes.
func patchedCondition(t *testing.T, a k8stesting.Action) (uid string, cond map[string]any) {
	t.Helper()
	p, ok := a.(k8stesting.PatchActionImpl)
	if !ok || p.GetSubresource() != "status" {
		t.Fatalf("got %v, want a patch of pods/status", a)
	}
	var body struct {
		Metadata struct{ UID string } `json:"metadata"`
		Status   struct {
			Conditions []map[string]any `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
		t.Fatalf("decoding patch %s: %v", p.GetPatch(), err)
	}
	if len(body.Status.Conditions) != 1 {
		t.Fatalf("got %d conditions in patch %s, want exactly 1", len(body.Status.Conditions), p.GetPatch())
	}
	return body.Metadata.UID, body.Status.Conditions[0]
}

func TestImagePullPatchesOnlyItsConditionOnce(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, dsPod("p"))
	resp := f.do(http.MethodPost, "/openyurt.io/v1/namespaces/default/pods/p/imagepull", "")
	if resp.status != http.StatusOK {
		t.Fatalf("got %d %q, want 200", resp.status, resp.body)
	}
	writes := f.writes()
	if len(writes) != 1 {
		t.Fatalf("got %d writes, want 1 status patch", len(writes))
	}
	uid, cond := patchedCondition(t, writes[0])
	if uid != "uid-p" {
		t.Errorf("got UID %q in the patch, want uid-p (guards against a replaced pod)", uid)
	}
	want := map[string]string{"type": "PodImageReady", "status": "False", "reason": "PullImageRequested", "message": testTarget}
	for k, v := range want {
		if cond[k] != v {
			t.Errorf("got %s=%v, want %q", k, cond[k], v)
		}
	}

	// The fake API server applied the patch: the pod now has the request and
	// keeps its other conditions; asking again changes nothing.
	got, err := f.client.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !podcondition.IsTrue(&got.Status, podcondition.NeedUpgrade) || !podcondition.IsTrue(&got.Status, corev1.PodReady) {
		t.Errorf("got conditions %+v, want PodNeedUpgrade and Ready kept", got.Status.Conditions)
	}
	f.client.ClearActions()
	if resp := f.do(http.MethodPost, "/openyurt.io/v1/namespaces/default/pods/p/imagepull", ""); resp.status != http.StatusOK {
		t.Fatalf("second request: got %d %q, want 200", resp.status, resp.body)
	}
	if writes := f.writes(); len(writes) != 0 {
		t.Errorf("second request: got writes %v, want none", writes)
	}
}

func TestImagePullIdempotence(t *testing.T) {
	cases := []struct {
		name      string
		existing  *corev1.PodCondition
		wantPatch bool
	}{
		{name: "no pull yet", wantPatch: true},
		{name: "already requested for the target", existing: ptr(imageReady(corev1.ConditionFalse, podcondition.ReasonPullImageRequested, testTarget))},
		{name: "already pulled for the target", existing: ptr(imageReady(corev1.ConditionTrue, podcondition.ReasonPullImageSuccess, testTarget))},
		{name: "failed for the target asks again", existing: ptr(imageReady(corev1.ConditionFalse, podcondition.ReasonPullImageFail, testTarget)), wantPatch: true},
		{name: "pulled for an older revision asks again", existing: ptr(imageReady(corev1.ConditionTrue, podcondition.ReasonPullImageSuccess, "controllerrevision: older")), wantPatch: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []podOption
			if tc.existing != nil {
				opts = append(opts, withCondition(*tc.existing))
			}
			f := newFixture(t, fixtureOptions{}, []runtime.Object{dsPod("p", opts...)}...)
			if _, err := f.rpc.ImagePull(context.Background(), &edgeotav1.ImagePullRequest{Namespace: "default", Name: "p"}); err != nil {
				t.Fatalf("ImagePull: %v", err)
			}
			if got := len(f.writes()) == 1; got != tc.wantPatch {
				t.Errorf("got patch %v (writes %v), want %v", got, f.writes(), tc.wantPatch)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
