package controller

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/rollout"
)

// TestStatusParsedOncePerValue: every sync reads the DaemonSet's current
// rollout status; a value already parsed is not parsed again (the same
// status comes back), and every other value is: one this process wrote, one
// the cache shows for a namesake DaemonSet, one that does not parse.
func TestStatusParsedOncePerValue(t *testing.T) {
	const key = "ns/ds"
	w := newStatusWrites()
	ds := func(uid, value string) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ds", UID: types.UID(uid),
			Annotations: map[string]string{rollout.RolloutStatusAnnotation: value}}}
	}
	cached := `{"revision":2,"hash":"h2","updated":1,"total":3}`
	value, first := w.current(key, ds("u1", cached))
	if value != cached || first == nil || first.Revision != 2 || first.Updated != 1 {
		t.Fatalf("got %q, %+v, want the cached status of revision 2", value, first)
	}
	if _, again := w.current(key, ds("u1", cached)); again != first {
		t.Errorf("got a status parsed again (%p), want the one parsed before (%p)", again, first)
	}

	written := `{"revision":2,"hash":"h2","updated":2,"total":3}`
	w.record(key, "u1", written, time.Unix(0, 0))
	value, mine := w.current(key, ds("u1", cached))
	if value != written || mine == nil || mine.Updated != 2 {
		t.Errorf("got %q, %+v, want the status this process wrote (2 updated)", value, mine)
	}

	value, namesake := w.current(key, ds("u2", cached))
	if value != cached || namesake == nil || namesake.Updated != 1 || namesake == first {
		t.Errorf("got %q, %+v, want the namesake's status of the cache, parsed anew", value, namesake)
	}

	if value, bad := w.current(key, ds("u2", "{not json")); value != "{not json" || bad != nil {
		t.Errorf("got %q, %+v, want the unparsable value and no status", value, bad)
	}

	w.forget(key)
	if _, after := w.current(key, ds("u2", cached)); after == nil || after == namesake {
		t.Errorf("got %p after forget, want a status parsed anew", after)
	}
}
