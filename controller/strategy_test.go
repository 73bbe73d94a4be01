package controller

import (
	"testing"

	"github.com/edgeota/edgeota/rollout"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestIgnoresMisconfiguredDaemonSets(t *testing.T) {
	tests := []struct {
		name       string
		ds         *appsv1.DaemonSet
		wantReason string
	}{
		{"RollingUpdate strategy", newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "OTA"), withUpdateStrategy(appsv1.RollingUpdateDaemonSetStrategyType)), rollout.ReasonUnsupportedUpdateStrategy},
		{"unknown value", newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "sometimes")), rollout.ReasonInvalidStrategy},
		{"unknown value with RollingUpdate", newDaemonSet(withAnnotation(rollout.StrategyAnnotation, "x"), withUpdateStrategy(appsv1.RollingUpdateDaemonSetStrategyType)), rollout.ReasonInvalidStrategy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, cluster(tt.ds, readyNodes(2))...)
			f.sync() // a nil error: no requeue for a configuration error
			if w := f.writes(); len(w) != 0 {
				t.Errorf("got %d writes %v, want none", len(w), w)
			}
			f.wantEvent(f.events(), corev1.EventTypeWarning, tt.wantReason)
			if n := f.c.queue.Len(); n != 0 {
				t.Errorf("got %d queued, want 0: a configuration error must not requeue", n)
			}
		})
	}
}

func TestLegacyKeyRecordsEvent(t *testing.T) {
	f := newFixture(t, cluster(newDaemonSet(withAnnotation(rollout.LegacyStrategyAnnotation, "ota")), readyNodes(1))...)
	f.sync()
	f.wantEvent(f.events(), corev1.EventTypeNormal, rollout.ReasonDeprecatedAnnotation)
	if got := len(f.conditionPatches()); got != 1 {
		t.Errorf("got %d pods patched, want 1: the legacy key opts in", got)
	}
}

func TestIgnoresDaemonSetsNotOptedIn(t *testing.T) {
	f := newFixture(t, cluster(newDaemonSet(), readyNodes(2))...)
	f.sync()
	if w := f.writes(); len(w) != 0 {
		t.Errorf("got writes %v, want none", w)
	}
	if e := f.events(); len(e) != 0 {
		t.Errorf("got events %q, want none", e)
	}
}
