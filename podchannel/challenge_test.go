package podchannel

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/rollout"
)

func TestChallengeRoundTrip(t *testing.T) {
	c, err := NewChallenge("uid-1")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := NewChallenge("uid-1")
	if c.Nonce == d.Nonce {
		t.Errorf("two challenges share the nonce %q, want fresh ones", c.Nonce)
	}
	got, err := ParseChallenge(c.String())
	if err != nil || got != c {
		t.Errorf("got %+v, %v; want %+v", got, err, c)
	}
	for _, bad := range []string{"", "uid", "/nonce", "uid/", "uid/not base64!", strings.Repeat("a", 200) + "/abc"} {
		if got, err := ParseChallenge(bad); err == nil {
			t.Errorf("%q: got %+v, want an error", bad, got)
		}
	}
}

func TestToAnswer(t *testing.T) {
	c, _ := NewChallenge("uid-1")
	other, _ := NewChallenge("uid-2")
	pod := func(annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-1", Annotations: annotations}}
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{"no challenge", nil, ""},
		{"a challenge", map[string]string{rollout.ChallengeAnnotation: c.String()}, c.String()},
		{"answered", map[string]string{rollout.ChallengeAnnotation: c.String(), rollout.AnswerAnnotation: c.String()}, ""},
		{"an old answer", map[string]string{rollout.ChallengeAnnotation: c.String(), rollout.AnswerAnnotation: "uid-1/b2xk"}, c.String()},
		{"another pod's challenge", map[string]string{rollout.ChallengeAnnotation: other.String()}, ""},
		{"garbage", map[string]string{rollout.ChallengeAnnotation: "x"}, ""},
	} {
		got, ok := ToAnswer(pod(tc.annotations))
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}
