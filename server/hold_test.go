package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/ownerauth"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/rollout"
)

const holdPath = "/edgeota.io/v1/namespaces/default/pods/p/hold"

// withHold puts an owner's hold on the pod, until the time, for the reason.
func withHold(until time.Time, reason string) podOption {
	value, err := podchannel.Encode(&podchannel.Hold{Until: metav1.NewTime(until), Reason: reason, By: "owner", At: metav1.NewTime(until.Add(-time.Hour))})
	if err != nil {
		panic(err) // a hold always encodes
	}
	return withAnnotation(rollout.HoldAnnotation, value)
}

// podHold is the hold the pod carries in the fake API server, nil without
// one.
func (f *fixture) podHold(name string) *podchannel.Hold {
	f.t.Helper()
	obj, err := f.client.Tracker().Get(podsGVR, "default", name)
	if err != nil {
		f.t.Fatalf("reading pod %s: %v", name, err)
	}
	h, err := podchannel.HoldOf(obj.(*corev1.Pod))
	if err != nil {
		f.t.Fatalf("the hold of pod %s: %v", name, err)
	}
	return h
}

// aheadClock is an APIServerClock whose API server is d ahead of this node.
func aheadClock(d time.Duration) *APIServerClock {
	c := &APIServerClock{}
	c.observe(time.Now().Add(d).UTC().Format(http.TimeFormat))
	return c
}

// near reports whether got is within a few seconds of want: a clock read a
// moment apart, rounded to whole seconds.
func near(got, want time.Time) bool {
	d := got.Sub(want)
	return d > -3*time.Second && d < 3*time.Second
}

// TestHoldWritesTheHold: a hold asked over REST for a duration, in curl's
// spelling, is written on the pod's status (its end, reason, the caller and
// when), and answered in text and JSON; over gRPC until a time, the end as
// given, whole seconds.
func TestHoldWritesTheHold(t *testing.T) {
	f := newFixture(t, fixtureOptions{auth: ownerauth.Authenticator{Tokens: mustTokens(t, testTokens)}}, dsPod("p"))
	asked := time.Now()
	resp := f.do(http.MethodPost, holdPath+"?duration=2h&reason=driving", "*/*", "Authorization", "Bearer upgrader-token")
	h := f.podHold("p")
	if h == nil {
		t.Fatalf("got %d %q and no hold on the pod, want one", resp.status, resp.body)
	}
	want := fmt.Sprintf("Held pod default/p until %s\n", h.Until.UTC().Format(time.RFC3339))
	if resp.status != http.StatusOK || resp.body != want || resp.contentType != contentTypeText {
		t.Errorf("got %d %q (%s), want 200 %q in text", resp.status, resp.body, resp.contentType, want)
	}
	if !near(h.Until.Time, asked.Add(2*time.Hour)) || h.Until.Before(&metav1.Time{Time: asked.Add(2 * time.Hour).Truncate(time.Second)}) ||
		h.Reason != "driving" || h.By != "uli" || !near(h.At.Time, asked) {
		t.Errorf("got hold %+v, want two hours from %s (at least), driving, by uli, at now", h, asked)
	}
	writes := f.writes()
	if len(writes) != 1 || writes[0].GetSubresource() != "status" {
		t.Fatalf("got writes %v, want one pods/status patch", writes)
	}

	asJSON := f.do(http.MethodPost, holdPath+"?duration=90m", "application/json", "Authorization", "Bearer upgrader-token")
	var body struct {
		Message string   `json:"message"`
		Until   string   `json:"until"`
		Pods    []string `json:"pods"`
		Queued  bool     `json:"queued"`
	}
	if err := json.Unmarshal([]byte(asJSON.body), &body); err != nil || asJSON.status != http.StatusOK || body.Queued ||
		!strings.HasPrefix(body.Message, "Held pod default/p until ") || len(body.Pods) != 1 || body.Pods[0] != "default/p" {
		t.Errorf("JSON: got %d %q (%v), want 200 with the message, the end and the pod", asJSON.status, asJSON.body, err)
	}
	if h := f.podHold("p"); h.Reason != "" || h.Until.UTC().Format(time.RFC3339Nano) != body.Until {
		t.Errorf("got hold %+v after holding again, want the new hold replacing the old, ending at %s", h, body.Until)
	}

	until := time.Now().Add(5 * time.Hour).Truncate(time.Second).Add(700 * time.Millisecond)
	got, err := f.rpc.Hold(withToken(context.Background(), "upgrader-token"),
		&edgeotav1.HoldRequest{Namespace: "default", Name: "p", Until: timestamppb.New(until), Reason: "charging at a customer's"})
	if err != nil {
		t.Fatalf("gRPC Hold: %v", err)
	}
	if h := f.podHold("p"); !h.Until.Time.Equal(until.Truncate(time.Second)) || h.Reason != "charging at a customer's" ||
		!got.GetUntil().AsTime().Equal(h.Until.Time) || got.GetQueued() {
		t.Errorf("got hold %+v, answer %v; want it until %s, whole seconds", h, got, until.Truncate(time.Second))
	}
}

// TestHoldUsesTheAPIServersClock: the end of a hold is counted on the API
// server's clock (three hours ahead of this node's here), never the node's;
// an until checked against it too.
func TestHoldUsesTheAPIServersClock(t *testing.T) {
	const ahead = 3 * time.Hour
	f := newFixture(t, fixtureOptions{tweak: func(s *Server) { s.clock = aheadClock(ahead) }}, dsPod("p"))
	resp, err := f.rpc.Hold(context.Background(), &edgeotav1.HoldRequest{Namespace: "default", Name: "p", Duration: "2h"})
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Now().Add(ahead + 2*time.Hour); !near(resp.GetUntil().AsTime(), want) || !near(f.podHold("p").Until.Time, want) {
		t.Errorf("got the end %s, want two hours from the API server's now, %s", resp.GetUntil().AsTime(), want)
	}
	if h := f.podHold("p"); !near(h.At.Time, time.Now().Add(ahead)) {
		t.Errorf("got asked at %s, want the API server's now", h.At)
	}
	// An hour from the node's now has passed by the API server's clock.
	_, err = f.rpc.Hold(context.Background(), &edgeotav1.HoldRequest{Namespace: "default", Name: "p", Until: timestamppb.New(time.Now().Add(time.Hour))})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "has passed: it is") {
		t.Errorf("until an hour from the node's now: got %v, want InvalidArgument: it has passed by the API server's clock", err)
	}
	// 30 days from the node's now is 30 days less three hours from the API
	// server's: allowed.
	if _, err := f.rpc.Hold(context.Background(), &edgeotav1.HoldRequest{Namespace: "default", Name: "p",
		Until: timestamppb.New(time.Now().Add(30 * 24 * time.Hour))}); err != nil {
		t.Errorf("until 30 days from the node's now: got %v, want it held", err)
	}
}

// TestHoldRefusesBadInput: every malformed hold is InvalidArgument / 400
// with a message saying what is wrong, on both protocols, before anything
// is read or written.
func TestHoldRefusesBadInput(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, dsPod("p"))
	past := time.Now().Add(-time.Minute)
	far := time.Now().Add(31 * 24 * time.Hour)
	long := strings.Repeat("x", podchannel.MaxReasonLength+1)
	for _, tc := range []struct {
		name  string
		query string // REST, after ?
		req   *edgeotav1.HoldRequest
		want  string
	}{
		{"neither until nor duration", "reason=driving", &edgeotav1.HoldRequest{Reason: "driving"}, "give the hold's end (until, RFC 3339"},
		{"both until and duration", "duration=2h&until=" + url.QueryEscape(far.Format(time.RFC3339)),
			&edgeotav1.HoldRequest{Duration: "2h", Until: timestamppb.New(far)}, "not both"},
		{"until in the past", "until=" + url.QueryEscape(past.Format(time.RFC3339)), &edgeotav1.HoldRequest{Until: timestamppb.New(past)}, "has passed"},
		{"until more than 30 days ahead", "until=" + url.QueryEscape(far.Format(time.RFC3339)), &edgeotav1.HoldRequest{Until: timestamppb.New(far)},
			"more than 30 days (720h) ahead"},
		{"until not RFC 3339", "until=tomorrow", nil, `parsing time "tomorrow"`},
		{"until out of range", "", &edgeotav1.HoldRequest{Until: &timestamppb.Timestamp{Seconds: 1 << 62}}, "until:"},
		{"zero duration", "duration=0s", &edgeotav1.HoldRequest{Duration: "0s"}, "must be more than zero"},
		{"negative duration", "duration=-1h", &edgeotav1.HoldRequest{Duration: "-1h"}, "want one or more of a number and a unit"},
		{"duration without unit", "duration=2", &edgeotav1.HoldRequest{Duration: "2"}, "want one or more of a number and a unit"},
		{"duration of 31 days", "duration=31d", &edgeotav1.HoldRequest{Duration: "31d"}, "more than 30 days (720h), the longest hold"},
		{"absurd duration", "duration=99999999999999999999h", &edgeotav1.HoldRequest{Duration: "99999999999999999999h"}, "the longest hold"},
		{"reason too long", "duration=1h&reason=" + long, &edgeotav1.HoldRequest{Duration: "1h", Reason: long}, "reason of 257 bytes, more than 256"},
		{"reason with a newline", "duration=1h&reason=a%0Ab", &edgeotav1.HoldRequest{Duration: "1h", Reason: "a\nb"}, "control characters"},
		{"reason with an escape sequence", "duration=1h&reason=a%1B%5B31mb", &edgeotav1.HoldRequest{Duration: "1h", Reason: "a\x1b[31mb"}, "control characters"},
		{"reason not UTF-8", "duration=1h&reason=a%FFb", nil, "not valid UTF-8"},
	} {
		if tc.query != "" {
			t.Run(tc.name+"/REST", func(t *testing.T) {
				resp := f.do(http.MethodPost, holdPath+"?"+tc.query, "")
				if resp.status != http.StatusBadRequest || !strings.Contains(resp.body, tc.want) || strings.Count(resp.body, "\n") != 1 {
					t.Errorf("got %d %q, want 400, one line containing %q", resp.status, resp.body, tc.want)
				}
				asJSON := f.do(http.MethodPost, holdPath+"?"+tc.query, "application/json")
				if s := decodeStatus(t, asJSON); asJSON.status != http.StatusBadRequest || *s.Code != int(codes.InvalidArgument) || !strings.Contains(*s.Message, tc.want) {
					t.Errorf("JSON: got %d %q, want 400 with code 3", asJSON.status, asJSON.body)
				}
			})
		}
		if tc.req != nil {
			t.Run(tc.name+"/gRPC", func(t *testing.T) {
				tc.req.Namespace, tc.req.Name = "default", "p"
				_, err := f.rpc.Hold(context.Background(), tc.req)
				if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) {
					t.Errorf("got %v %q, want InvalidArgument containing %q", st.Code(), st.Message(), tc.want)
				}
			})
		}
	}
	if writes := f.writes(); len(writes) != 0 {
		t.Errorf("got writes %v, want none", writes)
	}
	for _, a := range f.client.Actions() {
		if liveRead(a) {
			t.Errorf("got the live read %v, want bad input refused before any API call", a)
		}
	}
}

// TestHoldNamesOnePodOrNone: a request names one pod (both its namespace and
// name) or every app of the node (neither); only one is refused.
func TestHoldNamesOnePodOrNone(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, dsPod("p"))
	for _, req := range []*edgeotav1.HoldRequest{{Namespace: "default", Duration: "1h"}, {Name: "p", Duration: "1h"}} {
		_, err := f.rpc.Hold(context.Background(), req)
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "leave both namespace and name empty") {
			t.Errorf("%v: got %v, want InvalidArgument saying how to name every app", req, err)
		}
	}
	_, err := f.rpc.ReleaseHold(context.Background(), &edgeotav1.ReleaseHoldRequest{Namespace: "default"})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("ReleaseHold of a namespace alone: got %v, want InvalidArgument", err)
	}
	// The node-wide route also reads the pod from the query, as the
	// per-pod route does from the path.
	if resp := f.do(http.MethodPost, "/edgeota.io/v1/hold?namespace=default&name=p&duration=1h", ""); resp.status != http.StatusOK ||
		!strings.HasPrefix(resp.body, "Held pod default/p until") {
		t.Errorf("got %d %q, want pod p held", resp.status, resp.body)
	}
}

// TestReleaseHold: the hold is removed from the pod's status; releasing a pod
// without one writes nothing and says so.
func TestReleaseHold(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, dsPod("p", withHold(time.Now().Add(time.Hour), "driving")))
	resp := f.do(http.MethodDelete, holdPath, "")
	if resp.status != http.StatusOK || resp.body != "Released the hold on pod default/p\n" {
		t.Errorf("got %d %q, want 200 Released the hold on pod default/p", resp.status, resp.body)
	}
	if h := f.podHold("p"); h != nil {
		t.Errorf("got hold %+v after the release, want none", h)
	}
	if writes := f.writes(); len(writes) != 1 || writes[0].GetSubresource() != "status" {
		t.Errorf("got writes %v, want one pods/status patch", writes)
	}
	f.client.ClearActions()
	got, err := f.rpc.ReleaseHold(context.Background(), &edgeotav1.ReleaseHoldRequest{Namespace: "default", Name: "p"})
	if err != nil || got.GetMessage() != "Pod default/p has no hold" || len(got.GetPods()) != 0 {
		t.Errorf("released again: got %v, %v; want OK saying it has no hold", got, err)
	}
	if writes := f.writes(); len(writes) != 0 {
		t.Errorf("released again: got writes %v, want none", writes)
	}
}

// TestHoldEveryApp: the node-wide form holds, and releases, every DaemonSet
// pod of the node (not one being deleted, not a pod of something else, not
// another node's), on both protocols; with none, NotFound.
func TestHoldEveryApp(t *testing.T) {
	f := newFixture(t, fixtureOptions{},
		dsPod("p"), dsPod("q", inNamespace("edge")), dsPod("bare", ownedBy("ReplicaSet")), dsPod("going", deleting()), dsPod("far", onNode("edge-2")))
	resp := f.do(http.MethodPost, "/edgeota.io/v1/hold?duration=2h&reason=driving", "")
	if resp.status != http.StatusOK || !strings.HasPrefix(resp.body, "Held 2 pods on node edge-1 until ") {
		t.Fatalf("got %d %q, want 200 Held 2 pods on node edge-1", resp.status, resp.body)
	}
	objects := func(name, ns string) *corev1.Pod {
		obj, err := f.client.Tracker().Get(podsGVR, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*corev1.Pod)
	}
	for _, p := range []struct {
		name, ns string
		held     bool
	}{{"p", "default", true}, {"q", "edge", true}, {"bare", "default", false}, {"going", "default", false}, {"far", "default", false}} {
		h, err := podchannel.HoldOf(objects(p.name, p.ns))
		if err != nil || (h != nil) != p.held || p.held && h.Reason != "driving" {
			t.Errorf("pod %s/%s: got hold %+v, %v; want held %t", p.ns, p.name, h, err, p.held)
		}
	}

	got, err := f.rpc.ReleaseHold(context.Background(), &edgeotav1.ReleaseHoldRequest{})
	if err != nil || got.GetMessage() != "Released the holds on 2 pods on node edge-1" || strings.Join(got.GetPods(), " ") != "default/p edge/q" {
		t.Errorf("gRPC ReleaseHold of every app: got %v, %v; want both pods released", got, err)
	}
	if h, _ := podchannel.HoldOf(objects("q", "edge")); h != nil {
		t.Errorf("pod edge/q: got hold %+v, want none", h)
	}
	held, err := f.rpc.Hold(context.Background(), &edgeotav1.HoldRequest{Duration: "1h"})
	if err != nil || strings.Join(held.GetPods(), " ") != "default/p edge/q" {
		t.Errorf("gRPC Hold of every app: got %v, %v; want both pods held", held, err)
	}
	if resp := f.do(http.MethodDelete, "/edgeota.io/v1/hold", ""); resp.body != "Released the holds on 2 pods on node edge-1\n" {
		t.Errorf("REST release of every app: got %d %q", resp.status, resp.body)
	}

	empty := newFixture(t, fixtureOptions{}, dsPod("far", onNode("edge-2")))
	if resp := empty.do(http.MethodPost, "/edgeota.io/v1/hold?duration=1h", ""); resp.status != http.StatusNotFound || !strings.Contains(resp.body, "no app on this node") {
		t.Errorf("a node without apps: got %d %q, want 404 no app on this node", resp.status, resp.body)
	}
}

// TestHoldEveryAppPartly: a node-wide hold that fails on one pod says what
// was held and why the rest was not, with the failure's code.
func TestHoldEveryAppPartly(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, dsPod("p"), dsPod("q"))
	refused := apierrors.NewForbidden(podsResource, "q", errors.New("pod q: denied by NodeRestriction"))
	f.client.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return a.(k8stesting.PatchAction).GetName() == "q", nil, refused
	})
	resp := f.do(http.MethodPost, "/edgeota.io/v1/hold?duration=1h", "")
	if resp.status != http.StatusForbidden || !strings.Contains(resp.body, "held 1 of 2 pods [default/p], asking again is safe") ||
		!strings.Contains(resp.body, "NodeRestriction") {
		t.Errorf("got %d %q, want 403 naming what was held and why q was not", resp.status, resp.body)
	}
	if f.podHold("p") == nil || f.podHold("q") != nil {
		t.Errorf("got p held %v and q held %v, want p only", f.podHold("p"), f.podHold("q"))
	}
}

// TestHoldLostAnswer: a hold whose status patch got no answer is resolved
// by reading the pod again, as the other writes are.
func TestHoldLostAnswer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		set        func(*link)
		wantStatus int
		wantBody   string
	}{
		{"written, answer lost", func(l *link) { l.lose.Store(true) }, http.StatusOK, "Held pod default/p until"},
		{"lost on the way", func(l *link) { l.drop.Store(true) }, http.StatusServiceUnavailable, "the pod does not carry the hold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &link{}
			f := newFixture(t, fixtureOptions{link: l}, dsPod("p"))
			tc.set(l)
			resp := f.do(http.MethodPost, holdPath+"?duration=1h", "")
			if resp.status != tc.wantStatus || !strings.Contains(resp.body, tc.wantBody) {
				t.Errorf("got %d %q, want %d containing %q", resp.status, resp.body, tc.wantStatus, tc.wantBody)
			}
		})
	}
	l := &link{}
	f := newFixture(t, fixtureOptions{link: l}, dsPod("p", withHold(time.Now().Add(time.Hour), "driving")))
	l.lose.Store(true)
	if resp := f.do(http.MethodDelete, holdPath, ""); resp.status != http.StatusOK || resp.body != "Released the hold on pod default/p\n" {
		t.Errorf("release, answer lost: got %d %q, want 200 released", resp.status, resp.body)
	}
}

// TestAuditsHolds: a hold and a release leave an audit line each, with the
// hold's end, reason and pods when made; a refused one repeats none of its
// input.
func TestAuditsHolds(t *testing.T) {
	logger, audits := capture(t, "Audit")
	f := newFixture(t, fixtureOptions{logger: &logger}, dsPod("p"))
	held, err := f.rpc.Hold(context.Background(), &edgeotav1.HoldRequest{Namespace: "default", Name: "p", Duration: "2h", Reason: "driving"})
	if err != nil {
		t.Fatal(err)
	}
	f.do(http.MethodPost, holdPath+"?duration=2h&reason="+strings.Repeat("x", 300), "")
	f.do(http.MethodDelete, "/edgeota.io/v1/hold", "")
	base := func(rpc, name, outcome, protocol string) []any {
		return []any{"user", anonymousUser, "groups", []string(nil), "rpc", rpc, "pod", klog.KRef("default", name), "outcome", outcome,
			"queued", false, "protocol", protocol}
	}
	want := [][]any{
		append(base("Hold", "p", "OK", "gRPC"), "until", held.GetUntil().AsTime(), "reason", "driving", "pods", []string{"default/p"}),
		base("Hold", "p", "InvalidArgument", "REST"),
		append([]any{"user", anonymousUser, "groups", []string(nil), "rpc", "ReleaseHold", "pod", klog.KRef("", ""), "outcome", "OK",
			"queued", false, "protocol", "REST"}, "pods", []string{"default/p"}),
	}
	if diff := cmp.Diff(want, audits()); diff != "" {
		t.Errorf("audit lines (-want +got):\n%s", diff)
	}
}

const queuedHoldPath = holdPath + "?duration=1h&reason=driving&queue_if_offline=true"

// TestQueuedHoldIsWrittenOnReconnection: cut off, a hold asked with
// queue_if_offline is answered 202, listed with its end and reason, kept on
// the disk across a restart, and written once the link is back, as asked
// (its end fixed when asked, by whom, when).
func TestQueuedHoldIsWrittenOnReconnection(t *testing.T) {
	dir := openStateDir(t)
	f, _ := offlineFixture(t, fixtureOptions{stateDir: dir, auth: ownerauth.Authenticator{Tokens: mustTokens(t, testTokens)}}, dsPod("p"))
	asked := time.Now()
	resp := f.do(http.MethodPost, queuedHoldPath, "", "Authorization", "Bearer upgrader-token")
	if resp.status != http.StatusAccepted || !strings.HasPrefix(resp.body, "Hold of pod default/p until ") ||
		!strings.HasSuffix(resp.body, " queued until the API server is reachable\n") {
		t.Fatalf("got %d %q, want 202 Hold of pod default/p until ... queued", resp.status, resp.body)
	}
	list := func(f *fixture) *edgeotav1.QueuedAction {
		resp, err := f.rpc.ListActions(withToken(context.Background(), "viewer-token"), &edgeotav1.ListActionsRequest{})
		if err != nil || len(resp.GetActions()) != 1 {
			t.Fatalf("ListActions: got %v, %v; want the hold queued", resp, err)
		}
		return resp.GetActions()[0]
	}
	queued := list(f)
	until := queued.GetHoldUntil().AsTime()
	if queued.GetAction() != ActionHold || queued.GetHoldReason() != "driving" || !near(until, asked.Add(time.Hour)) ||
		!queued.GetExpiresAt().AsTime().Equal(until) || queued.GetCaller() != "uli" || queued.GetTargetRevision() != "" {
		t.Fatalf("got %v, want the hold of p, driving, for an hour, expiring at its end, by uli", queued)
	}
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("cut off, got writes %v, want none", w)
	}

	if err := f.stop(); err != nil {
		t.Fatal(err)
	}
	f = newFixture(t, fixtureOptions{stateDir: dir, auth: ownerauth.Authenticator{Tokens: mustTokens(t, testTokens)}}, dsPod("p"))
	var o *edgeotav1.ActionOutcome
	eventually(t, "the queued hold's outcome", func() bool {
		resp, err := f.rpc.ListActions(withToken(context.Background(), "viewer-token"), &edgeotav1.ListActionsRequest{})
		if err != nil || len(resp.GetOutcomes()) == 0 {
			return false
		}
		o = resp.GetOutcomes()[0]
		return true
	})
	if o.GetResult() != edgeotav1.ActionResult_ACTION_RESULT_DONE || o.GetMessage() != "Held pod default/p until "+until.UTC().Format(time.RFC3339) {
		t.Errorf("got outcome %v, want done: Held pod default/p until %s", o, until.UTC().Format(time.RFC3339))
	}
	h := f.podHold("p")
	if h == nil || !h.Until.Time.Equal(until) || h.Reason != "driving" || h.By != "uli" || !h.At.Time.Equal(queued.GetQueuedAt().AsTime().Truncate(time.Second)) {
		t.Errorf("got hold %+v, want the queued one: until %s, driving, by uli, at %s", h, until, queued.GetQueuedAt().AsTime())
	}
}

// TestQueuedHoldDeliveredExpiredIsDropped: a queued hold whose end has passed
// before it could be written is dropped, its outcome "expired" saying so,
// whether the queue saw it end while cut off or the API server's clock,
// read on reconnection, says it has (the node's clock lagging behind).
func TestQueuedHoldDeliveredExpiredIsDropped(t *testing.T) {
	t.Parallel()
	t.Run("ended while cut off", func(t *testing.T) {
		f, l := offlineFixture(t, fixtureOptions{}, dsPod("p"))
		if resp := f.do(http.MethodPost, holdPath+"?duration=1s&queue_if_offline=true", ""); resp.status != http.StatusAccepted {
			t.Fatalf("got %d %q, want 202", resp.status, resp.body)
		}
		o := f.outcome(ActionHold)
		l.cut.Store(false)
		if o.GetResult() != edgeotav1.ActionResult_ACTION_RESULT_EXPIRED || !strings.Contains(o.GetMessage(), "before the API server was reachable: not written") {
			t.Errorf("got outcome %v, want expired: the hold ended", o)
		}
		if w := f.writes(); len(w) != 0 || f.podHold("p") != nil {
			t.Errorf("got writes %v, want none", w)
		}
	})
	t.Run("ended by the API server's clock", func(t *testing.T) {
		clock := &APIServerClock{} // the node's time until the API server answers
		f, l := offlineFixture(t, fixtureOptions{tweak: func(s *Server) { s.clock = clock }}, dsPod("p"))
		if resp := f.do(http.MethodPost, queuedHoldPath, ""); resp.status != http.StatusAccepted {
			t.Fatalf("got %d %q, want 202", resp.status, resp.body)
		}
		// The API server's first answer says it is two hours later than the
		// node thought.
		clock.observe(time.Now().Add(2 * time.Hour).UTC().Format(http.TimeFormat))
		l.cut.Store(false)
		o := f.outcome(ActionHold)
		if o.GetResult() != edgeotav1.ActionResult_ACTION_RESULT_EXPIRED || !strings.Contains(o.GetMessage(), "the hold ended at") {
			t.Errorf("got outcome %v, want expired: the hold ended", o)
		}
		if w := f.writes(); len(w) != 0 || f.podHold("p") != nil {
			t.Errorf("got writes %v, want none", w)
		}
	})
}

// TestQueuedReleaseReplacesTheQueuedHold: a pod has one hold or release
// queued, the later replacing the earlier; the release removes the hold the
// pod carried; each can be cancelled by its own name only.
func TestQueuedReleaseReplacesTheQueuedHold(t *testing.T) {
	t.Parallel()
	f, l := offlineFixture(t, fixtureOptions{}, dsPod("p", withHold(time.Now().Add(time.Hour), "parked")))
	if resp := f.do(http.MethodPost, queuedHoldPath, ""); resp.status != http.StatusAccepted {
		t.Fatalf("hold: got %d %q, want 202", resp.status, resp.body)
	}
	resp := f.do(http.MethodDelete, holdPath+"?queue_if_offline=true", "")
	if resp.status != http.StatusAccepted || resp.body != "Release of the hold on pod default/p queued until the API server is reachable\n" {
		t.Fatalf("release: got %d %q, want 202", resp.status, resp.body)
	}
	if got := f.actions().GetActions(); len(got) != 1 || got[0].GetAction() != ActionReleaseHold {
		t.Fatalf("got %v, want the release alone queued", got)
	}
	if resp := f.do(http.MethodDelete, "/edgeota.io/v1/namespaces/default/pods/p/actions/hold", ""); resp.status != http.StatusNotFound {
		t.Errorf("cancelling a hold while a release is queued: got %d %q, want 404", resp.status, resp.body)
	}
	l.cut.Store(false)
	if o := f.outcome(ActionReleaseHold); o.GetResult() != edgeotav1.ActionResult_ACTION_RESULT_DONE || o.GetMessage() != "Released the hold on pod default/p" {
		t.Errorf("got outcome %v, want done", o)
	}
	if h := f.podHold("p"); h != nil {
		t.Errorf("got hold %+v, want it released", h)
	}
}

// TestCancelQueuedHold: a queued hold is cancelled by its name.
func TestCancelQueuedHold(t *testing.T) {
	f, l := offlineFixture(t, fixtureOptions{}, dsPod("p"))
	if resp := f.do(http.MethodPost, queuedHoldPath, ""); resp.status != http.StatusAccepted {
		t.Fatalf("got %d %q, want 202", resp.status, resp.body)
	}
	resp, err := f.rpc.CancelAction(context.Background(), &edgeotav1.CancelActionRequest{Namespace: "default", Name: "p", Action: ActionHold})
	if err != nil || resp.GetMessage() != "Queued hold of pod default/p cancelled" {
		t.Fatalf("got %v, %v; want the hold cancelled", resp, err)
	}
	l.cut.Store(false)
	if o := f.outcome(ActionHold); o.GetResult() != edgeotav1.ActionResult_ACTION_RESULT_CANCELLED {
		t.Errorf("got outcome %v, want cancelled", o)
	}
	if w := f.writes(); len(w) != 0 {
		t.Errorf("got writes %v, want none", w)
	}
}

// TestQueuedHoldOfEveryApp: cut off, a node-wide hold queues one hold per
// DaemonSet pod of the last known view, written on every one on
// reconnection.
func TestQueuedHoldOfEveryApp(t *testing.T) {
	t.Parallel()
	f, l := offlineFixture(t, fixtureOptions{}, dsPod("p"), dsPod("q"), dsPod("bare", ownedBy("ReplicaSet")), dsPod("going", deleting()))
	resp, err := f.rpc.Hold(context.Background(), &edgeotav1.HoldRequest{Duration: "3d", Reason: "on a ferry", QueueIfOffline: true})
	if err != nil || !resp.GetQueued() || strings.Join(resp.GetPods(), " ") != "default/p default/q" ||
		!strings.HasPrefix(resp.GetMessage(), "Hold of 2 pods on node edge-1 until ") {
		t.Fatalf("got %v, %v; want the hold of p and q queued", resp, err)
	}
	if got := f.actions().GetActions(); len(got) != 2 {
		t.Fatalf("got %v, want two holds queued", got)
	}
	l.cut.Store(false)
	eventually(t, "both holds written", func() bool {
		return len(f.actions().GetOutcomes()) == 2
	})
	for _, name := range []string{"p", "q"} {
		if h := f.podHold(name); h == nil || h.Reason != "on a ferry" || !h.Until.Time.Equal(resp.GetUntil().AsTime()) {
			t.Errorf("pod %s: got hold %+v, want the queued one", name, h)
		}
	}
	for _, name := range []string{"bare", "going"} {
		if h := f.podHold(name); h != nil {
			t.Errorf("pod %s: got hold %+v, want none", name, h)
		}
	}
}

// TestQueuingAHoldChecksTheLastKnownView: the checks that need no API call
// are made on the cached pods before anything is queued; without a state
// directory nothing is.
func TestQueuingAHoldChecksTheLastKnownView(t *testing.T) {
	f, _ := offlineFixture(t, fixtureOptions{}, dsPod("going", deleting()), dsPod("bare", ownedBy("ReplicaSet")))
	for _, tc := range []struct {
		pod        string
		wantStatus int
		want       string
	}{
		{"ghost", http.StatusNotFound, "not found in the agent's last known view"},
		{"going", http.StatusForbidden, "Pod cannot be held: pod default/going is being deleted"},
		{"bare", http.StatusBadRequest, "not controlled by a DaemonSet"},
	} {
		resp := f.do(http.MethodPost, "/edgeota.io/v1/namespaces/default/pods/"+tc.pod+"/hold?duration=1h&queue_if_offline=true", "")
		if resp.status != tc.wantStatus || !strings.Contains(resp.body, tc.want) {
			t.Errorf("%s: got %d %q, want %d containing %q", tc.pod, resp.status, resp.body, tc.wantStatus, tc.want)
		}
	}
	if resp := f.do(http.MethodPost, "/edgeota.io/v1/hold?duration=1h&queue_if_offline=true", ""); resp.status != http.StatusNotFound {
		t.Errorf("every app, none known: got %d %q, want 404", resp.status, resp.body)
	}
	if got := f.actions(); len(got.GetActions()) != 0 {
		t.Errorf("got %v queued, want nothing", got.GetActions())
	}

	stateless := &link{}
	stateless.cut.Store(true)
	g := newFixture(t, fixtureOptions{link: stateless}, dsPod("p"))
	if resp := g.do(http.MethodPost, queuedHoldPath, ""); resp.status != http.StatusForbidden || !strings.Contains(resp.body, "keeps no state directory") {
		t.Errorf("without a state directory: got %d %q, want 403 naming it", resp.status, resp.body)
	}
}

// channelOffer is the controller's offer of revision hash with a hold limit
// and, when not zero, an upgrade deadline.
func channelOffer(hash string, limit, deadline time.Time) podOption {
	o := &podchannel.Offer{Revision: hash, HoldLimit: &metav1.Time{Time: limit}}
	if !deadline.IsZero() {
		o.UpgradeDeadline = &metav1.Time{Time: deadline}
	}
	value, err := podchannel.Encode(o)
	if err != nil {
		panic(err)
	}
	return withAnnotation(rollout.OfferAnnotation, value)
}

// TestOwnerViewShowsHoldLimitAndDeadline: the app shows the hold standing on
// its pod (until it ends), and the limit and deadline of the controller's
// offer of a revision the pod does not run, never a stale offer's.
func TestOwnerViewShowsHoldLimitAndDeadline(t *testing.T) {
	limit, deadline := appT0.Add(24*time.Hour), appT0.Add(7*24*time.Hour)
	holdEnd := appT0.Add(2 * time.Hour)
	for _, tc := range []struct {
		name                              string
		pod                               *corev1.Pod
		now                               time.Time
		wantHold, wantLimit, wantDeadline bool
		wantRecheck                       time.Duration
	}{
		{"OTA offer, held", appPod("p", "r1", needs(testHash), channelOffer(testHash, limit, deadline), withHold(holdEnd, "driving")),
			appT0, true, true, true, 2 * time.Hour},
		{"the hold has ended", appPod("p", "r1", needs(testHash), channelOffer(testHash, limit, deadline), withHold(holdEnd, "driving")),
			holdEnd, false, true, true, 0},
		{"AdvancedRollingUpdate: a held pod's limit, no condition", appPod("p", "r1", channelOffer(testHash, limit, time.Time{}), withHold(holdEnd, "driving")),
			appT0, true, true, false, 2 * time.Hour},
		{"an offer of the pod's own revision is stale", appPod("p", testHash, upToDateMark(), channelOffer(testHash, limit, deadline)),
			appT0, false, false, false, 0},
		{"an offer of another revision than PodNeedUpgrade names is stale", appPod("p", "r1", needs(testHash), channelOffer("older", limit, deadline)),
			appT0, false, false, false, 0},
		{"withdrawn: the limit, not the deadline", appPod("p", "r1", upToDateMark(), channelOffer(testHash, limit, deadline)),
			appT0, false, true, false, 0},
		{"no offer, no hold", appPod("p", "r1", needs(testHash)), appT0, false, false, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := phaseRule{deadline: time.Hour}
			in := groupApps([]*corev1.Pod{tc.pod})[appKey{"default", "demo"}]
			st := r.evaluate(in, &appMemory{}, tc.now)
			app := st.app
			if got := app.GetHold() != nil; got != tc.wantHold ||
				tc.wantHold && (!app.GetHold().GetUntil().AsTime().Equal(holdEnd) || app.GetHold().GetReason() != "driving" || app.GetHold().GetBy() != "owner" ||
					!app.GetHold().GetHeldAt().AsTime().Equal(holdEnd.Add(-time.Hour))) {
				t.Errorf("got hold %v, want shown %t: until %s, driving, by owner", app.GetHold(), tc.wantHold, holdEnd)
			}
			if got := app.GetHoldLimit(); (got != nil) != tc.wantLimit || tc.wantLimit && !got.AsTime().Equal(limit) {
				t.Errorf("got hold limit %v, want shown %t: %s", got, tc.wantLimit, limit)
			}
			if got := app.GetUpgradeDeadline(); (got != nil) != tc.wantDeadline || tc.wantDeadline && !got.AsTime().Equal(deadline) {
				t.Errorf("got upgrade deadline %v, want shown %t: %s", got, tc.wantDeadline, deadline)
			}
			if tc.wantRecheck > 0 && st.recheck != tc.wantRecheck {
				t.Errorf("got recheck in %s, want %s: when the hold ends", st.recheck, tc.wantRecheck)
			}
		})
	}
}

// TestWatchSendsHoldChanges: ListUpgrades and WatchUpgrades show a hold as
// soon as it is written, and the watch sends the app again when it is
// released and when a hold ends by the clock; a queued hold is listed with
// the app and leaves its phase alone.
func TestWatchSendsHoldChanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{stateDir: openStateDir(t)}, dsPod("p", channelOffer(testHash, time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))))
	stream := f.watchStream(t.Context())
	if snap := next(t, stream); snap.GetApps()[0].GetHold() != nil || snap.GetApps()[0].GetHoldLimit() == nil || snap.GetApps()[0].GetUpgradeDeadline() == nil {
		t.Fatalf("got %v, want no hold, the limit and the deadline", snap)
	}
	held, err := f.rpc.Hold(context.Background(), &edgeotav1.HoldRequest{Namespace: "default", Name: "p", Duration: "1h", Reason: "driving"})
	if err != nil {
		t.Fatal(err)
	}
	if app := next(t, stream).GetApp(); app.GetHold().GetReason() != "driving" || !app.GetHold().GetUntil().AsTime().Equal(held.GetUntil().AsTime()) {
		t.Fatalf("got %v, want the hold", app)
	}
	if apps := f.eventuallyApps("the hold listed", func(apps []*edgeotav1.App) bool { return apps[0].GetHold() != nil }); apps[0].GetPhase() != upgradeAvailable {
		t.Errorf("got %v, want the hold shown, UPGRADE_AVAILABLE", apps[0])
	}
	if _, err := f.rpc.ReleaseHold(context.Background(), &edgeotav1.ReleaseHoldRequest{Namespace: "default", Name: "p"}); err != nil {
		t.Fatal(err)
	}
	if app := next(t, stream).GetApp(); app.GetHold() != nil {
		t.Fatalf("got %v, want the hold gone", app)
	}
	// A hold of two seconds shows, then ends by the clock.
	if _, err := f.rpc.Hold(context.Background(), &edgeotav1.HoldRequest{Namespace: "default", Name: "p", Duration: "2s"}); err != nil {
		t.Fatal(err)
	}
	if app := next(t, stream).GetApp(); app.GetHold() == nil {
		t.Fatalf("got %v, want the hold", app)
	}
	if app := next(t, stream).GetApp(); app.GetHold() != nil {
		t.Fatalf("got %v, want the hold ended", app)
	}
}

// TestQueuedHoldLeavesThePhaseAlone: a hold queued for an app shows among
// its queued actions, and its phase stays what it was.
func TestQueuedHoldLeavesThePhaseAlone(t *testing.T) {
	f, _ := offlineFixture(t, fixtureOptions{}, dsPod("p"))
	if resp := f.do(http.MethodPost, queuedHoldPath, ""); resp.status != http.StatusAccepted {
		t.Fatalf("got %d %q, want 202", resp.status, resp.body)
	}
	apps := f.eventuallyApps("the queued hold", func(apps []*edgeotav1.App) bool { return len(apps) == 1 && len(apps[0].GetQueuedActions()) == 1 })
	if q := apps[0].GetQueuedActions()[0]; apps[0].GetPhase() != upgradeAvailable || q.GetAction() != ActionHold || q.GetHoldReason() != "driving" {
		t.Errorf("got %v, want UPGRADE_AVAILABLE with the hold queued", apps[0])
	}
	if resp := f.do(http.MethodPost, "/openyurt.io/v1/namespaces/default/pods/p/upgrade?queue_if_offline=true", ""); resp.status != http.StatusAccepted {
		t.Fatalf("got %d %q, want 202", resp.status, resp.body)
	}
	apps = f.eventuallyApps("the queued upgrade", func(apps []*edgeotav1.App) bool { return len(apps[0].GetQueuedActions()) == 2 })
	if apps[0].GetPhase() != queuedPhase || apps[0].GetMessage() != "upgrade queued until the API server is reachable" ||
		apps[0].GetQueuedActions()[0].GetAction() != ActionHold || apps[0].GetQueuedActions()[1].GetAction() != ActionUpgrade {
		t.Errorf("got %v, want QUEUED for the upgrade, the hold and the upgrade listed in the order they run", apps[0])
	}
}
