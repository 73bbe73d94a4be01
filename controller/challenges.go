package controller

import (
	"context"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/rollout"
)

// challenges are the proof-of-life challenges this process issued, by pod
// and generation (see podchannel.Challenge), for as long as the pod's node
// waits for a proof. They live in its memory only: the pod's annotation is
// a copy the node may rewrite, and an answer counts only if it echoes what
// this process issued. A restarted controller issues new ones. A pod
// upgraded in place keeps its UID, and its annotations (the challenge and
// answer of its last upgrade among them): each upgrade raises its
// metadata.generation, and is challenged afresh, so that no answer to an
// earlier upgrade's challenge proves a later one.
type challenges struct {
	mu     sync.Mutex
	issued map[challengeKey]issued
}

// challengeKey names what a challenge is about: a pod at a generation.
type challengeKey struct {
	pod        types.UID
	generation int64
}

// issued is a challenge, and the DaemonSet whose rollout waits for it.
type issued struct {
	value, daemonSet string
}

func newChallenges() *challenges {
	return &challenges{issued: map[challengeKey]issued{}}
}

// of returns the challenge of the DaemonSet's pod at generation, issuing a
// fresh one the first time.
func (ch *challenges) of(pod types.UID, generation int64, daemonSet string) (string, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if v, ok := ch.issued[challengeKey{pod, generation}]; ok {
		return v.value, nil
	}
	c, err := podchannel.NewChallenge(pod)
	if err != nil {
		return "", err
	}
	// The key is copied: the pod's UID shares its record's memory, which
	// a newer record replaces.
	ch.issued[challengeKey{types.UID(strings.Clone(string(pod))), generation}] = issued{value: c.String(), daemonSet: daemonSet}
	return c.String(), nil
}

// keepAwaited forgets the DaemonSet's challenges of pods its rollout no
// longer waits on (their nodes proved alive, settled, or failed): their
// answers are never read again, and the controller would otherwise keep a
// challenge for every pod it ever challenged, for as long as the pod lives.
func (ch *challenges) keepAwaited(daemonSet string, awaited map[challengeKey]bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for k, v := range ch.issued {
		if v.daemonSet == daemonSet && !awaited[k] {
			delete(ch.issued, k)
		}
	}
}

// answered reports whether answer, the hash of the pod's answer
// (podchannel.Hash), is that of its challenge at generation as this process
// issued it.
// The record keeps the hash alone (8 bytes, where every pod upgraded with
// proof by answer would keep the answer's text); an answer proves no secret
// (the node reads the challenge on its pod and echoes it), only that the
// node's agent wrote after the challenge was issued, which a hash tells as
// well.
func (ch *challenges) answered(pod types.UID, generation int64, answer uint64) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	v, ok := ch.issued[challengeKey{pod, generation}]
	return ok && podchannel.Hash(v.value) == answer
}

// forget drops the challenges of a pod gone.
func (ch *challenges) forget(pod types.UID) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for k := range ch.issued {
		if k.pod == pod {
			delete(ch.issued, k)
		}
	}
}

// challenge returns the writes of the challenges of the nodes the
// DaemonSet's rollout waits on for a proof of life: one per settled pod,
// written once, and again if the pod's copy is not the one issued (deleted,
// or rewritten by the node). The challenges of pods it no longer waits on
// are forgotten.
func (c *Controller) challenge(key string, r *decision.Rollout) []func(context.Context) error {
	var tasks []func(context.Context) error
	awaited := make(map[challengeKey]bool, len(r.Awaiting()))
	for _, a := range r.Awaiting() {
		awaited[challengeKey{a.Pod, a.Generation}] = true
	}
	c.challenges.keepAwaited(key, awaited)
	for node, a := range r.Awaiting() {
		p := c.podOn(node, a.Pod)
		if p == nil || c.expect.pendingWrite(p.UID, writeChallenge, p.ResourceVersion) {
			continue
		}
		value, err := c.challenges.of(p.UID, a.Generation, key)
		if err != nil {
			c.logger.Error(err, "Issuing a proof-of-life challenge", "pod", p.Name)
			continue
		}
		if p.Challenge == podchannel.Hash(value) {
			continue
		}
		write := c.writeAnnotation(p, writeChallenge, rollout.ChallengeAnnotation, value)
		tasks = append(tasks, func(ctx context.Context) error {
			err := write(ctx)
			if err == nil {
				c.metrics.challengeWritten(key)
			}
			return err
		})
	}
	return tasks
}

// podOn returns the cached record of the pod with the UID on the node.
func (c *Controller) podOn(node string, uid types.UID) *podRecord {
	objs, _ := c.podIndexer.ByIndex(byNode, node)
	for _, obj := range objs {
		if p := obj.(*podRecord); p.UID == uid {
			return p
		}
	}
	return nil
}
