//go:build e2e

package e2e

import (
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// deletionWatch records, through a watch of the DaemonSet's pods, every pod
// that was deleted (a deletionTimestamp set, or gone) and its image, so that
// a scenario can tell which pods a rollout deleted.
type deletionWatch struct {
	mu      sync.Mutex
	deleted map[types.UID]string // pod UID → image
}

func startDeletionWatch(t *testing.T, e *env) *deletionWatch {
	t.Helper()
	d := &deletionWatch{deleted: map[types.UID]string{}}
	factory := informers.NewSharedInformerFactoryWithOptions(e.cluster.Client, 0, informers.WithNamespace(e.ns))
	registration, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if p := obj.(*corev1.Pod); p.DeletionTimestamp != nil {
				d.record(p)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			d.record(obj.(*corev1.Pod))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	if !cache.WaitForCacheSync(t.Context().Done(), registration.HasSynced) {
		t.Fatal("the pod deletion watch never synced")
	}
	return d
}

func (d *deletionWatch) record(p *corev1.Pod) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deleted[p.UID] = imageOf(p)
}

// counts returns how many distinct pods with each image were deleted.
func (d *deletionWatch) counts() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for _, image := range d.deleted {
		out[image]++
	}
	return out
}
