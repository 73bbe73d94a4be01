package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
	"github.com/edgeota/edgeota/server"
)

// requestedScenario: the owners' upgrades of an OTA DaemonSet in place
// (issue 43): every node's owner asks, through the agent's own code
// (server.WriteUpgradeRequest: the request written on the pod's status), one
// after another at requestRate, and the controller patches each pod. The
// figure is the time from a request written (its status patch answered,
// the bench's clock) to the controller sending its patch (its log, the
// same machine's clock), over every node.
var requestedScenario = scenario{name: "requested", run: runRequested}

// Its target (issue 43): a request written → its patch sent, p99 ≤ 1 s,
// over at least 100 upgrades.
const requestToPatchP99 = time.Second

// requestRate is how many owners ask each second: owners act on their
// own, not in a burst.
const requestRate = 20

// requestedNamespace holds the scenario's DaemonSet.
const requestedNamespace = "bench-requested"

func runRequested(ctx context.Context, s *session, _ *findings) (table, error) {
	progress("requested: %d owners' upgrades in place, %d a second", s.p.nodes, requestRate)
	client := s.cluster.Client
	ds := inPlaceDaemonSet("ota")
	ds.Annotations[rollout.StrategyAnnotation] = otaStrategy
	pods, err := deploy(ctx, client, requestedNamespace, ds, s.nodes())
	if err != nil {
		return table{}, err
	}
	defer pods.close()
	ctrl, err := s.startController(ctx, "ota-controller-requested", 2)
	if err != nil {
		return table{}, err
	}
	// Patches seen, by node: the watch's view of the controller's writes.
	seen := map[string]time.Time{}
	pods.observe(func(at time.Time, p *corev1.Pod) {
		if isImage(p.Spec.Containers[0].Image, image(1)) && seen[p.Spec.NodeName].IsZero() {
			seen[p.Spec.NodeName] = at
		}
	})
	defer pods.observe(nil)
	if err := setImage(ctx, client, requestedNamespace, "ota", image(1)); err != nil {
		return table{}, err
	}
	offered, err := waitOffersInPlace(ctx, s, pods)
	if err != nil {
		return table{}, err
	}
	written := map[string]time.Time{}
	tick := time.NewTicker(time.Second / requestRate)
	defer tick.Stop()
	for _, node := range s.nodes() {
		<-tick.C
		pod := offered[node]
		offer, err := podchannel.OfferOf(pod)
		if err != nil || offer == nil {
			return table{}, fmt.Errorf("the offer on pod %s/%s: %v", pod.Namespace, pod.Name, err)
		}
		if err := server.WriteUpgradeRequest(ctx, client.CoreV1(), pod, offer.Revision, "bench", time.Now()); err != nil {
			return table{}, fmt.Errorf("requesting the upgrade of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		written[node] = time.Now()
	}
	if err := waitUpToDate(ctx, pods, image(1), s.nodes()); err != nil {
		return table{}, err
	}
	events, err := controllerLogOf(ctrl.LogPath)
	if err != nil {
		return table{}, err
	}
	var toSent, toSeen []time.Duration
	sent := map[string]time.Time{}
	for _, e := range events {
		if e.proof == "" && e.node != "" && sent[e.node].IsZero() {
			sent[e.node] = e.at
		}
	}
	for node, at := range written {
		if t, ok := sent[node]; ok {
			toSent = append(toSent, t.Sub(at))
		}
		pods.mu.Lock()
		if t, ok := seen[node]; ok {
			toSeen = append(toSeen, t.Sub(at))
		}
		pods.mu.Unlock()
	}
	toSent, toSeen = measure.Sorted(toSent), measure.Sorted(toSeen)
	p99 := measure.Percentile(toSent, 0.99)
	ok := len(toSent) >= 100 && len(toSent) == len(written) && p99 <= requestToPatchP99
	t := table{
		title: fmt.Sprintf("Owners' upgrades in place: %d OTA nodes, each owner's request carried out by the controller", s.p.nodes),
		rows: []row{
			{fmt.Sprintf("request written → patch sent, p50 / p99 / max (%d of %d requests)", len(toSent), len(written)),
				millis(measure.Percentile(toSent, 0.5)) + " / " + millis(p99) + " / " + millis(measure.Percentile(toSent, 1)), "", "",
				"p99 ≤ " + millis(requestToPatchP99) + ", ≥ 100 upgrades", verdict(ok)},
			{"request written → patch seen in the bench's pod watch, p50 / p99",
				millis(measure.Percentile(toSeen, 0.5)) + " / " + millis(measure.Percentile(toSeen, 0.99)), "", "", "", ""},
		},
		notes: []string{
			fmt.Sprintf("an OTA DaemonSet (edgeota.io/update-method InPlaceIfPossible), its new image offered to every node (the offer saying in place); then each node's owner asks in turn, %d a second, by the agent's own code: the request written on the pod's status with UID and resourceVersion preconditions (server.WriteUpgradeRequest), with the bench's client; the controller carries each out whatever the budget", requestRate),
			"request written: when the API server answered the request's write (the bench's clock); patch sent: the controller's log line as it sends the patch (-v=2); both on this machine's clock",
		},
	}
	return t, errors.Join(s.stopChild(ctrl), deleteNamespace(ctx, client, requestedNamespace))
}

// waitOffersInPlace waits until every node's pod is offered the target in
// place (PodNeedUpgrade True, its offer saying so), and returns the pods by
// node.
func waitOffersInPlace(ctx context.Context, s *session, pods *view[*corev1.Pod]) (map[string]*corev1.Pod, error) {
	var out map[string]*corev1.Pod
	err := pods.until(ctx, settleTimeoutFor(s.p.nodes, 500), "every pod offered the target in place", func(_ time.Time, items map[string]*corev1.Pod) bool {
		out = map[string]*corev1.Pod{}
		for _, p := range items {
			o, err := podchannel.OfferOf(p)
			if p.DeletionTimestamp == nil && err == nil && o != nil && o.InPlace && podcondition.IsTrue(&p.Status, podcondition.NeedUpgrade) {
				out[p.Spec.NodeName] = p.DeepCopy()
			}
		}
		return len(out) == s.p.nodes
	})
	return out, err
}
