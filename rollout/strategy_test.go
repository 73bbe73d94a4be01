package rollout

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
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
			ds := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}}}
			ds.Annotations = tt.annotations
			got, legacy, ok, err := StrategyOf(ds)
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if got != tt.want || ok != tt.wantOK || legacy != tt.wantLegacy {
				t.Errorf("got (%q, legacy %v, ok %v), want (%q, legacy %v, ok %v)", got, legacy, ok, tt.want, tt.wantLegacy, tt.wantOK)
			}
		})
	}
}

func TestStrategyNeedsOnDelete(t *testing.T) {
	ds := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}}}
	ds.Annotations = map[string]string{StrategyAnnotation: "auto"}
	s, _, ok, err := StrategyOf(ds)
	if !ok || err == nil || s != StrategyAdvancedRollingUpdate {
		t.Errorf("got (%q, ok %v, %v), want (%q, ok true, an error)", s, ok, err, StrategyAdvancedRollingUpdate)
	}
	ds.Annotations = map[string]string{StrategyAnnotation: "sometimes"}
	if s, _, ok, err := StrategyOf(ds); !ok || err == nil || s != "" {
		t.Errorf("unknown value: got (%q, ok %v, %v), want (\"\", ok true, an error)", s, ok, err)
	}
}
