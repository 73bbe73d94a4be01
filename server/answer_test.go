package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/edgeota/edgeota/apiidentity"
	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/rollout"
)

// newChallenge is a fresh challenge for the test pod of that name (its UID
// is "uid-<name>"), as the controller makes it.
func newChallenge(t testing.TB, name string) string {
	t.Helper()
	c, err := podchannel.NewChallenge(types.UID("uid-" + name))
	if err != nil {
		t.Fatal(err)
	}
	return c.String()
}

// challenged puts the challenge on the pod.
func challenged(value string) podOption { return withAnnotation(rollout.ChallengeAnnotation, value) }

// challenge writes a fresh challenge on the pod in the fake API server, past
// the agent, as the controller does, and returns it.
func (f *fixture) challenge(name string) string {
	f.t.Helper()
	obj, err := f.client.Tracker().Get(podsGVR, "default", name)
	if err != nil {
		f.t.Fatal(err)
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	c, err := podchannel.NewChallenge(pod.UID)
	if err != nil {
		f.t.Fatal(err)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[rollout.ChallengeAnnotation] = c.String()
	if err := f.client.Tracker().Update(podsGVR, pod, "default"); err != nil {
		f.t.Fatal(err)
	}
	return c.String()
}

// answerOf is the answer the pod carries in the fake API server ("" for
// none).
func (f *fixture) answerOf(name string) string {
	f.t.Helper()
	obj, err := f.client.Tracker().Get(podsGVR, "default", name)
	if err != nil {
		f.t.Fatalf("reading pod %s: %v", name, err)
	}
	return obj.(*corev1.Pod).Annotations[rollout.AnswerAnnotation]
}

// waitAnswer waits until the pod carries the answer in the fake API server.
func (f *fixture) waitAnswer(name, want string) {
	f.t.Helper()
	eventually(f.t, "pod "+name+" answered "+want, func() bool { return f.answerOf(name) == want })
}

// patchesOf returns the status patches the agent sent for the pod, failed
// attempts included.
func (f *fixture) patchesOf(name string) []k8stesting.PatchActionImpl {
	var out []k8stesting.PatchActionImpl
	for _, a := range f.client.Actions() {
		if p, ok := a.(k8stesting.PatchActionImpl); ok && p.GetResource().Resource == "pods" && p.GetName() == name {
			out = append(out, p)
		}
	}
	return out
}

// answerPatch is what an answer's patch body holds.
type answerPatch struct {
	Metadata struct {
		UID         string             `json:"uid"`
		Annotations map[string]*string `json:"annotations"`
	} `json:"metadata"`
	Status struct {
		Conditions []map[string]any `json:"conditions"`
	} `json:"status"`
}

// answered decodes the answer a patch writes, failing the test unless it is
// a strategic merge patch of pods/status by the agent's field manager,
// with the pod's UID as precondition and the answer as its only change.
func answered(t *testing.T, p k8stesting.PatchActionImpl, uid string) string {
	t.Helper()
	if p.GetSubresource() != "status" || p.GetPatchType() != types.StrategicMergePatchType || p.PatchOptions.FieldManager != FieldManager {
		t.Fatalf("got a %s patch of %q by %q, want a %s patch of pods/status by %q",
			p.GetPatchType(), p.GetSubresource(), p.PatchOptions.FieldManager, types.StrategicMergePatchType, FieldManager)
	}
	var body answerPatch
	if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
		t.Fatalf("decoding patch %s: %v", p.GetPatch(), err)
	}
	answer := body.Metadata.Annotations[rollout.AnswerAnnotation]
	if body.Metadata.UID != uid || len(body.Metadata.Annotations) != 1 || answer == nil || len(body.Status.Conditions) != 0 {
		t.Fatalf("got patch %s, want the UID %s and the answer alone", p.GetPatch(), uid)
	}
	return *answer
}

// answerCount is the agent's edgeota_agent_alive_answers_total for the
// result, from /metrics.
func (f *fixture) answerCount(result string) int {
	f.t.Helper()
	metrics := f.do(http.MethodGet, metricsPath, "")
	prefix := fmt.Sprintf(`edgeota_agent_alive_answers_total{result=%q} `, result)
	for line := range strings.Lines(metrics.body) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			n, err := strconv.Atoi(rest)
			if err != nil {
				f.t.Fatalf("metric line %q: %v", line, err)
			}
			return n
		}
	}
	f.t.Fatalf("no %s… in /metrics:\n%s", prefix, metrics.body)
	return 0
}

// quickRetries has failed answers tried again within milliseconds, so that a
// retry that should not happen shows at once.
func quickRetries(s *Server) {
	s.answers.backoff = wait.Backoff{Duration: time.Millisecond, Factor: 2, Cap: 10 * time.Millisecond, Steps: 1 << 30}
}

// TestChallengeIsAnsweredOnce: a challenge the cache shows is answered with
// one status patch echoing it on that pod, as the agent's field manager, the
// pod's UID as precondition; a second event for the same challenge, the
// cache still showing it unanswered (the watch lagging behind the write),
// writes nothing more. Events are the test's own (a fake watch), and
// another pod's challenge, looked at after them, marks when they have been.
func TestChallengeIsAnsweredOnce(t *testing.T) {
	watcher := watch.NewFakeWithChanSize(1, false)
	f := newFixture(t, fixtureOptions{watcher: watcher}, dsPod("p"), dsPod("q"))
	for _, result := range []string{answerWritten, answerFailed, answerRefused, answerGone} {
		if n := f.answerCount(result); n != 0 {
			t.Errorf("before any challenge: got %d %s answers, want 0", n, result)
		}
	}

	c := newChallenge(t, "p")
	pod := dsPod("p", challenged(c))
	pod.ResourceVersion = "8"
	watcher.Modify(pod)
	f.waitAnswer("p", c)
	patches := f.patchesOf("p")
	if len(patches) != 1 {
		t.Fatalf("got %d patches of p, want 1", len(patches))
	}
	if got := answered(t, patches[0], "uid-p"); got != c {
		t.Errorf("got answer %q, want the challenge %q", got, c)
	}

	again := dsPod("p", challenged(c), withCondition(corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}))
	again.ResourceVersion = "9"
	watcher.Modify(again)
	cq := newChallenge(t, "q")
	q := dsPod("q", challenged(cq))
	q.ResourceVersion = "10"
	watcher.Modify(q)
	f.waitAnswer("q", cq)
	if n := len(f.patchesOf("p")); n != 1 {
		t.Errorf("after a second event for the same challenge: got %d patches of p, want 1", n)
	}
	if n := f.answerCount(answerWritten); n != 2 {
		t.Errorf("got %d answers written, want 2", n)
	}
}

// TestChallengesNotDueAreNotAnswered: no write for a pod without a
// challenge, with another pod's, with one that does not parse, or with one
// answered already; a challenge written afterwards on another pod is
// answered, and marks when they have been looked at.
func TestChallengesNotDueAreNotAnswered(t *testing.T) {
	c := newChallenge(t, "answered")
	f := newFixture(t, fixtureOptions{},
		dsPod("none"),
		dsPod("others", challenged(newChallenge(t, "p"))),
		dsPod("malformed", challenged("uid-malformed")),
		dsPod("overlong", challenged("uid-overlong/"+strings.Repeat("A", 200))),
		dsPod("answered", challenged(c), withAnnotation(rollout.AnswerAnnotation, c)),
		dsPod("p"))
	want := f.challenge("p")
	f.waitAnswer("p", want)
	if w := f.writes(); len(w) != 1 || w[0].(k8stesting.PatchActionImpl).GetName() != "p" {
		t.Errorf("got writes %v, want p's answer alone", w)
	}
}

// TestAnswerRetriedUntilTheAPIServerAnswers: an answer that cannot be
// written (the link cut) is tried again, spaced by the backoff, while the
// challenge stands; a new challenge replaces the one pending; once the link
// is back the new one is answered, with the one write that succeeds.
func TestAnswerRetriedUntilTheAPIServerAnswers(t *testing.T) {
	l := &link{}
	l.cut.Store(true)
	f := newFixture(t, fixtureOptions{link: l, tweak: quickRetries}, dsPod("p"))
	first := f.challenge("p")
	eventually(t, "two failed attempts at the answer", func() bool { return len(f.patchesOf("p")) >= 2 })

	second := f.challenge("p")
	eventually(t, "an attempt at the new challenge", func() bool {
		for _, p := range f.patchesOf("p") {
			if answered(t, p, "uid-p") == second {
				return true
			}
		}
		return false
	})
	l.cut.Store(false)
	f.waitAnswer("p", second)
	if n := f.answerCount(answerWritten); n != 1 {
		t.Errorf("got %d answers written, want 1", n)
	}
	if n := f.answerCount(answerFailed); n < 3 {
		t.Errorf("got %d failed attempts, want at least 3 (two at %s, one at the new challenge)", n, first)
	}
}

// TestAnswerBackoff: the delay before each new attempt at an answer starts
// at a second and doubles to its cap, each with up to half again of jitter:
// never a spin, never more than the cap and its jitter apart.
func TestAnswerBackoff(t *testing.T) {
	b := answerBackoff
	want := time.Second
	for i := range 8 {
		if got := b.Step(); got < want || got > want+want/2 {
			t.Errorf("attempt %d: got a delay of %s, want %s to %s", i+1, got, want, want+want/2)
		}
		want = min(2*want, answerBackoff.Cap)
	}
	if answerBackoff.Cap != 8*time.Second {
		t.Errorf("got a cap of %s, want 8s: about a kubelet's Lease renewal", answerBackoff.Cap)
	}
}

// TestRefusedAnswerIsNotRetried: an answer the API server refuses (403) is
// not tried again, not even when the pod changes or retries are quick, and
// the refusal is logged once for the pod, saying what it means; a new
// challenge on the pod is tried once more, logged at -v=2 only.
func TestRefusedAnswerIsNotRetried(t *testing.T) {
	logger, refusals := capture(t, refusedAnswerLog)
	refuseP := func(client *fake.Clientset) {
		client.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.(k8stesting.PatchAction).GetName() != "p" {
				return false, nil, nil
			}
			return true, nil, apierrors.NewForbidden(podsResource, "p", errors.New(`node "edge-1" can only update pod status for pods with spec.nodeName set to itself`))
		})
	}
	f := newFixture(t, fixtureOptions{reactors: refuseP, tweak: quickRetries, logger: &logger}, dsPod("p"), dsPod("q"))
	f.challenge("p")
	f.setCondition("p", corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue})
	f.waitAnswer("q", f.challenge("q"))
	if n := len(f.patchesOf("p")); n != 1 {
		t.Errorf("got %d patches of p after a refusal and another event, want 1", n)
	}

	f.challenge("p")
	f.waitAnswer("q", f.challenge("q"))
	if n := len(f.patchesOf("p")); n != 2 {
		t.Errorf("got %d patches of p after a second challenge, want 2", n)
	}
	if n := f.answerCount(answerRefused); n != 2 {
		t.Errorf("got %d refused answers, want 2", n)
	}
	logged := refusals()
	if len(logged) != 1 {
		t.Fatalf("got %d refusals logged, want 1: %v", len(logged), logged)
	}
	if kv := fmt.Sprint(logged[0]...); !strings.Contains(kv, "default/p") || !strings.Contains(kv, "Lease renewal instead") {
		t.Errorf("got %q, want the pod and what the refusal means", kv)
	}
}

// TestPendingAnswerDroppedWithThePod: an answer waiting for its retry is
// dropped once the pod is gone: its retry, come after the pod's deletion and
// the link's return, writes nothing.
func TestPendingAnswerDroppedWithThePod(t *testing.T) {
	l := &link{}
	l.cut.Store(true)
	f := newFixture(t, fixtureOptions{link: l, tweak: func(s *Server) {
		// The retry waits for the test, which fires it below.
		s.answers.backoff = wait.Backoff{Duration: time.Hour, Steps: 1}
	}}, dsPod("p"), dsPod("q"))
	f.challenge("p")
	eventually(t, "a failed attempt at the answer", func() bool { return f.answerCount(answerFailed) == 1 })
	f.deletePod("p")
	eventually(t, "the cache to see p gone", func() bool {
		_, err := f.svc.lister.Pods("default").Get("p")
		return apierrors.IsNotFound(err)
	})
	l.cut.Store(false)
	f.svc.answers.queue.Add(cache.ObjectName{Namespace: "default", Name: "p"}) // the retry's timer
	f.waitAnswer("q", f.challenge("q"))
	if n := len(f.patchesOf("p")); n != 1 {
		t.Errorf("got %d patches of p, want the one attempt before it was deleted", n)
	}
	if n := f.answerCount(answerWritten); n != 1 {
		t.Errorf("got %d answers written, want q's alone", n)
	}
}

// TestNoAnswerFromTheStoredView: restarted in a dead zone, the agent serves
// the stored view, where a challenge stands unanswered, and answers nothing
// (not even an attempt) until its live cache has synced; then it answers the
// challenge the API server shows, not the stored one.
func TestNoAnswerFromTheStoredView(t *testing.T) {
	t.Parallel()
	dir := openStateDir(t)
	stale := newChallenge(t, "p")
	l := &link{}
	l.cut.Store(true)
	first := newFixture(t, fixtureOptions{stateDir: dir, link: l}, dsPod("p", challenged(stale)))
	eventually(t, "a failed attempt at the answer", func() bool { return first.answerCount(answerFailed) >= 1 })
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}

	live := newChallenge(t, "p")
	identity := NewAPIIdentity()
	f := newFixture(t, fixtureOptions{stateDir: dir, identity: identity}, dsPod("p", challenged(live)))
	list, err := f.rpc.ListPods(context.Background(), &edgeotav1.ListPodsRequest{})
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	if items := list.GetItems(); len(items) != 1 || items[0].GetMetadata().GetAnnotations()[rollout.ChallengeAnnotation] != stale ||
		items[0].GetMetadata().GetAnnotations()[rollout.AnswerAnnotation] != "" {
		t.Fatalf("got ListPods %v, want the stored view: p with its challenge unanswered", list)
	}

	identity.Settle(apiidentity.Settled{Mode: apiidentity.Node, User: apiidentity.NodeUser(testNode)}, typedClient{f.client})
	f.waitAnswer("p", live)
	for _, p := range f.patchesOf("p") {
		if got := answered(t, p, "uid-p"); got != live {
			t.Errorf("got an answer %q, want only the live challenge %q", got, live)
		}
	}
	if n := f.answerCount(answerFailed); n != 0 {
		t.Errorf("got %d failed attempts, want none: nothing is tried before the cache syncs", n)
	}
}

// TestAnswerOutcomeOfEachError: a missing or replaced pod ends the answer
// (gone); a refusal ends it (refused); anything that may pass is tried again.
func TestAnswerOutcomeOfEachError(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	podKind := schema.GroupKind{Kind: "Pod"}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, answerWritten},
		{apierrors.NewNotFound(pods, "p"), answerGone},
		{apierrors.NewConflict(pods, "p", errors.New("uid mismatch")), answerGone},
		{apierrors.NewInvalid(podKind, "p", field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "uid-2", "field is immutable")}), answerGone},
		{apierrors.NewForbidden(pods, "p", errors.New("NodeRestriction")), answerRefused},
		{apierrors.NewInvalid(podKind, "p", field.ErrorList{field.TooLong(field.NewPath("metadata", "annotations"), "", 262144)}), answerRefused},
		{apierrors.NewBadRequest("bad"), answerRefused},
		{errLinkDown, answerFailed},
		{context.DeadlineExceeded, answerFailed},
		{apierrors.NewServiceUnavailable("etcd"), answerFailed},
		{apierrors.NewTooManyRequests("slow down", 1), answerFailed},
		{apierrors.NewTimeoutError("slow", 1), answerFailed},
		{apierrors.NewUnauthorized("expired token"), answerFailed},
		{apierrors.NewInternalError(errors.New("webhook")), answerFailed},
	} {
		if got := answerOutcome(tc.err); got != tc.want {
			t.Errorf("%v: got %s, want %s", tc.err, got, tc.want)
		}
	}
}

// cutPods is a node's pods over a link that may be cut: while cut, every
// status patch fails as a dead link's request does.
type cutPods struct {
	Pods
	cut *atomic.Bool
}

func (p cutPods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error) {
	if p.cut.Load() {
		return nil, errLinkDown
	}
	return p.Pods.Patch(ctx, name, pt, data, opts, subresources...)
}

// cutClient is a node agent's Client whose link may be cut.
type cutClient struct {
	Client
	cut *atomic.Bool
}

func (c cutClient) Pods(namespace string) Pods { return cutPods{c.Client.Pods(namespace), c.cut} }

// TestOneAnswererForManyNodes: one Answerer over one cache of several nodes'
// pods answers, by the agent's rule, each challenge on a node it has a
// client for, through that node's client; a node whose link is cut is tried
// again with backoff and answered once the link is back; a node it has no
// client for is never answered.
func TestOneAnswererForManyNodes(t *testing.T) {
	pods := map[string]*corev1.Pod{}
	var objs []runtime.Object
	for _, node := range []string{"edge-a", "edge-b", "edge-c"} {
		p := dsPod("p-"+node, onNode(node))
		c, err := podchannel.NewChallenge(p.UID)
		if err != nil {
			t.Fatal(err)
		}
		challenged(c.String())(p)
		pods[node] = p
		objs = append(objs, p)
	}
	client := fake.NewClientset(objs...)
	api := typedClient{client}
	informer := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return api.Pods(metav1.NamespaceAll).List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return api.Pods(metav1.NamespaceAll).Watch(ctx, opts)
		},
	}, api), &corev1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	cutB := &atomic.Bool{}
	cutB.Store(true)
	clients := map[string]Client{"edge-a": api, "edge-b": cutClient{api, cutB}}
	a := NewAnswerer(AnswererOptions{Pods: informer, Workers: 4, ClientFor: func(node string) Client { return clients[node] }})
	a.backoff = wait.Backoff{Duration: time.Millisecond, Factor: 2, Cap: 10 * time.Millisecond, Steps: 1 << 30}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.Run(ctx.Done())
	go a.Run(ctx)

	answerOf := func(node string) string {
		obj, err := client.Tracker().Get(podsGVR, "default", pods[node].Name)
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*corev1.Pod).Annotations[rollout.AnswerAnnotation]
	}
	challengeOf := func(node string) string { return pods[node].Annotations[rollout.ChallengeAnnotation] }
	eventually(t, "edge-a answered", func() bool { return answerOf("edge-a") == challengeOf("edge-a") })
	eventually(t, "edge-b tried twice over its cut link", func() bool {
		return testutil.ToFloat64(a.results.WithLabelValues(answerFailed)) >= 2
	})
	cutB.Store(false)
	eventually(t, "edge-b answered once its link is back", func() bool { return answerOf("edge-b") == challengeOf("edge-b") })
	if got := answerOf("edge-c"); got != "" {
		t.Errorf("got edge-c answered %q, want no answer: no client acts as its agent", got)
	}
	for _, action := range client.Actions() {
		if p, ok := action.(k8stesting.PatchAction); ok && p.GetName() == pods["edge-c"].Name {
			t.Errorf("got %s patched, want it left alone", p.GetName())
		}
	}
	if got := testutil.ToFloat64(a.results.WithLabelValues(answerWritten)); got != 2 {
		t.Errorf("got %v answers written, want 2", got)
	}
}
