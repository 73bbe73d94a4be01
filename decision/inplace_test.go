package decision

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/inplace"
	"github.com/edgeota/edgeota/rollout"
)

// inPlaceWorld is newWorld for a DaemonSet that asks for upgrades in place.
func inPlaceWorld(t *testing.T, n int, strategy rollout.Strategy, annotations map[string]string) *world {
	t.Helper()
	a := map[string]string{rollout.UpdateMethodAnnotation: "inplaceifpossible"}
	maps.Copy(a, annotations)
	return newWorld(t, n, strategy, a)
}

// TestInPlaceTakesAPatch: an image-only revision is taken in place, with the
// changed image, its in-flight entry written ahead holding what the node
// is judged against (the pod's generation and containers before the patch).
func TestInPlaceTakesAPatch(t *testing.T) {
	w := inPlaceWorld(t, 3, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1"})
	d := w.decide()
	if len(d.Take) != 1 || d.Take[0].InPlace == nil {
		t.Fatalf("got takes %+v, want one, in place", d.Take)
	}
	take := d.Take[0]
	if want := map[string]string{"app": newImage}; !maps.Equal(take.InPlace.Images, want) {
		t.Errorf("got images %v, want %v", take.InPlace.Images, want)
	}
	e, _ := w.ledger.Entry(take.Node)
	if e.Stage != StageInFlight || e.Pod != take.Pod.UID || e.InPlace == nil || e.Since == nil {
		t.Fatalf("got entry %+v, want in flight in place since the patch", e)
	}
	want := InPlace{From: oldHash, Images: map[string]string{"app": newImage}, Before: 1, Generation: 2,
		Containers: map[string]string{"app": hexID(string(take.Pod.UID) + "/1")}}
	if !e.InPlace.Equal(&want) {
		t.Errorf("got in place %+v, want %+v", *e.InPlace, want)
	}
	if d.Status.UpdateMethod != rollout.MethodInPlaceIfPossible || d.Status.Recreate != nil {
		t.Errorf("got method %q, recreate %+v; want InPlaceIfPossible, none recreated", d.Status.UpdateMethod, d.Status.Recreate)
	}
}

func hexID(id string) string { return strconv.FormatUint(health.ContainerID(id), 16) }

// TestInPlaceJudgedFromThePatch: a patched node is in flight from the patch
// (its old readiness does not settle it, nor a heartbeat sent before its
// new container started), settles once its kubelet observed the patch and
// runs the changed container under a new ID, Ready (never reported not
// Ready), and is proven by a heartbeat after that start; then the next
// node goes.
func TestInPlaceJudgedFromThePatch(t *testing.T) {
	w := inPlaceWorld(t, 2, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1"})
	first := w.decide().Take[0].Node
	w.deliverDeletions()
	w.heartbeat(first, w.now.Add(2*time.Second))
	w.advance(5 * time.Second)
	if d := w.decide(); len(d.Take) != 0 || d.Status.InFlight != 1 {
		t.Fatalf("got takes %v, %d in flight, before the kubelet took the patch; want none, 1", d.Take, d.Status.InFlight)
	}
	started := w.now
	w.restartInPlace(first, started, true)
	w.heartbeat(first, started.Add(-time.Second)) // before the start: proves nothing
	if d := w.decide(); len(d.Take) != 0 {
		t.Fatalf("got takes %v with only a heartbeat from before the new container, want none", d.Take)
	}
	if a, ok := w.r.Awaiting()[first]; !ok || !a.After.Equal(started) || a.Generation != 2 {
		t.Fatalf("got awaiting %+v (%v), want the proof after %s for generation 2", a, ok, started)
	}
	w.heartbeat(first, started.Add(2*time.Second))
	d := w.decide()
	if s, _ := w.r.State(first); s != StateSettled || len(d.Take) != 1 || d.Take[0].Node == first {
		t.Fatalf("got %s %s and takes %v, want it settled and the other node taken", first, s, d.Take)
	}
	if e, _ := w.ledger.Entry(first); e.Stage != StageSettled || e.Proof != ProofHeartbeat {
		t.Errorf("got entry %+v, want settled by heartbeat", e)
	}
}

// TestInPlaceFailures: a patched node fails as a recreated one does, counted
// toward max-failed: its new container crash-looping at once, NotReady
// after the patch, never observing it by the deadline from the patch.
func TestInPlaceFailures(t *testing.T) {
	cases := []struct {
		name   string
		then   func(w *world, node string)
		reason string
	}{
		{"crash loop", func(w *world, node string) {
			w.restartInPlace(node, w.now, false)
			w.changePod(node, newHash, func(p *Pod) {
				p.Health.Detail = &health.Detail{Waiting: []health.Waiting{{Container: "app", Reason: "CrashLoopBackOff"}}}
			})
		}, "CrashLoopBackOff"},
		{"NotReady after the patch", func(w *world, node string) {
			w.setNode(node, func(n *Node) { n.Ready, n.ReadyStatus = false, "Unknown" })
		}, "NotReady after the upgrade (Ready=Unknown)"},
		{"never observed", func(w *world, node string) { w.advance(31 * time.Second) }, health.ReasonProgressDeadlineExceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := inPlaceWorld(t, 3, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1", rollout.ProgressDeadlineAnnotation: "30"})
			node := w.decide().Take[0].Node
			w.deliverDeletions()
			tc.then(w, node)
			d := w.decide()
			if s, why := w.r.State(node); s != StateFailed || !strings.Contains(why, tc.reason) {
				t.Fatalf("got %s %s (%s), want failed for %q", node, s, why, tc.reason)
			}
			if !d.Status.Halted || len(d.Take) != 0 {
				t.Errorf("got halted %v with takes %v, want halted at max-failed 1 and nothing taken", d.Status.Halted, d.Take)
			}
		})
	}
}

// TestInPlaceRollbackGoesBackInPlace: a rollback to the old images (a new
// target of its own) patches the failed node back, as any image change.
func TestInPlaceRollbackGoesBackInPlace(t *testing.T) {
	w := inPlaceWorld(t, 2, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1"})
	node := w.decide().Take[0].Node
	w.deliverDeletions()
	w.restartInPlace(node, w.now, false)
	// Rolled back: revision 3 is revision 1's template again.
	tpls := templates()
	w.target = Target{Hash: "back333", Number: 3, Templates: map[string]*inplace.Template{oldHash: tpls[oldHash], newHash: tpls[newHash], "back333": tpls[oldHash]},
		TemplateCurrent: true}
	w.ledger = NewLedger(nil, Meta{TargetSince: metav1.NewTime(w.now)})
	w.build(false)
	d := w.r.Decide(w.now)
	var back *Take
	for i := range d.Take {
		if d.Take[i].Node == node {
			back = &d.Take[i]
		}
	}
	if back == nil || back.InPlace == nil || back.InPlace.Images["app"] != oldImage {
		t.Fatalf("got takes %+v, want %s patched back to %s", d.Take, node, oldImage)
	}
}

// TestInPlaceFallsBackToRecreate: a revision that changes more than images
// recreates, with the reason in the status; so does a pod whose kubelet
// reports no observedGeneration, among others that move in place; and every
// pod while the settings ask for recreation.
//
// Pinning is off here: with it the first wave would be the canary alone
// (TestPinFirstWaveIsTheCanary), which is not what this test is about.
func TestInPlaceFallsBackToRecreate(t *testing.T) {
	w := inPlaceWorld(t, 3, aru, map[string]string{rollout.MaxUnavailableAnnotation: "3", rollout.PinAnnotation: "false"})
	env, err := inplace.TemplateOf(&corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", rollout.InPlaceLabel: "true"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: newImage, Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.target.Templates[newHash] = &env
	d := w.decide()
	if len(d.Take) != 3 || slices.ContainsFunc(d.Take, func(t Take) bool { return t.InPlace != nil }) {
		t.Fatalf("got takes %+v, want all 3 recreated", d.Take)
	}
	want := map[string]int{"from revision " + oldHash + ": container app: its env changed, not only its image": 3}
	if r := d.Status.Recreate; r == nil || r.Count != 3 || !maps.Equal(r.Reasons, want) {
		t.Errorf("got recreate %+v, want %v", r, want)
	}

	old := inPlaceWorld(t, 3, aru, map[string]string{rollout.MaxUnavailableAnnotation: "3"})
	old.changePod("node-2", oldHash, func(p *Pod) { p.Health.Run.ObservedGeneration = 0 })
	d = old.decide()
	for _, take := range d.Take {
		if inPlace := take.InPlace != nil; inPlace != (take.Node != "node-2") {
			t.Errorf("got %s taken in place %v, want in place but for node-2", take.Node, inPlace)
		}
	}
	if r := d.Status.Recreate; r == nil || r.Count != 1 || r.Reasons[noGeneration] != 1 {
		t.Errorf("got recreate %+v, want node-2 for %q", r, noGeneration)
	}

	if recreate := newWorld(t, 1, aru, nil).decide(); recreate.Take[0].InPlace != nil || recreate.Status.UpdateMethod != "" || recreate.Status.Recreate != nil {
		t.Errorf("got %+v without the annotation, want a deletion and no in-place status", recreate)
	}
}

// TestInPlaceWaitsForTheTemplate: while the cached DaemonSet's template is
// not the target revision's, no pod is patched (its generation label would
// be wrong); they go once it is.
func TestInPlaceWaitsForTheTemplate(t *testing.T) {
	w := inPlaceWorld(t, 2, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1"})
	w.target.TemplateCurrent = false
	if d := w.decide(); len(d.Take) != 0 {
		t.Fatalf("got takes %v, want none while the template lags", d.Take)
	}
	w.target.TemplateCurrent = true
	w.build(false)
	if d := w.decide(); len(d.Take) != 1 || d.Take[0].InPlace == nil {
		t.Errorf("got takes %v, want one in place", d.Take)
	}
}

// TestInPlaceRebuiltFromTheRecord: a controller that restarts mid-flight
// (the patch's answer lost: no generation recorded) judges the patched node
// from the record as its predecessor did: the generation the patch makes,
// the container before it.
func TestInPlaceRebuiltFromTheRecord(t *testing.T) {
	w := inPlaceWorld(t, 2, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1"})
	decided := w.decide()
	node := decided.Take[0].Node
	w.deliverDeletions()
	e, _ := w.ledger.Entry(node)
	lost := *e.InPlace
	lost.Generation = 0
	e.InPlace = &lost
	entries := w.ledger.Entries()
	entries[node] = e
	w.ledger = NewLedger(entries, w.ledger.Meta())
	w.build(false)
	if s, _ := w.r.State(node); s != StateInFlight {
		t.Fatalf("got %s %s after the restart, want in flight", node, s)
	}
	w.restartInPlace(node, w.now, true)
	w.heartbeat(node, w.now.Add(2*time.Second))
	w.decide()
	if s, _ := w.r.State(node); s != StateSettled {
		t.Errorf("got %s %s, want settled by the generation the patch makes (1+1)", node, s)
	}
}

// TestOwnersRequestTakenInPlace: an OTA owner's request for the upgrade in
// place offered is taken whatever the budget and the pause, counted in
// flight; not once halted, nor one naming another revision, nor one on a
// pod never offered.
func TestOwnersRequestTakenInPlace(t *testing.T) {
	request := func(w *world, node, revision string) {
		w.changePod(node, oldHash, func(p *Pod) {
			rare := RarePod{}
			if p.Rare != nil {
				rare = *p.Rare
			}
			rare.Requested = revision
			p.Rare = &rare
		})
	}
	w := inPlaceWorld(t, 4, rollout.StrategyOTA, map[string]string{rollout.MaxUnavailableAnnotation: "1"})
	w.decide() // the offers
	request(w, "node-0", "other")
	request(w, "node-1", newHash)
	request(w, "node-2", newHash)
	w.cfg.Paused = true
	w.build(false)
	d := w.decide()
	if len(d.Take) != 2 || d.Take[0].Node != "node-1" || d.Take[1].Node != "node-2" || d.Take[0].InPlace == nil {
		t.Fatalf("got takes %+v, want node-1 and node-2 in place, paused and past the budget", d.Take)
	}
	w.deliverDeletions()
	if d := w.decide(); d.Status.InFlight != 2 || d.Allowed != 0 {
		t.Errorf("got %d in flight, %d allowed; want 2, none: the owners' upgrades count against the budget", d.Status.InFlight, d.Allowed)
	}

	halted := inPlaceWorld(t, 3, rollout.StrategyOTA, map[string]string{rollout.MaxUnavailableAnnotation: "1"})
	halted.decide()
	halted.ledger.Set("node-0", Entry{Stage: StageFailed, Reason: "crashed"}, true)
	request(halted, "node-1", newHash)
	halted.build(false)
	if d := halted.decide(); !d.Status.Halted || len(d.Take) != 0 {
		t.Errorf("got halted %v, takes %v; want halted and the request refused", d.Status.Halted, d.Take)
	}

	never := inPlaceWorld(t, 2, rollout.StrategyOTA, map[string]string{rollout.MaxUnavailableAnnotation: "1", rollout.PartitionAnnotation: "1"})
	never.decide() // node-0 offered, node-1 held back by the partition
	request(never, "node-1", newHash)
	if d := never.decide(); len(d.Take) != 0 {
		t.Errorf("got takes %v, want none for a request on a pod never offered", d.Take)
	}
}

// TestOfferSaysInPlace: an OTA offer tells the agent that the pod moves in
// place, so that its owner's upgrade is a request.
func TestOfferSaysInPlace(t *testing.T) {
	w := inPlaceWorld(t, 1, rollout.StrategyOTA, nil)
	w.decide()
	if o := w.r.Offer("node-0", func() map[string]string { return nil }); !o.InPlace {
		t.Errorf("got offer %+v, want in place", o)
	}
	r := newWorld(t, 1, rollout.StrategyOTA, nil)
	r.decide()
	if o := r.r.Offer("node-0", func() map[string]string { return nil }); o.InPlace {
		t.Errorf("got offer %+v without the annotation, want recreated", o)
	}
}

// TestHoldStaysOnAPatchedPod: the owner's hold is the pod's, and a pod
// upgraded in place keeps it (its owner's own request went past it, as an
// owner's upgrade does): the next revision finds the node held until the
// hold ends, where a recreated pod would start without one.
func TestHoldStaysOnAPatchedPod(t *testing.T) {
	w := inPlaceWorld(t, 1, rollout.StrategyOTA, map[string]string{rollout.MaxUnavailableAnnotation: "1", rollout.UpgradeDeadlineAnnotation: "1"})
	holdEnd := w.now.Add(time.Hour)
	w.changePod("node-0", oldHash, func(p *Pod) {
		setHold(p, holdEnd)
		p.Rare.Requested = newHash
	})
	w.decide()                                      // offered
	w.changePod("node-0", oldHash, func(p *Pod) {}) // the request seen with the offer recorded
	d := w.decide()
	if len(d.Take) != 1 || d.Take[0].InPlace == nil {
		t.Fatalf("got takes %+v, want the owner's request carried out in place despite the hold", d.Take)
	}
	w.deliverDeletions()
	w.restartInPlace("node-0", w.now, true)
	w.heartbeat("node-0", w.now.Add(2*time.Second))
	w.decide()
	if s, _ := w.r.State("node-0"); s != StateSettled {
		t.Fatalf("got node-0 %s, want settled", s)
	}
	// The next revision: the same pod, its hold with it.
	tpls := templates()
	w.target = Target{Hash: "next333", Number: 3, Templates: map[string]*inplace.Template{oldHash: tpls[oldHash], newHash: tpls[newHash], "next333": tpls[oldHash]},
		TemplateCurrent: true}
	w.ledger = NewLedger(nil, Meta{TargetSince: metav1.NewTime(w.now)})
	w.build(false)
	w.decide()                 // offered
	w.advance(5 * time.Second) // past the upgrade deadline
	w.dirty["node-0"] = true
	if d := w.decide(); len(d.Take) != 0 || d.Status.Held == nil || d.Status.Held.Count != 1 {
		t.Errorf("got takes %v, held %+v; want node-0 held by the hold its pod kept", d.Take, d.Status.Held)
	}
}
