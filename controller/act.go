package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/inplace"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// act carries out a decision: the deletions and patches in place it admits,
// the OTA conditions and offers, the offers that show held pods their limit,
// the challenges of the nodes waiting for a proof of life, and the pre-pulls
// owners asked for. It decides nothing. Deletions, patches and challenges
// are left under way when it returns (inBackground).
func (c *Controller) act(ctx context.Context, ds *appsv1.DaemonSet, key string, t *tracker, r *decision.Rollout, d *decision.Decision) error {
	cfg := r.Settings()
	verbosity := 4
	if len(d.Take) > 0 {
		verbosity = 2
	}
	klog.FromContext(ctx).V(verbosity).Info("Rolling out", "nodes", d.Status.Total, "maxUnavailable", d.MaxUnavailable,
		"unavailable", d.Unavailable, "inFlight", d.Status.InFlight, "failed", d.Status.Failed.Count, "maxFailed", d.MaxFailed,
		"halted", d.Status.Halted, "paused", cfg.Paused, "taking", len(d.Take), "offering", len(d.Offered),
		"daemonSetResourceVersion", ds.ResourceVersion)
	if len(d.Waiting) > 0 {
		c.eventOnChange(ds, key, corev1.EventTypeWarning, rollout.ReasonSettledUnavailable,
			fmt.Sprintf("The rollout waits: %s settled on revision %d but %s unavailable while the node is Ready, holding the budget: %s",
				nodesCount(len(d.Waiting)), r.Target().Number, map[bool]string{true: "its pod is", false: "their pods are"}[len(d.Waiting) == 1],
				strings.Join(d.Waiting[:min(len(d.Waiting), rollout.ShownNodes)], ", ")))
	} else {
		c.eventMemo.clear(key, rollout.ReasonSettledUnavailable)
	}
	var errs []error
	if err := c.takeOldPods(ctx, ds, key, t, r, d.Take); err != nil {
		errs = append(errs, err)
	}
	var tasks []func(context.Context) error
	var more bool
	if cfg.Strategy == rollout.StrategyOTA {
		tasks, more = c.markOffers(ds, t, r, d)
	} else {
		tasks, more = c.showHoldLimits(ds, r)
		tasks = append(tasks, c.pullTasks(ds, key, r, d)...)
	}
	if cfg.AgentProof {
		if challenges := c.challenge(key, r); len(challenges) > 0 {
			// In the background, as deletions are: an answer, or a
			// heartbeat, that frees budget meanwhile is acted on at once
			// rather than after these round trips. The expectations stand
			// for them until they land.
			c.inBackground(ctx, key, func() error { return c.writeStatuses(ctx, ds, challenges) })
		}
	}
	if len(tasks) > 0 {
		errs = append(errs, c.writeStatuses(ctx, ds, tasks))
	}
	err := errors.Join(errs...)
	if more && err == nil {
		// The pods past this burst: the next sync writes them (a failure
		// requeues with backoff instead).
		c.queue.Add(key)
	}
	return err
}

// writeStatuses runs pod status writes in parallel, saying FailedCondition
// with the first failure when some fail.
func (c *Controller) writeStatuses(ctx context.Context, ds *appsv1.DaemonSet, tasks []func(context.Context) error) error {
	failed := c.runParallel(ctx, tasks)
	if len(failed) == 0 {
		return nil
	}
	c.recorder.Eventf(ds, corev1.EventTypeWarning, rollout.ReasonFailedCondition,
		"%d of %d pod status writes failed, will retry; first: %v", len(failed), len(tasks), failed[0])
	return errors.Join(failed...)
}

// takeOldPods deletes the nodes' old pods, or patches their images in
// place as each Take says, in parallel and in the background, each once its
// in-flight entry is written: the entries written ahead serve at once; a
// node without one (or whose pod changed since it was written: a patch is
// judged against the containers it was decided on) has it written first, so
// that a restarted controller knows what this one took away, or patched,
// even if no replacement ever comes. The takes are expected from now on (see
// expectations), so that no sync takes past the budget on a cache that does
// not show them yet, and none waits for their round trips either: the
// budget the next proof of life frees is used at once. A failed take puts
// the node back, says FailedDelete (FailedUpdatePodInPlace) and requeues
// with backoff.
func (c *Controller) takeOldPods(ctx context.Context, ds *appsv1.DaemonSet, key string, t *tracker, r *decision.Rollout, takes []decision.Take) error {
	if len(takes) == 0 {
		return nil
	}
	ledger, rec := r.Ledger(), t.record
	unwritten := false
	for _, take := range takes {
		ledger.TakeAhead(take.Node, take.Pod, take.InPlace)
		unwritten = unwritten || !rec.Durable(take.Node)
	}
	if unwritten {
		if _, err := c.records.Write(ctx, rec); err != nil {
			return fmt.Errorf("recording the nodes about to be upgraded: %w", err)
		}
		for _, take := range takes {
			if !rec.Durable(take.Node) {
				return fmt.Errorf("recording node %s before upgrading it: not written", take.Node)
			}
		}
	}

	logger := klog.FromContext(ctx)
	now := c.now()
	for _, take := range takes {
		c.expect.expectDeletion(key, take.Node, take.Pod.UID, take.InPlace != nil, now)
		c.markDirty(key, take.Node)
		ledger.Taken(take.Node, take.Pod, now)
		msg := LogDeletingPod
		if take.InPlace != nil {
			msg = LogPatchingPod
		}
		logger.V(2).Info(msg, "pod", klog.KRef(take.Pod.Namespace, take.Pod.Name), "node", take.Node, "podResourceVersion", take.Pod.ResourceVersion)
	}
	target := r.Target()
	tasks := make([]func(context.Context) error, len(takes))
	for i, take := range takes {
		if take.InPlace != nil {
			tasks[i] = c.patchTask(ds, key, ledger, target, take)
			continue
		}
		pod := take.Pod
		tasks[i] = func(ctx context.Context) error {
			err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{UID: &pod.UID},
			})
			if err == nil || apierrors.IsNotFound(err) {
				if err == nil {
					c.metrics.podDeleted()
					c.recorder.Eventf(ds, corev1.EventTypeNormal, rollout.ReasonDeletedPod, "Deleted pod %s on node %s to upgrade it to revision %s", pod.Name, take.Node, target.Hash)
					if take.Recreate != "" {
						c.inPlaceNotPossible(ds, key, target.Hash, fmt.Sprintf("Revision %d (%s): node %s recreated instead of upgraded in place: %s",
							target.Number, target.Hash, take.Node, take.Recreate), take.Recreate)
					}
				}
				return nil // gone, by us or before us: its node is in flight
			}
			// No deletion is coming: the node is a candidate again, and its
			// entry one written ahead.
			c.expect.deletionFailed(key, take.Node, pod.UID)
			ledger.Untaken(take.Node, pod)
			c.markDirty(key, take.Node)
			c.recorder.Eventf(ds, corev1.EventTypeWarning, rollout.ReasonFailedDelete, "Deleting pod %s on node %s failed: %v", pod.Name, take.Node, err)
			return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	c.inBackground(ctx, key, func() error {
		err := errors.Join(c.runParallel(ctx, tasks)...)
		// The deletion (patch) times, after them: the entries written
		// ahead already hold the nodes; these start their clocks, keep
		// the generations the patches made, with what the sync left to
		// this write (writeRecord).
		return errors.Join(err, c.writeInBackground(ctx, t, rec))
	})
	return nil
}

// patchTask returns the patch of one take in place: one PATCH of the pod,
// with its changed images and its two revision labels (InPlacePatch),
// conditional on the pod's UID and resourceVersion, whose returned
// generation is recorded. A refused patch (the pod changed since: a 409;
// the admission policy) puts the node back, as a failed deletion does.
func (c *Controller) patchTask(ds *appsv1.DaemonSet, key string, ledger *decision.Ledger, target *decision.Target, take decision.Take) func(context.Context) error {
	pod := take.Pod
	return func(ctx context.Context) error {
		body, err := InPlacePatch(pod, target, take.InPlace)
		if err == nil {
			var patched *corev1.Pod
			patched, err = c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, body,
				metav1.PatchOptions{FieldManager: FieldManager})
			if err == nil {
				ledger.Patched(take.Node, pod.UID, patched.Generation)
				c.metrics.podPatched()
				c.recorder.Eventf(ds, corev1.EventTypeNormal, rollout.ReasonUpdatedInPlace, "Updated pod %s on node %s in place to revision %s: %s",
					pod.Name, take.Node, target.Hash, imageList(take.InPlace.Images))
				return nil
			}
		}
		c.expect.deletionFailed(key, take.Node, pod.UID)
		ledger.Untaken(take.Node, pod)
		c.markDirty(key, take.Node)
		c.recorder.Eventf(ds, corev1.EventTypeWarning, rollout.ReasonFailedUpdateInPlace, "Updating pod %s on node %s in place failed: %v", pod.Name, take.Node, err)
		return fmt.Errorf("updating pod %s/%s in place: %w", pod.Namespace, pod.Name, err)
	}
}

// InPlacePatch is the one write of an upgrade in place: a strategic merge
// patch of the pod that sets the images plan changes (regular containers
// and native sidecars, merged by name) and the two labels by which the
// native DaemonSet controller tells an updated pod (its IsPodUpdated),
// controller-revision-hash and pod-template-generation, and nothing else;
// conditional on the pod's UID and resourceVersion (a pod replaced, or
// changed since the decision, is refused with a conflict). The API server
// raises the pod's metadata.generation; the kubelet restarts each changed
// container. The controller's admission policy admits no other change.
func InPlacePatch(pod *decision.Pod, target *decision.Target, plan *inplace.Plan) ([]byte, error) {
	type container struct {
		Name  string `json:"name"`
		Image string `json:"image"`
	}
	var spec struct {
		Containers     []container `json:"containers,omitempty"`
		InitContainers []container `json:"initContainers,omitempty"`
	}
	for _, name := range slices.Sorted(maps.Keys(plan.Images)) {
		c := container{Name: name, Image: plan.Images[name]}
		if slices.Contains(plan.Sidecars, name) {
			spec.InitContainers = append(spec.InitContainers, c)
		} else {
			spec.Containers = append(spec.Containers, c)
		}
	}
	labels := map[string]string{revisionHashLabel: target.Hash}
	if target.TemplateGeneration != "" {
		labels[podTemplateGenerationLabel] = target.TemplateGeneration
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID, "resourceVersion": pod.ResourceVersion, "labels": labels},
		"spec":     spec,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the patch of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return body, nil
}

// imageList renders images for an event: "app=registry/app:v2, sidecar=…".
func imageList(images map[string]string) string {
	parts := make([]string, 0, len(images))
	for _, name := range slices.Sorted(maps.Keys(images)) {
		parts = append(parts, name+"="+images[name])
	}
	return strings.Join(parts, ", ")
}

// markOffers returns the writes that keep PodNeedUpgrade and the offer on
// every live pod of an OTA DaemonSet as the decision wants them (True on the
// nodes the record says were offered, once the record holds it; False with
// why on the others; a True the controller never wrote is written back),
// and serves the pods' pre-pull requests: at most WriteBurst of them, and
// more when pods past those are left for the next sync.
func (c *Controller) markOffers(ds *appsv1.DaemonSet, t *tracker, r *decision.Rollout, d *decision.Decision) (tasks []func(context.Context) error, more bool) {
	target := r.Target()
	offers := offerCache{}
	start := pullsOf(d)
	for _, p := range c.podsOf(ds.UID) {
		if len(tasks) >= WriteBurst {
			return tasks, true
		}
		// A pod on its way out is not written: its deletion, this
		// decision's (deleteOldPods expected it already) or an earlier
		// one's, may land first.
		if p.Terminating || c.expect.deletes(t.key, p.Node, p.UID) {
			continue
		}
		if task := c.prePullTask(ds, target, r.Settings(), p, start[p.UID], pullFailedFor(r, p.Node), r.PinnedImages(p.Node), r.TagPull(p.Node)); task != nil {
			tasks = append(tasks, task)
		}
		for _, job := range c.prePullJobsOf(p.UID) {
			if task := c.checkPodless(ds, t.key, target.Hash, job); task != nil {
				tasks = append(tasks, task)
			}
		}
		want, ok := r.NeedUpgrade(d, &p.Pod, t.record.Durable(p.Node))
		if !ok {
			t.offersWaiting.Store(true)
			continue
		}
		var offer *string
		if !target.UpToDate(&p.Pod) {
			offer = offers.of(r, p.Node, func() map[string]string { return podchannel.ImagesOf(&ds.Spec.Template.Spec) })
		}
		sameCondition := p.NeedUpgrade.Get() == want
		sameOffer := offer == nil || p.Offer == podchannel.Hash(*offer)
		if sameCondition && sameOffer || c.expect.pendingWrite(p.UID, writeNeedUpgrade, p.ResourceVersion) {
			continue
		}
		tasks = append(tasks, c.writeCondition(p, writeNeedUpgrade, podcondition.NeedUpgrade, want, offer))
	}
	return tasks, false
}

// pullTasks returns, for AdvancedRollingUpdate, the work of the pulls: the
// pre-downloads the decision starts, and the Jobs already there (their
// results, their cleanup). OTA serves them with the offers (markOffers).
func (c *Controller) pullTasks(ds *appsv1.DaemonSet, key string, r *decision.Rollout, d *decision.Decision) []func(context.Context) error {
	start := pullsOf(d)
	pods := map[types.UID]*podRecord{}
	for _, take := range d.Pull {
		if p := c.record(take.Pod); p != nil {
			pods[p.UID] = p
		}
	}
	for _, obj := range c.jobIndexer.List() {
		job := obj.(*jobRecord)
		if job.Namespace != ds.Namespace {
			continue
		}
		for _, ref := range job.Pods {
			if o, ok, _ := c.podIndexer.GetByKey(job.Namespace + "/" + ref.Name); ok {
				if p := o.(*podRecord); p.UID == ref.UID && p.Owner == ds.UID && !p.Terminating {
					pods[p.UID] = p
				}
			}
		}
	}
	var tasks []func(context.Context) error
	for _, p := range pods {
		if task := c.prePullTask(ds, r.Target(), r.Settings(), p, start[p.UID], pullFailedFor(r, p.Node), r.PinnedImages(p.Node), r.TagPull(p.Node)); task != nil {
			tasks = append(tasks, task)
		}
		for _, job := range c.prePullJobsOf(p.UID) {
			if task := c.checkPodless(ds, key, r.Target().Hash, job); task != nil {
				tasks = append(tasks, task)
			}
		}
	}
	return tasks
}

// pullsOf are the pods whose pre-download the decision starts.
func pullsOf(d *decision.Decision) map[types.UID]bool {
	start := make(map[types.UID]bool, len(d.Pull))
	for _, take := range d.Pull {
		start[take.Pod.UID] = true
	}
	return start
}

// pullFailedFor reports whether the node's pull failed for good, as recorded.
func pullFailedFor(r *decision.Rollout, node string) bool {
	s, _ := r.State(node)
	return s == decision.StatePullFailed
}

// offerCache encodes each distinct offer of a sync once: offers differ
// between nodes only by their first offer's time, by whether the node
// moves in place, and then by its architecture's pin.
type offerCache map[offerKey]*string

type offerKey struct {
	at      time.Time
	inPlace bool
	// arch: a pin names digests per architecture.
	arch string
}

func (oc offerCache) of(r *decision.Rollout, node string, templateImages func() map[string]string) *string {
	o := r.Offer(node, templateImages)
	k := offerKey{inPlace: o.InPlace, arch: r.Arch(node)}
	if o.OfferedAt != nil {
		k.at = o.OfferedAt.Time
	}
	if v, ok := oc[k]; ok {
		return v
	}
	value, err := podchannel.Encode(o)
	if err != nil {
		return nil
	}
	oc[k] = &value
	return &value
}

// writeCondition returns the write of one condition on the pod's status,
// with the offer (nil: none) in the same patch, expected before it is sent.
func (c *Controller) writeCondition(p *podRecord, kind writeKind, t corev1.PodConditionType, want decision.Condition, offer *string) func(context.Context) error {
	c.expect.expectWrite(p.UID, kind, p.ResourceVersion)
	cond := corev1.PodCondition{Type: t, Status: corev1.ConditionStatus(want.Status), Reason: want.Reason, Message: want.Message}
	was := corev1.ConditionStatus(p.NeedUpgrade.Get().Status)
	if t == podcondition.ImageReady {
		was = corev1.ConditionStatus(p.ImageReady.Get().Status)
	}
	var annotations podcondition.Annotations
	if offer != nil {
		annotations = podcondition.Annotations{rollout.OfferAnnotation: offer}
	}
	ref := p.ref()
	return func(ctx context.Context) error {
		if _, err := podcondition.Write(ctx, c.client.CoreV1(), ref, was, cond, annotations, FieldManager); err != nil {
			c.expect.writeFailed(ref.UID, kind)
			return ignoreGone(err)
		}
		c.metrics.conditionWritten(t)
		return nil
	}
}

// writeAnnotation returns the write of one annotation on the pod's status,
// expected before it is sent.
func (c *Controller) writeAnnotation(p *podRecord, kind writeKind, key, value string) func(context.Context) error {
	c.expect.expectWrite(p.UID, kind, p.ResourceVersion)
	ref := p.ref()
	return func(ctx context.Context) error {
		if _, err := podcondition.AnnotateRef(ctx, c.client.CoreV1(), ref, podcondition.Annotations{key: &value}, FieldManager); err != nil {
			c.expect.writeFailed(ref.UID, kind)
			return ignoreGone(err)
		}
		return nil
	}
}

// showHoldLimits returns the writes of the offer on each held pod of an
// AdvancedRollingUpdate, so that its owner sees the limit that will end the
// hold (the node agent reads nothing but its pods): one write per held pod,
// once; at most WriteBurst of them, and more when held pods past those are
// left for the next sync.
func (c *Controller) showHoldLimits(ds *appsv1.DaemonSet, r *decision.Rollout) (tasks []func(context.Context) error, more bool) {
	offers := offerCache{}
	for node := range r.HeldNodes() {
		if len(tasks) >= WriteBurst {
			return tasks, true
		}
		pod := r.OldPod(node)
		if pod == nil {
			continue
		}
		p := c.record(pod)
		if p == nil || c.expect.pendingWrite(p.UID, writeOffer, p.ResourceVersion) {
			continue
		}
		offer := offers.of(r, node, func() map[string]string { return podchannel.ImagesOf(&ds.Spec.Template.Spec) })
		if offer == nil || p.Offer == podchannel.Hash(*offer) {
			continue
		}
		tasks = append(tasks, c.writeAnnotation(p, writeOffer, rollout.OfferAnnotation, *offer))
	}
	return tasks, false
}

// record returns the cache's record of a pod the decision names.
func (c *Controller) record(p *decision.Pod) *podRecord {
	obj, ok, _ := c.podIndexer.GetByKey(p.Namespace + "/" + p.Name)
	if !ok || obj.(*podRecord).UID != p.UID {
		return nil
	}
	return obj.(*podRecord)
}

// ignoreGone drops the error of a write on a pod that no longer exists:
// there is nothing left to write, and its deletion event brings the sync
// that sees it gone.
func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// nodesCount renders a count of nodes: "1 node", "3 nodes".
func nodesCount(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}
