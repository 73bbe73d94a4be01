package controller

import (
	"k8s.io/apimachinery/pkg/labels"

	"github.com/edgeota/edgeota/health"
)

// matches reports whether the node is one the rollout may touch: its labels
// match the rollout node selector, if any.
func (s *settings) matches(c *Controller, node string) bool {
	if s.selector == nil || s.selector.Empty() {
		return true
	}
	n, err := c.nodeLister.Get(node)
	return err == nil && s.selector.Matches(labels.Set(n.Labels))
}

// partitionQuota is how many more of the nodes the rollout may touch may
// move to the target revision under the partition (all but the partition,
// less those already on it or moving to it); -1 without a partition.
func (s *settings) partitionQuota(v *dsView) int {
	if s.partition == "" {
		return -1
	}
	partition, _ := scaledCount(s.partition, v.eligible) // validated by rolloutSettings
	return max(v.eligible-partition-v.taken, 0)
}

// choice is what the operator's controls and the clock let a rollout take
// now.
type choice struct {
	// replace are old pods down anyway: replacing them frees no budget and
	// costs none.
	replace []*nodeInfo
	// take are available old pods, in node name order, at most the limit
	// asked for.
	take []*nodeInfo
	// heldBack counts the candidates the node selector or the partition
	// keep on the old revision.
	heldBack int
}

// choose picks, in node name order, the old pods the rollout may replace
// now, taking at most limit available ones; partitioned says whether the
// partition applies to these deletions (for OTA it bounds the offers
// instead). Without a partition it reads
// only the nodes it takes (the ordered set of takeable nodes), so that its
// cost follows the wave, not the fleet. With one, it walks the candidates
// in name order: each node the partition lets through uses up one of its
// quota, whether the clock lets it go now or not (a node whose window is
// closed waits; the next one does not take its place), so the partition
// keeps its exact meaning.
func (v *dsView) choose(cfg *settings, limit int, partitioned bool) choice {
	ch := choice{heldBack: v.outside + v.zoneInvalid}
	quota := -1
	if partitioned {
		quota = cfg.partitionQuota(v)
	}
	if quota < 0 {
		for node := range v.downs {
			ch.replace = append(ch.replace, v.nodes[node])
		}
		v.takeable.Ascend(func(node string) bool {
			if len(ch.take) >= limit {
				return false
			}
			ch.take = append(ch.take, v.nodes[node])
			return true
		})
		return ch
	}
	visited := 0
	v.olds.Ascend(func(node string) bool {
		if quota == 0 {
			return false
		}
		quota--
		visited++
		switch n := v.nodes[node]; {
		case n.down:
			// Down anyway: replaced, in the quota.
			ch.replace = append(ch.replace, n)
		case n.takeable && len(ch.take) < limit:
			// Within the quota, in name order.
			ch.take = append(ch.take, n)
		}
		return true
	})
	ch.heldBack += v.olds.Len() - visited
	return ch
}

// nodeIsReady reports whether the node exists and is Ready.
func (c *Controller) nodeIsReady(name string) bool {
	node, err := c.nodeLister.Get(name)
	return err == nil && health.NodeReady(node)
}
