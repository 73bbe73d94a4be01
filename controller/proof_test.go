package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"

	"github.com/edgeota/edgeota/decision"
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
	if _, kept := f.c.challenges.issued[challengeKey{pod: "pod-0-uid"}]; kept {
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

// answerPod is pod-i on node-i at the new revision, carrying the challenge
// and the answer given, at resourceVersion rv.
func answerPod(i, challenge, answer, rv string) *corev1.Pod {
	return newPod("pod-"+i, "node-"+i, newHash, func(p *corev1.Pod) {
		p.Annotations = map[string]string{rollout.ChallengeAnnotation: challenge, rollout.AnswerAnnotation: answer}
		p.ResourceVersion = rv
	})
}

// histogramOf reads one series of a histogram: its count and sum.
func histogramOf(t *testing.T, h prometheus.Observer) (count uint64, sum float64) {
	t.Helper()
	m := &dto.Metric{}
	if err := h.(prometheus.Metric).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// TestProofsCountedByKind: a node proven by its agent's answer and one
// proven by its heartbeat are counted apart in the rollout status, in
// edgeota_controller_rollout_proven_nodes and in
// edgeota_controller_proofs_total; edgeota_controller_proof_wait_seconds
// observes, by the controller's clock, each node's wait from the sync that
// first judged its pod settled to the proof; every challenge written is
// counted. An answer is queued at once, not batched as other pod changes.
func TestProofsCountedByKind(t *testing.T) {
	objs := upgradedNode(cluster(advancedDaemonSet("2"), readyNodes(3)), "0", corev1.ConditionTrue, 200*time.Second)
	objs = upgradedNode(objs, "1", corev1.ConditionTrue, 200*time.Second)
	f := newFixture(t, objs...)
	start := time.Now()
	f.clockAt(start)
	f.sync()
	challenges := f.challenges()
	if len(challenges) != 2 {
		t.Fatalf("got challenges %v, want one on each of pod-0 and pod-1", challenges)
	}
	if got := testutil.ToFloat64(f.c.metrics.challenges.WithLabelValues(testNamespace, testDSName)); got != 2 {
		t.Errorf("got %v challenges counted, want 2", got)
	}
	if s := f.lastStatus(); s.Proven != nil {
		t.Errorf("nothing proven yet: got proven %+v, want none", s.Proven)
	}

	f.drainQueue()
	f.clockAt(start.Add(2 * time.Second))
	f.update(answerPod("0", challenges["pod-0"], challenges["pod-0"], "3"))
	if got := f.c.queue.Len(); got != 1 {
		t.Fatalf("got %d DaemonSets queued at once by the answer, want 1", got)
	}
	f.drainQueue()
	f.sync()

	f.clockAt(start.Add(5 * time.Second))
	f.update(heartbeatAgo(newNode("node-1", corev1.ConditionTrue), 0))
	f.drainQueue()
	f.sync()

	s := f.lastStatus()
	if want := (rollout.ProvenNodes{Answer: 1, Heartbeat: 1}); s.Proven == nil || *s.Proven != want {
		t.Errorf("got proven %+v in the rollout status, want %+v", s.Proven, want)
	}
	for proof, wait := range map[string]float64{"answer": 2, "heartbeat": 5} {
		if got := testutil.ToFloat64(f.c.metrics.proofs.WithLabelValues(testNamespace, testDSName, proof)); got != 1 {
			t.Errorf("got %v proofs by %s counted, want 1", got, proof)
		}
		if got := testutil.ToFloat64(f.c.metrics.rolloutProven.WithLabelValues(testNamespace, testDSName, proof)); got != 1 {
			t.Errorf("got %v nodes proven by %s in the gauge, want 1", got, proof)
		}
		if count, sum := histogramOf(t, f.c.metrics.proofWait.WithLabelValues(testNamespace, testDSName, proof)); count != 1 || sum != wait {
			t.Errorf("got %d waits for a proof by %s summing %v s, want 1 of %v s", count, proof, sum, wait)
		}
	}
	for node, want := range map[string]decision.Proof{"node-0": decision.ProofAnswer, "node-1": decision.ProofHeartbeat} {
		if e := f.recordEntries()[node]; e.Proof != want {
			t.Errorf("got %s's entry %+v, want settled by %s", node, e, want)
		}
	}
}

// TestAnswerAfterHeartbeatProvesNothingMore: an answer that comes after a
// heartbeat settled its node settles nothing: it is not taken as a proof
// (nor hurried to a sync), and the node stays proven by its heartbeat.
func TestAnswerAfterHeartbeatProvesNothingMore(t *testing.T) {
	f := newFixture(t, upgradedNode(cluster(advancedDaemonSet("1"), readyNodes(3)), "0", corev1.ConditionTrue, 200*time.Second)...)
	f.sync()
	challenge := f.challenges()["pod-0"]
	f.update(heartbeatAgo(newNode("node-0", corev1.ConditionTrue), 0))
	f.drainQueue()
	f.sync()
	late := answerPod("0", challenge, challenge, "3")
	f.update(late)
	if f.c.answers(cached(late).(*podRecord)) {
		t.Errorf("an answer after the node settled: got it taken as a proof, want a pod change like any other")
	}
	f.drainQueue()
	f.sync()
	if got := testutil.ToFloat64(f.c.metrics.proofs.WithLabelValues(testNamespace, testDSName, "answer")); got != 0 {
		t.Errorf("got %v proofs by answer, want 0", got)
	}
	if e := f.recordEntries()["node-0"]; e.Proof != decision.ProofHeartbeat {
		t.Errorf("got node-0's entry %+v, want settled by heartbeat", e)
	}
}
