package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/podcondition"
)

// TestLostAnswerIsResolved: a delete or status patch that the API server
// gave no answer to is not reported as failed when it happened. The agent
// reads the pod again (or asks its cache, which the watch keeps current) and
// tells the caller what is true.
func TestLostAnswerIsResolved(t *testing.T) {
	for _, tc := range []struct {
		name, action string
		// set configures the link for the write; heard makes the cache see
		// the pod deleted, as its watch would.
		set        func(*link)
		heard      bool
		wantStatus int
		wantBody   string
	}{
		{"delete done, answer lost", "upgrade", func(l *link) { l.lose.Store(true) }, false,
			http.StatusOK, "Start updating pod default/p\n"},
		{"delete done, answer lost, link dead, the watch saw it", "upgrade", func(l *link) { l.lose.Store(true); l.dieAfter.Store(true) }, true,
			http.StatusOK, "Start updating pod default/p\n"},
		{"delete done, answer lost, link dead, nothing heard", "upgrade", func(l *link) { l.lose.Store(true); l.dieAfter.Store(true) }, false,
			http.StatusServiceUnavailable, "whether it was deleted is not known yet"},
		{"delete done, pod terminating, answer lost", "upgrade", func(l *link) { l.lose.Store(true); l.terminate.Store(true) }, false,
			http.StatusOK, "Start updating pod default/p\n"},
		{"delete lost on the way", "upgrade", func(l *link) { l.drop.Store(true) }, false,
			http.StatusServiceUnavailable, "the pod is still there, not deleted"},
		{"pull request done, answer lost", "imagepull", func(l *link) { l.lose.Store(true) }, false,
			http.StatusOK, "Image pre-pull requested for pod default/p\n"},
		{"pull request lost on the way", "imagepull", func(l *link) { l.drop.Store(true) }, false,
			http.StatusServiceUnavailable, "the pod does not record the request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &link{}
			watcher := watch.NewFakeWithChanSize(1, false)
			f := newFixture(t, fixtureOptions{link: l, watcher: watcher}, dsPod("p"))
			tc.set(l)
			if tc.heard {
				// The API server's watch event arrives while the answer to
				// the delete is lost.
				watcher.Delete(dsPod("p"))
				eventually(t, "the cache to see the pod deleted", func() bool {
					cached, known := f.svc.cachedPod("default", "p", "uid-p")
					return known && cached == nil
				})
			}
			resp := f.do(http.MethodPost, "/openyurt.io/v1/namespaces/default/pods/p/"+tc.action, "")
			if resp.status != tc.wantStatus || !strings.Contains(resp.body, tc.wantBody) {
				t.Errorf("got %d %q, want %d containing %q", resp.status, resp.body, tc.wantStatus, tc.wantBody)
			}
		})
	}
}

// TestQueuedUpgradeWhoseDeleteAnswerWasLost: a queued upgrade whose delete
// happened, its answer lost and the link dead right after, stays queued
// (nothing is known yet), is on the disk as sent, and is reported done, not
// refused, once the pod is found gone, by this agent or the next one.
func TestQueuedUpgradeWhoseDeleteAnswerWasLost(t *testing.T) {
	t.Parallel()
	for _, restart := range []bool{false, true} {
		name := "same agent"
		if restart {
			name = "after a restart"
		}
		t.Run(name, func(t *testing.T) {
			dir := openStateDir(t)
			// The cache never hears of the deletion: only the live read can
			// tell.
			watcher := watch.NewFakeWithChanSize(1, false)
			f, l := offlineFixture(t, fixtureOptions{stateDir: dir, watcher: watcher}, dsPod("p"))
			if resp := f.do(http.MethodPost, queuedUpgradePath, ""); resp.status != http.StatusAccepted {
				t.Fatalf("got %d %q, want 202", resp.status, resp.body)
			}
			l.lose.Store(true)
			l.dieAfter.Store(true)
			l.cut.Store(false)
			eventually(t, "the delete to reach the API server", func() bool {
				_, err := f.client.Tracker().Get(podsGVR, "default", "p")
				return err != nil
			})
			// Whether it happened is not known yet: still queued, no outcome.
			got := f.actions()
			if len(got.GetActions()) != 1 || len(got.GetOutcomes()) != 0 {
				t.Fatalf("got %v, want the upgrade still queued and no outcome", got)
			}
			if restart {
				if err := f.stop(); err != nil {
					t.Fatal(err)
				}
				f = newFixture(t, fixtureOptions{stateDir: dir}) // the pod is gone
			} else {
				l.lose.Store(false)
				l.cut.Store(false)
			}
			o := f.outcome(ActionUpgrade)
			if o.GetResult() != edgeotav1.ActionResult_ACTION_RESULT_DONE || o.GetMessage() != "Start updating pod default/p" {
				t.Errorf("got %v %q, want done: Start updating pod default/p", o.GetResult(), o.GetMessage())
			}
		})
	}
}

// TestQueuedPullWhoseAnswerWasLost: a queued pre-pull whose status patch
// happened with its answer lost is done, as the pod then records it.
func TestQueuedPullWhoseAnswerWasLost(t *testing.T) {
	t.Parallel()
	f, l := offlineFixture(t, fixtureOptions{}, dsPod("p"))
	if resp := f.do(http.MethodPost, queuedImagePullPath, ""); resp.status != http.StatusAccepted {
		t.Fatalf("got %d %q, want 202", resp.status, resp.body)
	}
	l.lose.Store(true)
	l.cut.Store(false)
	o := f.outcome(ActionImagePull)
	if o.GetResult() != edgeotav1.ActionResult_ACTION_RESULT_DONE {
		t.Errorf("got %v %q, want done", o.GetResult(), o.GetMessage())
	}
	obj, err := f.client.Tracker().Get(podsGVR, "default", "p")
	if err != nil {
		t.Fatal(err)
	}
	if c := podcondition.Get(&obj.(*corev1.Pod).Status, podcondition.ImageReady); c == nil || c.Reason != podcondition.ReasonPullImageRequested {
		t.Errorf("got %v, want %s recorded", c, podcondition.ReasonPullImageRequested)
	}
}

// TestAmbiguous: only a 4xx API error says for sure that a write was not
// done.
func TestAmbiguous(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewConflict(podsResource, "p", errors.New("precondition")), false},
		{apierrors.NewNotFound(podsResource, "p"), false},
		{apierrors.NewForbidden(podsResource, "p", errors.New("denied")), false},
		{apierrors.NewTooManyRequests("slow down", 1), false},
		{apierrors.NewInternalError(errors.New("etcd")), true},
		{apierrors.NewTimeoutError("the server was slow", 1), true},
		{apierrors.NewServiceUnavailable("down"), true},
		{context.DeadlineExceeded, true},
		{errAnswerLost, true},
		{&net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, true},
	} {
		if got := ambiguous(tc.err); got != tc.want {
			t.Errorf("%v: got %t, want %t", tc.err, got, tc.want)
		}
	}
}
