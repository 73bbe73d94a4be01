package podchannel

import (
	"strings"
	"testing"
	"time"

	"github.com/edgeota/edgeota/rollout"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func podWith(key, value string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Annotations: map[string]string{key: value}}}
}

func TestOfferRoundTrip(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	want := &Offer{Revision: "abc", Images: map[string]string{"app": "nginx:1.2"}, ProgressDeadlineSeconds: 60, OfferedAt: &at}
	value, err := Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := OfferOf(podWith(rollout.OfferAnnotation, value))
	if err != nil || !got.Equal(want) {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
	if got, err := OfferOf(&corev1.Pod{}); got != nil || err != nil {
		t.Errorf("without the annotation: got %+v, %v; want nil, nil", got, err)
	}
}

func TestOfferRefusesBadInput(t *testing.T) {
	for _, value := range []string{`not json`, `{}`, `{"revision":"a","progressDeadlineSeconds":-1}`, `{"revision":"a","images":{"c":""}}`} {
		if got, err := OfferOf(podWith(rollout.OfferAnnotation, value)); err == nil {
			t.Errorf("%s: got %+v, want an error", value, got)
		}
	}
}

func TestHoldValidation(t *testing.T) {
	until := metav1.NewTime(time.Now().Add(time.Hour))
	good, _ := Encode(&Hold{Until: until, Reason: "driving"})
	if h, err := HoldOf(podWith(rollout.HoldAnnotation, good)); err != nil || !h.Active(time.Now()) || h.Active(until.Add(time.Second)) {
		t.Errorf("got %+v, %v; want an active hold ending at %s", h, err, until)
	}
	for _, bad := range []*Hold{{}, {Until: until, Reason: strings.Repeat("x", MaxReasonLength+1)}, {Until: until, Reason: "a\nb"}} {
		value, _ := Encode(bad)
		if h, err := HoldOf(podWith(rollout.HoldAnnotation, value)); err == nil {
			t.Errorf("%s: got %+v, want an error", value, h)
		}
	}
	for _, reason := range []string{"a\x00b", "a\x7fb", "a\u0085b", "a\u009b31mb", "\xff\xfe"} {
		if err := (&Hold{Until: until, Reason: reason}).Validate(); err == nil {
			t.Errorf("reason %q: got valid, want an error", reason)
		}
	}
	if err := (&Hold{Until: until, Reason: "Lieferung \u00fcber Nacht, \u5b89\u5168"}).Validate(); err != nil {
		t.Errorf("a printable non-ASCII reason: got %v, want valid", err)
	}
	var none *Hold
	if none.Active(time.Now()) {
		t.Errorf("a nil hold: got active, want not")
	}
}
