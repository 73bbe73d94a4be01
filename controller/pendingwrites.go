package controller

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/podcondition"
)

// pendingWrites remembers, per pod and condition type, the resourceVersion of
// the cached pod a condition write was made from. Until the cache moves past
// that version it does not show the write (a pod's events arrive in order),
// so a sync triggered meanwhile must not repeat it: at 500 pods a lagging
// cache would otherwise cost dozens of duplicate patches per rollout, and a
// pre-pull whose Job was just deleted would be started again.
type pendingWrites struct {
	mu sync.Mutex
	m  map[pendingKey]string
}

// otaConditions are the condition types the controller writes, and the
// offer written alone.
var otaConditions = []corev1.PodConditionType{podcondition.NeedUpgrade, podcondition.ImageReady, offerWrite}

type pendingKey struct {
	uid types.UID
	t   corev1.PodConditionType
}

func newPendingWrites() *pendingWrites {
	return &pendingWrites{m: map[pendingKey]string{}}
}

// record notes a successful write of condition t made from the cached pod.
func (p *pendingWrites) record(pod *corev1.Pod, t corev1.PodConditionType) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[pendingKey{pod.UID, t}] = pod.ResourceVersion
}

// pending reports whether the cached pod predates a write of condition t,
// forgetting writes the cache has caught up with.
func (p *pendingWrites) pending(pod *corev1.Pod, t corev1.PodConditionType) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := pendingKey{pod.UID, t}
	rv, ok := p.m[key]
	if ok && rv != pod.ResourceVersion {
		delete(p.m, key)
		return false
	}
	return ok
}

// forgetPod drops what is remembered about a deleted pod.
func (p *pendingWrites) forgetPod(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range otaConditions {
		delete(p.m, pendingKey{uid, t})
	}
}
