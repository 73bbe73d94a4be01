package controller

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestStrategySpellings(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        Strategy
		wantOK      bool
		wantLegacy  bool
	}{
		{"OTA", map[string]string{StrategyAnnotation: "OTA"}, StrategyOTA, true, false},
		{"ota", map[string]string{StrategyAnnotation: "ota"}, StrategyOTA, true, false},
		{"Ota with spaces", map[string]string{StrategyAnnotation: " Ota "}, StrategyOTA, true, false},
		{"AdvancedRollingUpdate", map[string]string{StrategyAnnotation: "AdvancedRollingUpdate"}, StrategyAdvancedRollingUpdate, true, false},
		{"advancedrollingupdate", map[string]string{StrategyAnnotation: "advancedrollingupdate"}, StrategyAdvancedRollingUpdate, true, false},
		{"auto", map[string]string{StrategyAnnotation: "auto"}, StrategyAdvancedRollingUpdate, true, false},
		{"AUTO", map[string]string{StrategyAnnotation: "AUTO"}, StrategyAdvancedRollingUpdate, true, false},
		{"legacy key", map[string]string{LegacyStrategyAnnotation: "ota"}, StrategyOTA, true, true},
		{"legacy key auto", map[string]string{LegacyStrategyAnnotation: "Auto"}, StrategyAdvancedRollingUpdate, true, true},
		{"canonical key wins", map[string]string{StrategyAnnotation: "ota", LegacyStrategyAnnotation: "auto"}, StrategyOTA, true, false},
		{"not annotated", map[string]string{}, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDaemonSet()
			ds.Annotations = tt.annotations
			got, legacy, ok, err := strategyOf(ds)
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if got != tt.want || ok != tt.wantOK || legacy != tt.wantLegacy {
				t.Errorf("got (%q, legacy %v, ok %v), want (%q, legacy %v, ok %v)", got, legacy, ok, tt.want, tt.wantLegacy, tt.wantOK)
			}
		})
	}
}

func TestIgnoresMisconfiguredDaemonSets(t *testing.T) {
	tests := []struct {
		name       string
		ds         *appsv1.DaemonSet
		wantReason string
	}{
		{"RollingUpdate strategy", newDaemonSet(withAnnotation(StrategyAnnotation, "OTA"), withUpdateStrategy(appsv1.RollingUpdateDaemonSetStrategyType)), ReasonUnsupportedUpdateStrategy},
		{"unknown value", newDaemonSet(withAnnotation(StrategyAnnotation, "sometimes")), ReasonInvalidStrategy},
		{"unknown value with RollingUpdate", newDaemonSet(withAnnotation(StrategyAnnotation, "x"), withUpdateStrategy(appsv1.RollingUpdateDaemonSetStrategyType)), ReasonInvalidStrategy},
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
	f := newFixture(t, cluster(newDaemonSet(withAnnotation(LegacyStrategyAnnotation, "ota")), readyNodes(1))...)
	f.sync()
	f.wantEvent(f.events(), corev1.EventTypeNormal, ReasonDeprecatedAnnotation)
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
