package podcondition

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestRevision(t *testing.T) {
	cases := []struct {
		msg, want string
		ok        bool
	}{
		{RevisionMessage("abc"), "abc", true},
		{"controllerrevision: ", "", false},
		{FailureMessage("abc", "ErrImagePull: manifest unknown"), "abc", true},
		{"controllerrevision: ; cause", "", false},
		{"something else", "", false},
	}
	for _, tc := range cases {
		got, ok := Revision(tc.msg)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Revision(%q): got %q, %v, want %q, %v", tc.msg, got, ok, tc.want, tc.ok)
		}
	}
}

func newPod(conds ...corev1.PodCondition) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"},
		Status:     corev1.PodStatus{Conditions: conds},
	}
}

// TestSetKeepsOtherConditions writes through the fake clientset, which applies
// strategic-merge patches as the API server does.
func TestSetKeepsOtherConditions(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pod := newPod(
		corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		corev1.PodCondition{Type: NeedUpgrade, Status: corev1.ConditionTrue, Message: RevisionMessage("a"), LastTransitionTime: then},
	)
	client := fake.NewClientset(pod)
	ctx := context.Background()

	got, err := Set(ctx, client.CoreV1(), pod, corev1.PodCondition{Type: NeedUpgrade, Status: corev1.ConditionTrue, Message: RevisionMessage("b")}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 2 || !IsTrue(&got.Status, corev1.PodReady) {
		t.Fatalf("got conditions %+v, want Ready kept beside PodNeedUpgrade", got.Status.Conditions)
	}
	c := Get(&got.Status, NeedUpgrade)
	if c.Message != RevisionMessage("b") || !c.LastTransitionTime.Equal(&then) {
		t.Errorf("got %+v, want message for b and the old transition time (status unchanged)", c)
	}

	got, err = Set(ctx, client.CoreV1(), got, corev1.PodCondition{Type: NeedUpgrade, Status: corev1.ConditionFalse, Message: RevisionMessage("b")}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if c := Get(&got.Status, NeedUpgrade); c.Status != corev1.ConditionFalse || c.LastTransitionTime.Equal(&then) {
		t.Errorf("got %+v, want False with a new transition time", c)
	}

	got, err = Remove(ctx, client.CoreV1(), got, NeedUpgrade, "test")
	if err != nil {
		t.Fatal(err)
	}
	if Get(&got.Status, NeedUpgrade) != nil || !IsTrue(&got.Status, corev1.PodReady) {
		t.Errorf("got conditions %+v, want only Ready", got.Status.Conditions)
	}
}

func TestEqual(t *testing.T) {
	pod := newPod(corev1.PodCondition{Type: NeedUpgrade, Status: corev1.ConditionTrue, Reason: "r", Message: "m"})
	same := corev1.PodCondition{Type: NeedUpgrade, Status: corev1.ConditionTrue, Reason: "r", Message: "m"}
	if !Equal(&pod.Status, same) {
		t.Errorf("got not equal, want equal")
	}
	for _, other := range []corev1.PodCondition{
		{Type: NeedUpgrade, Status: corev1.ConditionFalse, Reason: "r", Message: "m"},
		{Type: NeedUpgrade, Status: corev1.ConditionTrue, Reason: "x", Message: "m"},
		{Type: NeedUpgrade, Status: corev1.ConditionTrue, Reason: "r", Message: "x"},
		{Type: ImageReady, Status: corev1.ConditionTrue, Reason: "r", Message: "m"},
	} {
		if Equal(&pod.Status, other) {
			t.Errorf("Equal(%+v): got true, want false", other)
		}
	}
}

// TestSetAnnotatedCarriesAnnotationsInTheSamePatch checks that the condition
// and the annotation changes travel in one status patch, and that nil
// removes an annotation while others stay.
func TestSetAnnotatedCarriesAnnotationsInTheSamePatch(t *testing.T) {
	pod := newPod()
	pod.Annotations = map[string]string{"keep": "1", "drop": "2"}
	client := fake.NewClientset(pod)
	value := "v"
	got, err := SetAnnotated(context.Background(), client.CoreV1(), pod,
		corev1.PodCondition{Type: NeedUpgrade, Status: corev1.ConditionTrue, Message: RevisionMessage("a")},
		Annotations{"set": &value, "drop": nil}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(client.Actions()); n != 1 {
		t.Fatalf("got %d actions, want 1 patch", n)
	}
	want := map[string]string{"keep": "1", "set": "v"}
	if len(got.Annotations) != len(want) || got.Annotations["keep"] != "1" || got.Annotations["set"] != "v" {
		t.Errorf("got annotations %v, want %v", got.Annotations, want)
	}
	if !IsTrue(&got.Status, NeedUpgrade) {
		t.Errorf("got conditions %+v, want PodNeedUpgrade True", got.Status.Conditions)
	}
}

// TestAnnotateWritesNoCondition checks an annotation-only status patch.
func TestAnnotateWritesNoCondition(t *testing.T) {
	pod := newPod(corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	client := fake.NewClientset(pod)
	value := "x"
	got, err := Annotate(context.Background(), client.CoreV1(), pod, Annotations{"k": &value}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations["k"] != "x" || len(got.Status.Conditions) != 1 {
		t.Errorf("got annotations %v and conditions %+v, want k=x and Ready alone", got.Annotations, got.Status.Conditions)
	}
}
