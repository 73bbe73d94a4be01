package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/rollout"
)

// TestAgentAnswerProvesLife: once a node's new pod settles, the controller
// writes one challenge on it; the agent's answer, echoing it, proves the
// node alive in place of its next heartbeat, and the next node goes. An
// answer about another pod, or an old one, proves nothing.
func TestAgentAnswerProvesLife(t *testing.T) {
	// node-0's new pod settled 100 s ago; its last heartbeat is older.
	objs := upgradedNode(cluster(advancedDaemonSet("1"), readyNodes(3)), "0", corev1.ConditionTrue, 200*time.Second)
	f := newFixture(t, objs...)
	f.sync()
	if got := f.deletedPods(); len(got) != 0 {
		t.Fatalf("got %v deleted, want none: node-0 not proven alive", got)
	}
	challenges := f.challenges()
	value, ok := challenges["pod-0"]
	if !ok || len(challenges) != 1 {
		t.Fatalf("got challenges %v, want one, on pod-0", challenges)
	}
	c, err := podchannel.ParseChallenge(value)
	if err != nil || c.UID != "pod-0-uid" {
		t.Fatalf("got challenge %q (%v), want one tied to pod-0's UID", value, err)
	}
	// The cache shows it: nothing more is written.
	withChallenge := newPod("pod-0", "node-0", newHash, func(p *corev1.Pod) {
		p.Annotations = map[string]string{rollout.ChallengeAnnotation: value}
		p.ResourceVersion = "2"
	})
	f.update(withChallenge)
	f.sync()
	if got := len(f.challenges()); got != 1 {
		t.Errorf("got %d challenges written, want 1: one write per settled pod", got)
	}
	// A replayed answer (an earlier challenge's) proves nothing.
	answer := func(rv, value string) {
		p := newPod("pod-0", "node-0", newHash, func(p *corev1.Pod) {
			p.Annotations = map[string]string{rollout.ChallengeAnnotation: c.String(), rollout.AnswerAnnotation: value}
			p.ResourceVersion = rv
		})
		f.update(p)
		f.sync()
	}
	answer("3", "pod-0-uid/b2xkLWFuc3dlcg")
	if got := f.deletedPods(); len(got) != 0 {
		t.Fatalf("a replayed answer: got %v deleted, want none", got)
	}
	answer("4", value)
	if got := f.deletedPods(); !slices.Equal(got, []string{"pod-1"}) {
		t.Errorf("answered: got %v deleted, want [pod-1]", got)
	}
	// node-0 settled: its challenge is never read again, and is forgotten.
	if _, kept := f.c.challenges.issued["pod-0-uid"]; kept {
		t.Errorf("got pod-0's challenge kept after its node settled, want it forgotten")
	}
}

// TestNoChallengeWithoutAgentProof: with edgeota.io/agent-proof "false" the
// controller writes no challenge, and the Lease alone proves life.
func TestNoChallengeWithoutAgentProof(t *testing.T) {
	ds := advancedDaemonSet("1", withAnnotation(rollout.AgentProofAnnotation, "false"))
	f := newFixture(t, upgradedNode(cluster(ds, readyNodes(3)), "0", corev1.ConditionTrue, 200*time.Second)...)
	f.sync()
	if got := f.challenges(); len(got) != 0 {
		t.Errorf("got challenges %v, want none", got)
	}
	for _, a := range f.allWrites() {
		if strings.Contains(a.GetResource().Resource, "pods") && a.GetVerb() == "patch" {
			t.Errorf("got a pod written %v, want none", a)
		}
	}
}
