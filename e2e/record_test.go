//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/rollout"
)

// recordLabel marks the ConfigMaps of a DaemonSet's rollout record, its
// value the DaemonSet's UID, as the manual publishes it
// (docs/concepts/rollout-record.md).
const recordLabel = "edgeota.io/rollout-record"

// TestDeletedRecordRewritten: during a rollout of a crash-looping version
// with one failure recorded (max-failed high enough not to halt), every
// ConfigMap of the rollout record is deleted; the controller writes them
// all again as they were, the failure in them, says so with a Warning
// RolloutRecordRewritten on the DaemonSet, and still counts the failure.
func TestDeletedRecordRewritten(t *testing.T) {
	t.Parallel()
	e, ds, was, failed := recordedFailure(t)
	for _, cm := range was {
		t.Logf("deleting rollout record %s: %v", cm.Name, cm.Data)
		if err := e.cluster.Client.CoreV1().ConfigMaps(harness.SystemNamespace).Delete(e.ctx(), cm.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting rollout record %s: %v", cm.Name, err)
		}
	}
	e.wantRecordRestored(ds, was, failed, true)
}

// TestChangedRecordRewritten: the same, but someone else edits the
// ConfigMap holding the failure, removing the failed node's entry and
// adding a key of their own. The controller's cache holds a digest of each
// record ConfigMap, not its data: the edit shows as another digest, and the
// ConfigMap is written again whole, as it was, the stranger's key gone.
func TestChangedRecordRewritten(t *testing.T) {
	t.Parallel()
	e, ds, was, failed := recordedFailure(t)
	i := slices.IndexFunc(was, func(cm corev1.ConfigMap) bool { _, ok := cm.Data[failed]; return ok })
	edit, _ := json.Marshal(map[string]any{"data": map[string]any{failed: nil, "intruder": "{}"}})
	t.Logf("editing rollout record %s: %s", was[i].Name, edit)
	if _, err := e.cluster.Client.CoreV1().ConfigMaps(harness.SystemNamespace).Patch(e.ctx(), was[i].Name, types.MergePatchType, edit, metav1.PatchOptions{}); err != nil {
		t.Fatalf("editing rollout record %s: %v", was[i].Name, err)
	}
	e.wantRecordRestored(ds, was, failed, false)
	records, err := e.rolloutRecord(e.ctx(), ds.UID)
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range records {
		if _, ok := cm.Data["intruder"]; ok {
			t.Errorf("got %s still holding the stranger's key, want it removed", cm.Name)
		}
	}
}

// recordedFailure starts a rollout of a crash-looping version (max-failed
// high enough not to halt) and waits for its one failure to be in the
// rollout record: the DaemonSet, the record's ConfigMaps then, and the
// failed node.
func recordedFailure(t *testing.T) (*env, *appsv1.DaemonSet, []corev1.ConfigMap, string) {
	const nodes = 3
	e := newEnv(t, nodes)
	e.createDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "1",
		rollout.MaxFailedAnnotation: "10"})
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.setImage(localcluster.CrashLoopImages[0])
	s := e.waitRolloutStatus("one node failed", func(s *rollout.Status) bool { return s.Failed.Count == 1 })
	if s.Halted {
		t.Fatalf("got %+v, want not halted under max-failed 10", s)
	}
	failed := s.Failed.Nodes[0]

	ds, err := e.cluster.Client.AppsV1().DaemonSets(e.ns).Get(e.ctx(), dsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var was []corev1.ConfigMap
	eventually(t, "the failure of "+failed+" in the rollout record", func(ctx context.Context) (bool, string, error) {
		var err error
		if was, err = e.rolloutRecord(ctx, ds.UID); err != nil {
			return false, "", err
		}
		stage := recordedStage(was, failed)
		return stage == "failed", fmt.Sprintf("%s's entry %q in %d ConfigMaps", failed, stage, len(was)), nil
	})
	return e, ds, was, failed
}

// wantRecordRestored waits for the record's ConfigMaps to hold again what
// was holds (recreated: as new objects), for a Warning
// RolloutRecordRewritten, and checks that the status still counts the one
// failure, of failed, unhalted.
func (e *env) wantRecordRestored(ds *appsv1.DaemonSet, was []corev1.ConfigMap, failed string, recreated bool) {
	t := e.t
	t.Helper()
	eventually(t, "the rollout record written again as it was", func(ctx context.Context) (bool, string, error) {
		records, err := e.rolloutRecord(ctx, ds.UID)
		if err != nil {
			return false, "", err
		}
		var state []string
		ok := true
		for _, old := range was {
			i := slices.IndexFunc(records, func(cm corev1.ConfigMap) bool { return cm.Name == old.Name && (cm.UID != old.UID) == recreated })
			if i < 0 {
				state, ok = append(state, old.Name+" not written again"), false
				continue
			}
			for k, v := range old.Data {
				if got, found := records[i].Data[k]; !found || got != v {
					state, ok = append(state, fmt.Sprintf("%s holds %s: %q, want %q", old.Name, k, got, v)), false
				}
			}
		}
		return ok, strings.Join(state, "; "), nil
	})
	eventually(t, "a Warning "+rollout.ReasonRecordRewritten, func(context.Context) (bool, string, error) {
		events := e.eventsOf(rollout.ReasonRecordRewritten)
		return len(events) > 0 && events[0].Type == corev1.EventTypeWarning, fmt.Sprintf("%d events", len(events)), nil
	})
	s := e.waitRolloutStatus("the status", func(*rollout.Status) bool { return true })
	if s.Failed.Count != 1 || !slices.Equal(s.Failed.Nodes, []string{failed}) || s.Halted {
		t.Errorf("after the rewrite: got failed %+v, halted %t; want %s failed, not halted", s.Failed, s.Halted, failed)
	}
}

// rolloutRecord lists the ConfigMaps of the DaemonSet's rollout record in
// the controller's record namespace.
func (e *env) rolloutRecord(ctx context.Context, uid types.UID) ([]corev1.ConfigMap, error) {
	list, err := e.cluster.Client.CoreV1().ConfigMaps(harness.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: recordLabel + "=" + string(uid)})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// recordedStage is the stage the record's ConfigMaps hold for the node (one
// key per node, its entry as JSON): the latest stage when two hold it, ""
// when none.
func recordedStage(records []corev1.ConfigMap, node string) string {
	rank := []string{"", "offered", "inFlight", "settled", "failed"}
	best := ""
	for _, cm := range records {
		value, ok := cm.Data[node]
		if !ok {
			continue
		}
		var entry struct {
			State string `json:"state"`
		}
		if err := json.Unmarshal([]byte(value), &entry); err != nil {
			return "unreadable: " + strings.TrimSpace(value)
		}
		if slices.Index(rank, entry.State) > slices.Index(rank, best) {
			best = entry.State
		}
	}
	return best
}
