package controller

import (
	"fmt"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	recordstore "github.com/edgeota/edgeota/record"
	"github.com/edgeota/edgeota/rollout"
)

var (
	daemonSetKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet").GroupKind()
	jobKind       = batchv1.SchemeGroupVersion.WithKind("Job").GroupKind()
	podKind       = corev1.SchemeGroupVersion.WithKind("Pod").GroupKind()
)

// addHandlers maps every informer event to the DaemonSet it concerns. Each
// informer's events are counted by resource (edgeota_controller_watch_events_total).
func (c *Controller) addHandlers(ds, revisions, pods, prePullPods, nodes, jobs, records cache.SharedIndexInformer) error {
	handlers := []struct {
		resource string
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{"daemonsets", ds, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueue,
			UpdateFunc: c.updateDaemonSet,
			DeleteFunc: c.enqueue,
		}},
		{"controllerrevisions", revisions, ownedHandler(c.enqueueOwner)},
		{"pods", pods, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.addPod,
			UpdateFunc: c.updatePod,
			DeleteFunc: c.deletePod,
		}},
		{"prepullpods", prePullPods, ownedHandler(c.enqueuePrePullPodOwner)},
		{"nodes", nodes, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.updateNode(&nodeRecord{}, obj) },
			UpdateFunc: c.updateNode,
		}},
		{"jobs", jobs, ownedHandler(func(obj any) {
			if job, ok := obj.(*jobRecord); ok {
				c.jobChanged(job)
			}
		})},
		// The records are the controller's own writes: an event of its own
		// write changes nothing; one of anyone else's (a ConfigMap named as
		// one of a record's included) has the record written again
		// (record.Store.Observe).
		{"configmaps", records, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.observeRecord(obj, false) },
			UpdateFunc: func(_, obj any) { c.observeRecord(obj, false) },
			DeleteFunc: func(obj any) { c.observeRecord(unwrap(obj), true) },
		}},
	}
	for _, h := range handlers {
		reg, err := h.informer.AddEventHandler(c.metrics.countingHandler(h.resource, h.handler))
		if err != nil {
			return fmt.Errorf("adding event handler: %w", err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	return nil
}

// observeRecord hands a record event to the store.
func (c *Controller) observeRecord(obj any, deleted bool) {
	if cm, ok := obj.(*recordstore.Cached); ok {
		if key, rewrite := c.records.Observe(cm, deleted); rewrite {
			c.recordRewritten(key)
		}
	}
}

// updateDaemonSet enqueues a DaemonSet whose spec or annotations changed.
// Its status, which the native controller rewrites on every pod change of a
// rollout, is never read, so updates of only that are dropped; so are
// changes to the rollout status annotation alone, which the controller
// writes itself: a write must not trigger the sync that would write again.
func (c *Controller) updateDaemonSet(old, obj any) {
	oldDS, ok1 := old.(*appsv1.DaemonSet)
	ds, ok2 := obj.(*appsv1.DaemonSet)
	if ok1 && ok2 && oldDS.Generation == ds.Generation && equalExcept(oldDS.Annotations, ds.Annotations, rollout.RolloutStatusAnnotation) {
		return
	}
	c.enqueue(obj)
}

// equalExcept reports whether a and b hold the same keys and values, key
// aside.
func equalExcept(a, b map[string]string, key string) bool {
	for k, v := range a {
		if w, ok := b[k]; k != key && (!ok || v != w) {
			return false
		}
	}
	for k := range b {
		if _, ok := a[k]; k != key && !ok {
			return false
		}
	}
	return true
}

// ownedHandler calls f on every added, updated or deleted object, with
// tombstones unwrapped.
func ownedHandler(f func(obj any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    f,
		UpdateFunc: func(_, obj any) { f(obj) },
		DeleteFunc: func(obj any) { f(unwrap(obj)) },
	}
}

// unwrap returns the last known state of an object deleted while the watch was
// down.
func unwrap(obj any) any {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tombstone.Obj
	}
	return obj
}

func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.queue.Add(key)
}

func (c *Controller) enqueueKey(key string) {
	if key != "" {
		c.queue.Add(key)
	}
}

// enqueueBatched enqueues key after podEventBatch, folding the events of a
// burst into one sync.
func (c *Controller) enqueueBatched(key string) {
	if key != "" {
		c.queue.AddAfter(key, podEventBatch)
	}
}

// enqueueOwner enqueues the DaemonSet controlling obj, if any.
func (c *Controller) enqueueOwner(obj any) {
	if m, ok := obj.(metav1.Object); ok {
		c.enqueueKey(c.daemonSetKeyFor(m.GetNamespace(), metav1.GetControllerOfNoCopy(m)))
	}
}

// podChanged marks the pod's node dirty in its DaemonSet's rollout and
// enqueues the DaemonSet, batched.
func (c *Controller) podChanged(p *podRecord) {
	key := c.daemonSetKeyByUID(p.Owner)
	if key == "" {
		return
	}
	if p.Node != "" {
		c.markDirty(key, p.Node)
	}
	c.enqueueBatched(key)
}

func (c *Controller) addPod(obj any) {
	if p, ok := obj.(*podRecord); ok {
		c.podChanged(p)
	}
}

// updatePod handles a pod change; a pod turning terminating counts as its
// deletion, as the ReplicaSet controller does: from then on its node is in
// flight, so the rollout need not wait for the kubelet to finish the pod.
// A pod bound since (its node named by affinity before) stays on its node.
func (c *Controller) updatePod(old, obj any) {
	oldPod, ok1 := old.(*podRecord)
	p, ok2 := obj.(*podRecord)
	if !ok1 || !ok2 || oldPod.ResourceVersion == p.ResourceVersion {
		return
	}
	if p.Terminating && !oldPod.Terminating {
		c.expect.forgetPod(p.UID)
	} else {
		c.expect.observed(p.UID, p.ResourceVersion)
	}
	if oldPod.Node != p.Node && oldPod.Node != "" {
		c.podChanged(oldPod)
	}
	if p.Answer != oldPod.Answer && p.Node != "" && c.answers(p) {
		return
	}
	if p.Requested() != "" && p.Requested() != oldPod.Requested() && p.Node != "" {
		// An owner's request for an upgrade in place: the owner waits for
		// it, so it is acted on at once, as an answer is, not after the
		// batching of other pod changes.
		if key := c.daemonSetKeyByUID(p.Owner); key != "" {
			c.markDirty(key, p.Node)
			c.queue.Add(key)
			return
		}
	}
	c.podChanged(p)
}

// answers marks the pod's node dirty in, and enqueues at once, its
// DaemonSet when the pod carries a new answer to the challenge this process
// issued about it while the DaemonSet waits for the node's proof of life:
// an answer proves the node alive, as a heartbeat that settles it does, and
// is acted on as promptly, not after the batching of other pod changes. An
// answer that comes after a heartbeat settled the node is a pod change like
// any other. It reports whether it settled the node.
func (c *Controller) answers(p *podRecord) bool {
	if p.Answer == 0 || !c.challenges.answered(p.UID, p.Health.Generation(), p.Answer) {
		return false
	}
	key := c.daemonSetKeyByUID(p.Owner)
	if key == "" || !c.heartbeats.awaits(key, p.Node) {
		return false
	}
	c.logger.V(4).Info(LogAnswerSettles, "node", p.Node, "pod", klog.KRef(p.Namespace, p.Name), "daemonset", key)
	c.markDirty(key, p.Node)
	c.queue.Add(key)
	return true
}

// deletePod handles a pod leaving the cache, from a tombstone if need be.
func (c *Controller) deletePod(obj any) {
	p, ok := unwrap(obj).(*podRecord)
	if !ok {
		return
	}
	c.expect.forgetPod(p.UID)
	c.challenges.forget(p.UID)
	c.podChanged(p)
}

// enqueuePrePullPodOwner enqueues, batched, the DaemonSet of the pod whose
// pre-pull Job runs this pod.
func (c *Controller) enqueuePrePullPodOwner(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || !isKind(ref, jobKind) {
		return
	}
	obj, exists, _ := c.jobIndexer.GetByKey(pod.Namespace + "/" + ref.Name)
	if !exists || obj.(*jobRecord).UID != ref.UID {
		return
	}
	c.jobChanged(obj.(*jobRecord))
}

// jobChanged marks a pre-pull Job's node dirty in its DaemonSet's rollout
// (the node's pull is one of its facts) and enqueues the DaemonSet, batched.
func (c *Controller) jobChanged(job *jobRecord) {
	key := c.daemonSetKeyForJob(job)
	if key == "" {
		return
	}
	if job.Node != "" {
		c.markDirty(key, job.Node)
	}
	c.enqueueBatched(key)
}

// updateNode marks the node dirty in every DaemonSet it is a node of (a pod
// there, or an entry in its record) and enqueues them when something a
// verdict reads changed: its readiness (a node reconnecting is upgraded at
// once; one disconnecting is judged, skipped or failed), its labels
// (rollout node selectors, the template's selector), annotations (its time
// zone) or taints. A heartbeat alone enqueues only the DaemonSets waiting
// for one from the node.
func (c *Controller) updateNode(old, obj any) {
	oldNode, ok1 := old.(*nodeRecord)
	node, ok2 := obj.(*nodeRecord)
	if !ok1 || !ok2 {
		return
	}
	if node.sameButHeartbeat(oldNode) {
		if node.Heartbeat != oldNode.Heartbeat {
			c.heartbeat(node.Name, node.Heartbeat.Time())
		}
		return
	}
	for key := range c.daemonSetsOfNode(node.Name) {
		c.markDirty(key, node.Name)
		c.queue.Add(key)
	}
}

// daemonSetsOfNode returns the keys of the DaemonSets the node is a node of:
// those with a pod there, and those whose record names it or that delete
// there (a node whose pod was deleted and not replaced has no pod to find
// it by).
func (c *Controller) daemonSetsOfNode(node string) sets.Set[string] {
	objs, _ := c.podIndexer.ByIndex(byNode, node)
	keys := sets.New[string]()
	for _, obj := range objs {
		keys.Insert(c.daemonSetKeyByUID(obj.(*podRecord).Owner))
	}
	c.trackersMu.Lock()
	trackers := slices.Collect(maps.Values(c.trackers))
	c.trackersMu.Unlock()
	for _, t := range trackers {
		if c.expect.deletingOnNode(t.key, node) {
			keys.Insert(t.key)
			continue
		}
		if ledger := t.ledger(); ledger != nil {
			if _, ok := ledger.Entry(node); ok {
				keys.Insert(t.key)
			}
		}
	}
	keys.Delete("")
	return keys
}

// heartbeat marks the node dirty in, and enqueues, the DaemonSets that its
// heartbeat, sent at sent, settles.
func (c *Controller) heartbeat(node string, sent time.Time) {
	for _, key := range c.heartbeats.observe(node, sent) {
		c.logger.V(4).Info(LogHeartbeatSettles, "node", node, "sent", sent, "daemonset", key)
		c.markDirty(key, node)
		c.queue.Add(key)
	}
}

// daemonSetKeyFor resolves a controller reference to the key of the DaemonSet
// it names, "" unless that DaemonSet exists with the referenced UID (a
// namesake recreated since is not the owner).
func (c *Controller) daemonSetKeyFor(namespace string, ref *metav1.OwnerReference) string {
	if ref == nil || !isKind(ref, daemonSetKind) {
		return ""
	}
	ds, err := c.dsLister.DaemonSets(namespace).Get(ref.Name)
	if err != nil || ds.UID != ref.UID {
		return ""
	}
	return namespace + "/" + ref.Name
}

// daemonSetKeyByUID is the key of the cached DaemonSet with the UID, "" when
// there is none.
func (c *Controller) daemonSetKeyByUID(uid types.UID) string {
	if uid == "" {
		return ""
	}
	objs, _ := c.dsIndexer.ByIndex(byUID, string(uid))
	if len(objs) != 1 {
		return ""
	}
	ds := objs[0].(*appsv1.DaemonSet)
	return ds.Namespace + "/" + ds.Name
}

// daemonSetKeyForJob resolves a pre-pull Job to its DaemonSet through the pod
// that owns it.
func (c *Controller) daemonSetKeyForJob(job *jobRecord) string {
	for _, ref := range job.Pods {
		obj, ok, _ := c.podIndexer.GetByKey(job.Namespace + "/" + ref.Name)
		if !ok || obj.(*podRecord).UID != ref.UID {
			continue
		}
		return c.daemonSetKeyByUID(obj.(*podRecord).Owner)
	}
	return ""
}

func isKind(ref *metav1.OwnerReference, kind schema.GroupKind) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && ref.Kind == kind.Kind && gv.Group == kind.Group
}
