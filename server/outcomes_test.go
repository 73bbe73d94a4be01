package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/podcondition"
)

// call is one of the acting RPCs on one pod, reachable over REST and gRPC.
type call struct {
	name string // the REST verb: "upgrade", "imagepull", "hold" or "release"
	// method and path are its REST request for the pod's namespace and name.
	method string
	path   func(ns, name string) string
	rpc    func(context.Context, edgeotav1.OTAServiceClient, string, string) error
}

var (
	upgradeCall = call{"upgrade", http.MethodPost, openYurtPath("upgrade"), func(ctx context.Context, c edgeotav1.OTAServiceClient, ns, name string) error {
		_, err := c.Upgrade(ctx, &edgeotav1.UpgradeRequest{Namespace: ns, Name: name})
		return err
	}}
	imagePullCall = call{"imagepull", http.MethodPost, openYurtPath("imagepull"), func(ctx context.Context, c edgeotav1.OTAServiceClient, ns, name string) error {
		_, err := c.ImagePull(ctx, &edgeotav1.ImagePullRequest{Namespace: ns, Name: name})
		return err
	}}
	holdCall = call{"hold", http.MethodPost, holdPathOf("?duration=1h&reason=driving"), func(ctx context.Context, c edgeotav1.OTAServiceClient, ns, name string) error {
		_, err := c.Hold(ctx, &edgeotav1.HoldRequest{Namespace: ns, Name: name, Duration: "1h", Reason: "driving"})
		return err
	}}
	releaseCall = call{"release", http.MethodDelete, holdPathOf(""), func(ctx context.Context, c edgeotav1.OTAServiceClient, ns, name string) error {
		_, err := c.ReleaseHold(ctx, &edgeotav1.ReleaseHoldRequest{Namespace: ns, Name: name})
		return err
	}}
	// everyCall is each acting RPC on one pod.
	everyCall = []call{upgradeCall, imagePullCall, holdCall, releaseCall}
)

func openYurtPath(verb string) func(ns, name string) string {
	return func(ns, name string) string {
		return fmt.Sprintf("/openyurt.io/v1/namespaces/%s/pods/%s/%s", ns, name, verb)
	}
}

func holdPathOf(query string) func(ns, name string) string {
	return func(ns, name string) string {
		return fmt.Sprintf("/edgeota.io/v1/namespaces/%s/pods/%s/hold%s", ns, name, query)
	}
}

// failing makes the fake API server answer every verb on pods (and pods/status)
// with err.
// failing makes the API server answer err to every call of verb on pods;
// "read" names the agent's live read of one pod (see liveRead), and leaves
// the pod cache's list alone.
func failing(verb string, err error) func(*fixture) {
	return func(f *fixture) {
		if verb == "read" {
			f.client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) { return liveRead(a), nil, err })
			return
		}
		f.client.PrependReactor(verb, "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, err })
	}
}

var podsResource = schema.GroupResource{Resource: "pods"}

// TestOutcomes drives every row of the contract's outcome table through a real
// listener, over REST and over gRPC, in the order the checks run.
func TestOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		calls     []call
		ns, pod   string
		pods      []*corev1.Pod
		setup     func(*fixture)
		wantCode  codes.Code
		wantHTTP  int
		wantInMsg string
	}{
		{
			name: "namespace not a DNS-1123 label", calls: everyCall,
			ns: "Bad_NS", pod: "p", wantCode: codes.InvalidArgument, wantHTTP: 400, wantInMsg: "invalid pod namespace",
		},
		{
			name: "name not a DNS-1123 subdomain", calls: everyCall,
			ns: "default", pod: "UPPER", wantCode: codes.InvalidArgument, wantHTTP: 400, wantInMsg: "invalid pod name",
		},
		{
			name: "name of 254 characters", calls: []call{upgradeCall},
			ns: "default", pod: strings.Repeat("a", 254), wantCode: codes.InvalidArgument, wantHTTP: 400, wantInMsg: "no more than 253",
		},
		{
			name: "namespace of 64 characters", calls: []call{upgradeCall},
			ns: strings.Repeat("a", 64), pod: "p", wantCode: codes.InvalidArgument, wantHTTP: 400, wantInMsg: "no more than 63",
		},
		{
			name: "dot-dot namespace", calls: everyCall,
			ns: "..", pod: "p", wantCode: codes.InvalidArgument, wantHTTP: 400, wantInMsg: `must not be the path segment ".."`,
		},
		{
			name: "dot name", calls: []call{upgradeCall},
			ns: "default", pod: ".", wantCode: codes.InvalidArgument, wantHTTP: 400, wantInMsg: `must not be the path segment "."`,
		},
		{
			name: "encoded slash in name", calls: everyCall,
			ns: "default", pod: "a%2Fb", wantCode: codes.InvalidArgument, wantHTTP: 400, wantInMsg: "must not contain '/', encoded or not",
		},
		{
			name: "pod not found", calls: everyCall,
			ns: "default", pod: "ghost", wantCode: codes.NotFound, wantHTTP: 404, wantInMsg: "default/ghost: not found",
		},
		{
			name: "pod on another node", calls: everyCall,
			ns: "default", pod: "p", pods: []*corev1.Pod{dsPod("p", onNode("edge-2"))},
			wantCode: codes.PermissionDenied, wantHTTP: 403, wantInMsg: `runs on another node, not on this node "edge-1"`,
		},
		{
			name: "pod being deleted", calls: everyCall,
			ns: "default", pod: "p", pods: []*corev1.Pod{dsPod("p", deleting())},
			wantCode: codes.FailedPrecondition, wantHTTP: 403, wantInMsg: "is being deleted",
		},
		{
			name: "pod not controlled by a DaemonSet", calls: everyCall,
			ns: "default", pod: "p", pods: []*corev1.Pod{dsPod("p", ownedBy("ReplicaSet"))},
			wantCode: codes.InvalidArgument, wantHTTP: 400, wantInMsg: "not controlled by a DaemonSet",
		},
		{
			name: "PodNeedUpgrade missing", calls: []call{upgradeCall, imagePullCall},
			ns: "default", pod: "p", pods: []*corev1.Pod{dsPod("p", withoutCondition(podcondition.NeedUpgrade))},
			wantCode: codes.FailedPrecondition, wantHTTP: 403, wantInMsg: "Pod is not-updatable",
		},
		{
			name: "PodNeedUpgrade False", calls: []call{upgradeCall, imagePullCall},
			ns: "default", pod: "p",
			pods:     []*corev1.Pod{dsPod("p", withCondition(corev1.PodCondition{Type: podcondition.NeedUpgrade, Status: corev1.ConditionFalse, Message: testTarget}))},
			wantCode: codes.FailedPrecondition, wantHTTP: 403, wantInMsg: "PodNeedUpgrade is False",
		},
		{
			name: "a hold needs no newer version offered", calls: []call{holdCall, releaseCall},
			ns: "default", pod: "p", pods: []*corev1.Pod{dsPod("p", withoutCondition(podcondition.NeedUpgrade))},
			wantCode: codes.OK, wantHTTP: 200,
		},
		{
			name: "pull requested for the target revision blocks upgrade", calls: []call{upgradeCall},
			ns: "default", pod: "p",
			pods:     []*corev1.Pod{dsPod("p", withCondition(imageReady(corev1.ConditionFalse, podcondition.ReasonPullImageRequested, testTarget)))},
			wantCode: codes.FailedPrecondition, wantHTTP: 403, wantInMsg: "pre-pull of revision " + testHash,
		},
		{
			name: "failed pull for the target revision blocks upgrade", calls: []call{upgradeCall},
			ns: "default", pod: "p",
			pods:     []*corev1.Pod{dsPod("p", withCondition(imageReady(corev1.ConditionFalse, podcondition.ReasonPullImageFail, testTarget)))},
			wantCode: codes.FailedPrecondition, wantHTTP: 403, wantInMsg: "PullImageFail",
		},
		{
			name: "failed pull with its cause for the target revision blocks upgrade", calls: []call{upgradeCall},
			ns: "default", pod: "p",
			pods:     []*corev1.Pod{dsPod("p", withCondition(imageReady(corev1.ConditionFalse, podcondition.ReasonPullImageFail, podcondition.FailureMessage(testHash, "ErrImagePull: manifest unknown"))))},
			wantCode: codes.FailedPrecondition, wantHTTP: 403, wantInMsg: "PullImageFail",
		},
		{
			name: "pull for an older revision does not block upgrade", calls: []call{upgradeCall},
			ns: "default", pod: "p",
			pods:     []*corev1.Pod{dsPod("p", withCondition(imageReady(corev1.ConditionFalse, podcondition.ReasonPullImageRequested, "controllerrevision: older")))},
			wantCode: codes.OK, wantHTTP: 200,
		},
		{
			name: "pod changed before the delete", calls: []call{upgradeCall},
			ns: "default", pod: "p", pods: []*corev1.Pod{dsPod("p")},
			setup:    failing("delete", apierrors.NewConflict(podsResource, "p", errors.New("Precondition failed: ResourceVersion in precondition: 7, ResourceVersion in object meta: 8"))),
			wantCode: codes.Aborted, wantHTTP: 409, wantInMsg: "changed meanwhile",
		},
		{
			name: "pod deleted by someone else before the delete", calls: []call{upgradeCall},
			ns: "default", pod: "p", pods: []*corev1.Pod{dsPod("p")},
			setup:    failing("delete", apierrors.NewNotFound(podsResource, "p")),
			wantCode: codes.Aborted, wantHTTP: 409, wantInMsg: "deleted by someone else",
		},
		{
			name: "pod replaced before the status patch", calls: []call{imagePullCall, holdCall, releaseCall},
			ns: "default", pod: "p", pods: []*corev1.Pod{dsPod("p", withHold(time.Now().Add(time.Hour), "driving"))},
			setup:    failing("patch", apierrors.NewConflict(podsResource, "p", errors.New("Precondition failed: UID in precondition"))),
			wantCode: codes.Aborted, wantHTTP: 409, wantInMsg: "changed meanwhile",
		},
		{
			name: "pod replaced by a namesake before the status patch", calls: []call{imagePullCall, holdCall, releaseCall},
			ns: "default", pod: "p", pods: []*corev1.Pod{dsPod("p", withHold(time.Now().Add(time.Hour), "driving"))},
			// What the API server answers: the patch's metadata.uid is refused
			// as an immutable field.
			setup: failing("patch", apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", field.ErrorList{
				field.Invalid(field.NewPath("metadata", "uid"), "new-uid", "field is immutable"),
			})),
			wantCode: codes.Aborted, wantHTTP: 409, wantInMsg: "replaced by a namesake",
		},
		{
			name: "API server refuses the delete", calls: []call{upgradeCall},
			ns: "default", pod: "p", pods: []*corev1.Pod{dsPod("p")},
			setup:    failing("delete", apierrors.NewForbidden(podsResource, "p", errors.New("denied by ValidatingAdmissionPolicy 'edgeota-node-scope'"))),
			wantCode: codes.PermissionDenied, wantHTTP: 403, wantInMsg: "edgeota-node-scope",
		},
		{
			name: "API server refuses the status patch", calls: []call{imagePullCall, holdCall, releaseCall},
			ns: "default", pod: "p", pods: []*corev1.Pod{dsPod("p", withHold(time.Now().Add(time.Hour), "driving"))},
			setup:    failing("patch", apierrors.NewForbidden(podsResource, "p", errors.New("cannot patch resource pods/status"))),
			wantCode: codes.PermissionDenied, wantHTTP: 403, wantInMsg: "cannot patch resource pods/status",
		},
		{
			name: "API server refuses the read", calls: everyCall,
			ns: "default", pod: "p", pods: []*corev1.Pod{dsPod("p")},
			setup:    failing("read", apierrors.NewForbidden(podsResource, "p", errors.New("RBAC: list pods not granted"))),
			wantCode: codes.PermissionDenied, wantHTTP: 403, wantInMsg: "RBAC: list pods not granted",
		},
		{
			name: "API server unreachable", calls: everyCall,
			ns: "default", pod: "p", pods: []*corev1.Pod{dsPod("p")},
			setup:    failing("read", errors.New(`Get "https://127.0.0.1:6443/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Dp": dial tcp 127.0.0.1:6443: connect: connection refused`)),
			wantCode: codes.Unavailable, wantHTTP: 503, wantInMsg: "connection refused",
		},
		{
			name: "API server overloaded", calls: []call{upgradeCall},
			ns: "default", pod: "p", pods: []*corev1.Pod{dsPod("p")},
			setup:    failing("delete", apierrors.NewTooManyRequests("too many requests", 1)),
			wantCode: codes.Unavailable, wantHTTP: 503, wantInMsg: "too many requests",
		},
		{
			name: "success", calls: everyCall,
			ns: "default", pod: "p", pods: []*corev1.Pod{dsPod("p")},
			wantCode: codes.OK, wantHTTP: 200,
		},
	}
	for _, tc := range cases {
		for _, c := range tc.calls {
			objs := make([]runtime.Object, 0, len(tc.pods))
			for _, p := range tc.pods {
				objs = append(objs, p)
			}
			t.Run(fmt.Sprintf("%s/%s/REST", tc.name, c.name), func(t *testing.T) {
				f := newFixture(t, fixtureOptions{}, objs...)
				if tc.setup != nil {
					tc.setup(f)
				}
				resp := f.do(c.method, c.path(tc.ns, tc.pod), "")
				if resp.status != tc.wantHTTP {
					t.Errorf("got HTTP %d (%q), want %d", resp.status, resp.body, tc.wantHTTP)
				}
				if !strings.Contains(resp.body, tc.wantInMsg) {
					t.Errorf("got body %q, want it to contain %q", resp.body, tc.wantInMsg)
				}
			})
			t.Run(fmt.Sprintf("%s/%s/gRPC", tc.name, c.name), func(t *testing.T) {
				f := newFixture(t, fixtureOptions{}, objs...)
				if tc.setup != nil {
					tc.setup(f)
				}
				name := tc.pod
				if name == "a%2Fb" {
					name = "a/b" // what a gRPC caller sends for the same intent
				}
				err := c.rpc(context.Background(), f.rpc, tc.ns, name)
				st := status.Convert(err)
				if st.Code() != tc.wantCode {
					t.Errorf("got code %v (%q), want %v", st.Code(), st.Message(), tc.wantCode)
				}
				if !strings.Contains(st.Message(), tc.wantInMsg) {
					t.Errorf("got message %q, want it to contain %q", st.Message(), tc.wantInMsg)
				}
			})
		}
	}
}
