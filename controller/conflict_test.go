package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"

	"github.com/edgeota/edgeota/podcondition"
)

// TestConditionWriteRetriedAfterConflict: a pod status patch the API server
// answers with 409 Conflict (the agent wrote the pod's status meanwhile) is
// not lost: the failed sync requeues the DaemonSet with backoff, and the next
// sync writes PodNeedUpgrade. It goes through processNextWorkItem, the path
// the workers take, so that a worker forgetting failed keys fails it.
func TestConditionWriteRetriedAfterConflict(t *testing.T) {
	f := newFixture(t, append(otaDaemonSet(), newNode("ready", corev1.ConditionTrue), newPod("old", "ready", oldHash))...)
	conflicts := 0
	f.client.PrependReactor("patch", "pods", func(a core.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" || conflicts > 0 {
			return false, nil, nil
		}
		conflicts++
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, a.(core.PatchAction).GetName(),
			errorString("the object has been modified; please apply your changes to the latest version and try again"))
	})

	f.c.queue.Add(testDSKey)
	f.c.processNextWorkItem(f.ctx)
	if conflicts != 1 {
		t.Fatalf("got %d conflicting patches in the first sync, want 1", conflicts)
	}
	if got := f.c.queue.NumRequeues(testDSKey); got != 1 {
		t.Fatalf("got %d requeues of %s after the conflict, want 1", got, testDSKey)
	}
	// The rate limiter's first backoff is milliseconds; Get blocks until then.
	processed := make(chan struct{})
	go func() {
		f.c.processNextWorkItem(f.ctx)
		close(processed)
	}()
	select {
	case <-processed:
	case <-time.After(5 * time.Second):
		f.c.queue.ShutDown()
		t.Fatalf("the DaemonSet was not synced again within 5 s of the conflict")
	}

	pod, err := f.client.CoreV1().Pods(testNamespace).Get(f.ctx, "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := podcondition.Get(&pod.Status, podcondition.NeedUpgrade); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("got %s %v after the retry, want True", podcondition.NeedUpgrade, c)
	}
	if got := len(f.conditionPatches()["old"]); got != 2 {
		t.Errorf("got %d status patches of pod old, want 2 (the conflict, then the retry)", got)
	}
	if got := f.c.queue.NumRequeues(testDSKey); got != 0 {
		t.Errorf("got %d requeues after the successful retry, want the backoff forgotten", got)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
