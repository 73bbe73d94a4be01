package controller

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/edgeota/edgeota/internal/kube/kubetest"
	"github.com/edgeota/edgeota/internal/unixtime"
	"github.com/edgeota/edgeota/rollout"
)

// TestNodeRecordHoldsWhatTheControllerReads builds the cache's record of a
// full Node and checks every field a verdict, a handler or the template's
// fit reads; the rest (status images, other conditions and annotations,
// managedFields) is gone.
func TestNodeRecordHoldsWhatTheControllerReads(t *testing.T) {
	beat := metav1.NewTime(time.Now().Add(-3 * time.Second).Truncate(time.Second))
	added := metav1.Now()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-0", UID: "node-0-uid", ResourceVersion: "7",
			Labels:        map[string]string{"kubernetes.io/hostname": "node-0", "fleet": "canary"},
			Annotations:   map[string]string{rollout.NodeTimeZoneAnnotation: "Europe/Paris", "node.alpha.kubernetes.io/ttl": "0"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24",
			Taints: []corev1.Taint{{Key: "dedicated", Value: "edge", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &added}}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: beat, Reason: "KubeletReady"}},
			Images: []corev1.ContainerImage{{Names: []string{"nginx"}}},
		},
	}
	got := nodeRecordOf(node).(*nodeRecord)
	want := &nodeRecord{Name: "node-0", UID: "node-0-uid", ResourceVersion: "7",
		Labels:      map[string]string{"kubernetes.io/hostname": "node-0", "fleet": "canary"},
		Annotations: map[string]string{rollout.NodeTimeZoneAnnotation: "Europe/Paris"},
		Taints:      []corev1.Taint{{Key: "dedicated", Value: "edge", Effect: corev1.TaintEffectNoSchedule}},
		Heartbeat:   unixtime.Of(beat.Time), ReadyStatus: corev1.ConditionTrue}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(nodeRecord{})); diff != "" {
		t.Errorf("got a record differing from what the node says (-want +got):\n%s", diff)
	}
	if again := nodeRecordOf(got); again != got {
		t.Errorf("got a record transformed again into %p, want the same record %p", again, got)
	}
	if f := nodeFacts("node-0", got); !f.Exists || !f.Ready || f.ReadyStatus != "True" || !f.Heartbeat.Equal(beat.Time) || f.Zone == nil || f.Zone.String() != "Europe/Paris" {
		t.Errorf("got facts %+v, want a Ready node with its heartbeat and time zone", f)
	}
	if f := nodeFacts("node-1", nodeRecordOf(newNode("node-1", "")).(*nodeRecord)); f.Ready || f.ReadyStatus != "missing" || !f.Heartbeat.IsZero() {
		t.Errorf("got facts %+v of a node without a Ready condition, want not Ready, status missing, no heartbeat", f)
	}
}

// TestNodeRecordFitsTheTemplateAsTheNode: the template's fit (node
// selector, required affinity by label and by name, taints) reads the same
// on the record as on the Node.
func TestNodeRecordFitsTheTemplateAsTheNode(t *testing.T) {
	node := newNode("node-0", corev1.ConditionTrue)
	node.Labels = map[string]string{"fleet": "canary"}
	node.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "edge", Effect: corev1.TaintEffectNoExecute}}
	r := nodeRecordOf(node.DeepCopy()).(*nodeRecord)
	selector, byName, other := newDaemonSet(), newDaemonSet(), newDaemonSet()
	selector.Spec.Template.Spec.NodeSelector = map[string]string{"fleet": "canary"}
	byName.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{"node-0"}}}}}}}}
	other.Spec.Template.Spec.NodeSelector = map[string]string{"fleet": "stable"}
	for name, ds := range map[string]*appsv1.DaemonSet{"selector": selector, "affinity by name": byName, "another selector": other} {
		if got, want := templateSelects(ds, r.node()), templateSelects(ds, node); got != want {
			t.Errorf("%s: got selects %v on the record, want %v as on the node", name, got, want)
		}
		if got, want := untoleratedTaint(ds, r.node()), untoleratedTaint(ds, node); got != want || got == "" {
			t.Errorf("%s: got untolerated taint %q on the record, want %q as on the node", name, got, want)
		}
	}
}

// TestJobRecordHoldsWhatTheControllerReads builds the cache's record of a
// pre-pull Job and checks what the handlers and judgePull read.
func TestJobRecordHoldsWhatTheControllerReads(t *testing.T) {
	pod := requestedPod(newHash)
	job := prePullFor(pod, newHash)
	job.Labels[PrePullByLabel] = prePullByController
	job.ResourceVersion = "9"
	job.Status.Active = 1
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionFalse},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}
	got := jobRecordOf(job).(*jobRecord)
	want := &jobRecord{Namespace: job.Namespace, Name: job.Name, UID: job.UID, ResourceVersion: "9",
		Pods: []podRef{{Name: pod.Name, UID: pod.UID}}, Revision: newHash, Node: pod.Spec.NodeName,
		Created: unixtime.Of(job.CreationTimestamp.Time), Containers: int32(len(job.Spec.Template.Spec.Containers)), Active: 1,
		ByTag:     []string{"init", "nginx"}, // the pull names both by tag
		FailedWhy: "BackoffLimitExceeded: Job has reached the specified backoff limit",
		PrePull:   true, ByController: true, Failed: true}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(jobRecord{})); diff != "" {
		t.Errorf("got a record differing from what the Job says (-want +got):\n%s", diff)
	}
	if again := jobRecordOf(got); again != got {
		t.Errorf("got a record transformed again into %p, want the same record %p", again, got)
	}
}

// TestStoresHoldRecordsIndexedAsTheInformers: the stores the bench measures
// keep what the controller's informers keep, indexed the same way.
func TestStoresHoldRecordsIndexedAsTheInformers(t *testing.T) {
	pods := NewDaemonPodStore()
	if err := pods.Add(newPod("p", "node-0", oldHash)); err != nil {
		t.Fatal(err)
	}
	if objs, _ := pods.Indexer.ByIndex(byNode, "node-0"); len(objs) != 1 {
		t.Fatalf("got %d pods on node-0, want 1", len(objs))
	} else if _, ok := objs[0].(*podRecord); !ok {
		t.Errorf("got a %T stored, want a *podRecord", objs[0])
	}
	if objs, _ := pods.Indexer.ByIndex(byControllerUID, string(testDSUID)); len(objs) != 1 {
		t.Errorf("got %d pods of the DaemonSet, want 1", len(objs))
	}
	nodes := NewNodeStore()
	if err := nodes.Add(newNode("node-0", corev1.ConditionTrue)); err != nil {
		t.Fatal(err)
	}
	if obj, ok, _ := nodes.Indexer.GetByKey("node-0"); !ok || obj.(*nodeRecord).ReadyStatus != corev1.ConditionTrue {
		t.Errorf("got %v (found %v) for node-0, want its record, Ready", obj, ok)
	}
	inf := NewInformers(kubetest.Wrap(fake.NewClientset()), testRecordNamespace)
	for name, tt := range map[string]struct{ informer, store cache.Indexer }{
		"pods":  {inf.DaemonPods.GetIndexer(), pods.Indexer},
		"nodes": {inf.Nodes.GetIndexer(), nodes.Indexer},
	} {
		if got, want := slices.Sorted(maps.Keys(tt.informer.GetIndexers())), slices.Sorted(maps.Keys(tt.store.GetIndexers())); !slices.Equal(got, want) {
			t.Errorf("%s: got the informer's indexes %q, want the store's %q", name, got, want)
		}
	}
}
