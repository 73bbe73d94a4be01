//go:build e2e

package e2e

import (
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/edgeota/edgeota/podcondition"
)

// TestAdvancedRollingUpdateBudget: an AdvancedRollingUpdate with
// max-unavailable 30% on 10 nodes never leaves more than 3 nodes without an
// available pod, judged on every pod event and every 100 ms, and completes.
func TestAdvancedRollingUpdateBudget(t *testing.T) {
	t.Parallel()
	const nodes, budget = 10, 3
	e := newEnv(t, nodes)
	e.startController(e.cluster.Kubeconfig)
	e.createDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "30%"})

	s := startSampler(t, e, nodes)
	e.setImage(newImage)
	e.waitAllNodes(newImage)
	samples, worst := s.stop()

	t.Logf("%d samples; at worst %d of %d nodes without an available pod (budget %d)", samples, worst.unavailable, nodes, budget)
	if worst.unavailable > budget {
		t.Errorf("%d nodes without an available pod at %s (budget %d): %v", worst.unavailable, worst.at.Format(time.StampMilli), budget, worst.nodes)
	}
	if worst.unavailable == 0 {
		t.Errorf("no sample saw a node without an available pod: the sampler missed the rollout")
	}
}

// sample is the rollout's state at one instant.
type sample struct {
	at          time.Time
	unavailable int
	nodes       []string // those without an available pod
}

// sampler follows the DaemonSet's pods through a watch and measures, after
// every event and on a 100 ms tick, how many nodes lack an available pod.
type sampler struct {
	mu      sync.Mutex
	pods    map[types.UID]*corev1.Pod
	nodes   int
	synced  bool
	samples int
	worst   sample
	done    chan struct{}
	ticker  *time.Ticker
	stopped sync.WaitGroup
}

func startSampler(t *testing.T, e *env, nodes int) *sampler {
	t.Helper()
	s := &sampler{pods: map[types.UID]*corev1.Pod{}, nodes: nodes, done: make(chan struct{}), ticker: time.NewTicker(100 * time.Millisecond)}
	factory := informers.NewSharedInformerFactoryWithOptions(e.cluster.Client, 0, informers.WithNamespace(e.ns))
	informer := factory.Core().V1().Pods().Informer()
	registration, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.observe(obj.(*corev1.Pod), false) },
		UpdateFunc: func(_, obj any) { s.observe(obj.(*corev1.Pod), false) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			s.observe(obj.(*corev1.Pod), true)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(s.done)
	t.Cleanup(func() { s.stop() })
	// Samples count once this handler has seen every pod that already
	// existed: before that, missing pods are unknown, not unavailable.
	if !cache.WaitForCacheSync(t.Context().Done(), registration.HasSynced) {
		t.Fatal("the pod watch never synced")
	}
	s.mu.Lock()
	s.synced = true
	s.mu.Unlock()
	s.measure()
	s.stopped.Go(func() {
		for {
			select {
			case <-s.done:
				return
			case <-s.ticker.C:
				s.measure()
			}
		}
	})
	return s
}

func (s *sampler) observe(p *corev1.Pod, deleted bool) {
	s.mu.Lock()
	if deleted {
		delete(s.pods, p.UID)
	} else {
		s.pods[p.UID] = p
	}
	s.mu.Unlock()
	s.measure()
}

// measure records one sample: a node counts as available when a pod of the
// DaemonSet on it is Ready and not being deleted.
func (s *sampler) measure() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.synced {
		return
	}
	available := map[string]bool{}
	for _, p := range s.pods {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" && podcondition.IsTrue(&p.Status, corev1.PodReady) {
			available[p.Spec.NodeName] = true
		}
	}
	s.samples++
	if n := s.nodes - len(available); n > s.worst.unavailable {
		s.worst = sample{at: time.Now(), unavailable: n, nodes: missingNodes(s.nodes, available)}
	}
}

// stop ends sampling and returns how many samples were taken and the worst.
func (s *sampler) stop() (int, sample) {
	s.mu.Lock()
	select {
	case <-s.done:
	default:
		close(s.done)
		s.ticker.Stop()
	}
	s.mu.Unlock()
	s.stopped.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, s.worst
}

func missingNodes(n int, available map[string]bool) []string {
	var missing []string
	for _, node := range allNodes(n) {
		if !available[node] {
			missing = append(missing, node)
		}
	}
	return missing
}
