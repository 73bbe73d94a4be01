//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/localcluster"
	recordstore "github.com/edgeota/edgeota/record"
	"github.com/edgeota/edgeota/rollout"
)

// TestDeletedRecordRewritten: during a rollout of a crash-looping version
// with one failure recorded (max-failed high enough not to halt), every
// ConfigMap of the rollout record is deleted; the controller, which watches
// its records' metadata alone, writes the record again as it was, the
// failure in it, says so with a Warning RolloutRecordRewritten on the
// DaemonSet, and still counts the failure.
func TestDeletedRecordRewritten(t *testing.T) {
	t.Parallel()
	e, ds, was, failed := recordedFailure(t)
	for _, cm := range was.items {
		t.Logf("deleting rollout record %s", cm.Name)
		// The controller may have superseded it already, rewriting the
		// record after the first deletion.
		if err := e.cluster.Client.CoreV1().ConfigMaps(harness.SystemNamespace).Delete(e.ctx(), cm.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting rollout record %s: %v", cm.Name, err)
		}
	}
	e.wantRecordRestored(ds, was, failed)
}

// TestChangedRecordRewritten: the same, but someone else edits the
// ConfigMap holding the failure: its entries replaced by bytes that do not
// read, and a key of their own added. The controller's watch carries no
// data: the edit shows as a resourceVersion it did not write, and the
// record is written again as it was, the edited ConfigMap and the
// stranger's key gone.
func TestChangedRecordRewritten(t *testing.T) {
	t.Parallel()
	e, ds, was, failed := recordedFailure(t)
	i := slices.IndexFunc(was.items, func(cm corev1.ConfigMap) bool {
		entries, _ := recordstore.Read([]corev1.ConfigMap{cm}, ds.UID, was.target)
		_, ok := entries[failed]
		return ok
	})
	if i < 0 {
		t.Fatalf("got no ConfigMap of the record holding %s's entry alone", failed)
	}
	edit, _ := json.Marshal(map[string]any{"binaryData": map[string]any{"entries": []byte("not gzip")}, "data": map[string]any{"intruder": "{}"}})
	t.Logf("editing rollout record %s: %s", was.items[i].Name, edit)
	if _, err := e.cluster.Client.CoreV1().ConfigMaps(harness.SystemNamespace).Patch(e.ctx(), was.items[i].Name, types.MergePatchType, edit, metav1.PatchOptions{}); err != nil {
		t.Fatalf("editing rollout record %s: %v", was.items[i].Name, err)
	}
	e.wantRecordRestored(ds, was, failed)
	records, err := e.rolloutRecord(e.ctx(), ds.UID)
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range records {
		if _, ok := cm.Data["intruder"]; ok || cm.Name == was.items[i].Name {
			t.Errorf("got %s (%d keys of data) still there, want the edited ConfigMap gone", cm.Name, len(cm.Data))
		}
	}
}

// recordSeen is a DaemonSet's rollout record as the test saw it: its
// ConfigMaps, the target revision they are about, and what they hold, read
// as the controller reads them back.
type recordSeen struct {
	items   []corev1.ConfigMap
	target  decision.Target
	entries map[string]decision.Entry
}

// recordedFailure starts a rollout of a crash-looping version (max-failed
// high enough not to halt) and waits for its one failure to be in the
// rollout record: the DaemonSet, the record then, and the failed node.
func recordedFailure(t *testing.T) (*env, *appsv1.DaemonSet, recordSeen, string) {
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
	was := recordSeen{target: decision.Target{Hash: s.Hash, Number: s.Revision}}
	eventually(t, "the failure of "+failed+" in the rollout record", func(ctx context.Context) (bool, string, error) {
		var err error
		if was.items, err = e.rolloutRecord(ctx, ds.UID); err != nil {
			return false, "", err
		}
		was.entries, _ = recordstore.Read(was.items, ds.UID, was.target)
		stage := was.entries[failed].Stage
		return stage == decision.StageFailed, fmt.Sprintf("%s's entry %q in %d ConfigMaps", failed, stage, len(was.items)), nil
	})
	return e, ds, was, failed
}

// wantRecordRestored waits for the record's ConfigMaps to hold again what
// was held, read as the controller reads them back, for a Warning
// RolloutRecordRewritten, and checks that the status still counts the one
// failure, of failed, unhalted.
func (e *env) wantRecordRestored(ds *appsv1.DaemonSet, was recordSeen, failed string) {
	t := e.t
	t.Helper()
	eventually(t, "the rollout record written again as it was", func(ctx context.Context) (bool, string, error) {
		records, err := e.rolloutRecord(ctx, ds.UID)
		if err != nil {
			return false, "", err
		}
		entries, _ := recordstore.Read(records, ds.UID, was.target)
		var state []string
		for node, want := range was.entries {
			if got, ok := entries[node]; !ok || !reflect.DeepEqual(got, want) {
				state = append(state, fmt.Sprintf("%s: %+v, want %+v", node, got, want))
			}
		}
		return len(state) == 0, fmt.Sprintf("%d ConfigMaps; %s", len(records), strings.Join(state, "; ")), nil
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
	list, err := e.cluster.Client.CoreV1().ConfigMaps(harness.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: recordstore.Label + "=" + string(uid)})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}
