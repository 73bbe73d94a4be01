package controller

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/edgeota/edgeota/health"
)

// scope is what the operator's node selector and partition let a rollout
// take now.
type scope struct {
	cfg *settings
	c   *Controller
	// quota is how many more nodes may move to the target revision under
	// the partition; -1 without one.
	quota int
}

// newScope resolves the partition against the nodes the rollout may touch
// (those matching the selector), of which onTarget already run, or are
// moving to, the target revision: all but the partition may.
func (c *Controller) newScope(cfg *settings, nodes []string, onTarget func(node string) bool) *scope {
	s := &scope{cfg: cfg, c: c, quota: -1}
	if cfg.partition == "" {
		return s
	}
	eligible, taken := 0, 0
	for _, n := range nodes {
		if s.matches(n) {
			eligible++
			if onTarget(n) {
				taken++
			}
		}
	}
	partition, _ := scaledCount(cfg.partition, eligible) // validated by rolloutSettings
	s.quota = max(eligible-partition-taken, 0)
	return s
}

// matches reports whether the node is one the rollout may touch.
func (s *scope) matches(node string) bool {
	if s.cfg.selector == nil || s.cfg.selector.Empty() {
		return true
	}
	n, err := s.c.nodeLister.Get(node)
	return err == nil && s.cfg.selector.Matches(labels.Set(n.Labels))
}

// admit splits out-of-date pods into those the rollout may take now and those
// it holds back: pods on nodes outside the selector, and, under a partition,
// pods past the quota in node name order or on NotReady nodes (passed over,
// not counted). pods is sorted by node name in place.
func (s *scope) admit(pods []*corev1.Pod) (admitted, heldBack []*corev1.Pod) {
	slices.SortFunc(pods, func(x, y *corev1.Pod) int { return strings.Compare(x.Spec.NodeName, y.Spec.NodeName) })
	quota := s.quota
	for _, p := range pods {
		switch {
		case !s.matches(p.Spec.NodeName):
			// Outside the selector: keeps the pod it has.
			heldBack = append(heldBack, p)
		case quota < 0:
			// No partition.
			admitted = append(admitted, p)
		case quota > 0 && s.c.nodeIsReady(p.Spec.NodeName):
			// Within the partition's quota, in name order.
			quota--
			admitted = append(admitted, p)
		default:
			// Past the quota, or NotReady: passed over.
			heldBack = append(heldBack, p)
		}
	}
	return admitted, heldBack
}

// nodeIsReady reports whether the node exists and is Ready.
func (c *Controller) nodeIsReady(name string) bool {
	node, err := c.nodeLister.Get(name)
	return err == nil && health.NodeReady(node)
}
