package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

// richPod sets every field the contract promises to keep, with values that
// differ from their zero values.
func richPod() *corev1.Pod {
	created := metav1.NewTime(time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC))
	started := metav1.NewTime(created.Add(2 * time.Second))
	deleted := metav1.NewTime(created.Add(time.Hour))
	finished := metav1.NewTime(created.Add(30 * time.Second))
	no := false
	pod := dsPod("rich", withCondition(corev1.PodCondition{
		Type: "PodNeedUpgrade", Status: corev1.ConditionTrue, Reason: "NewRevision", Message: testTarget, LastTransitionTime: started,
	}))
	pod.Annotations = map[string]string{"note": "kept"}
	pod.CreationTimestamp = created
	pod.DeletionTimestamp = &deleted
	pod.OwnerReferences[0].BlockOwnerDeletion = &no
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox:1.36"}}
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "sidecar", Image: "envoy:1.30"})
	pod.Status.Reason = "Evicted"
	pod.Status.Message = "a message"
	pod.Status.HostIP = "10.0.0.1"
	pod.Status.PodIP = "10.244.0.7"
	pod.Status.StartTime = &started
	pod.Status.Conditions[0].LastTransitionTime = started
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "app", Image: "nginx:1.19.4", ImageID: "docker-pullable://nginx@sha256:abc", Ready: true, RestartCount: 3,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}},
		{Name: "sidecar", Image: "envoy:1.30", RestartCount: 1,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off"}}},
		{Name: "done", Image: "busybox:1.36",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: finished}}},
	}
	return pod
}

// contractView keeps only the fields the contract promises, so that a pod
// read back through GET /pods can be compared with the one stored.
func contractView(p *corev1.Pod) corev1.Pod {
	out := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, Labels: p.Labels, Annotations: p.Annotations,
			OwnerReferences: p.OwnerReferences, CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
			ResourceVersion: p.ResourceVersion,
		},
		Status: corev1.PodStatus{
			Phase: p.Status.Phase, Reason: p.Status.Reason, Message: p.Status.Message, HostIP: p.Status.HostIP,
			PodIP: p.Status.PodIP, StartTime: p.Status.StartTime, Conditions: p.Status.Conditions,
			ContainerStatuses: p.Status.ContainerStatuses,
		},
	}
	out.Spec.NodeName = p.Spec.NodeName
	for _, c := range p.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	for _, c := range p.Spec.InitContainers {
		out.Spec.InitContainers = append(out.Spec.InitContainers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	return out
}

func TestGetPodsDecodesAsPodList(t *testing.T) {
	rich := richPod()
	f := newFixture(t, fixtureOptions{}, rich, dsPod("elsewhere", onNode("edge-2")), dsPod("a", inNamespace("zeta")), dsPod("b"))

	for _, accept := range []string{"", "*/*", "text/plain", "application/json"} {
		resp := f.do(http.MethodGet, "/pods", accept)
		if resp.status != http.StatusOK || resp.contentType != "application/json" {
			t.Fatalf("Accept %q: got %d %q, want 200 application/json", accept, resp.status, resp.contentType)
		}
		var raw map[string]any
		if err := json.Unmarshal([]byte(resp.body), &raw); err != nil {
			t.Fatalf("Accept %q: got %q, want JSON: %v", accept, resp.body, err)
		}
		if raw["kind"] != "PodList" || raw["apiVersion"] != "v1" {
			t.Errorf("got kind %v apiVersion %v, want PodList v1", raw["kind"], raw["apiVersion"])
		}
		var list corev1.PodList
		if err := json.Unmarshal([]byte(resp.body), &list); err != nil {
			t.Fatalf("decoding into v1.PodList: %v", err)
		}
		var names []string
		for _, p := range list.Items {
			names = append(names, p.Namespace+"/"+p.Name)
		}
		if want := []string{"default/b", "default/rich", "zeta/a"}; !cmp.Equal(names, want) {
			t.Fatalf("got pods %v, want %v (this node's only, sorted)", names, want)
		}
		if diff := cmp.Diff(contractView(rich), list.Items[1]); diff != "" {
			t.Errorf("pod read back differs from the stored one (-want +got):\n%s", diff)
		}
	}
}

func TestGetPodsUsesKubernetesJSONNames(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, richPod())
	resp := f.do(http.MethodGet, "/pods", "")
	var list struct {
		Items []struct {
			Status map[string]any `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(resp.body), &list); err != nil || len(list.Items) != 1 {
		t.Fatalf("got %q (%v), want one pod", resp.body, err)
	}
	st := list.Items[0].Status
	for _, key := range []string{"podIP", "hostIP"} {
		if _, ok := st[key]; !ok {
			t.Errorf("status has no %q: %v", key, st)
		}
	}
	cs := st["containerStatuses"].([]any)[0].(map[string]any)
	if cs["imageID"] != "docker-pullable://nginx@sha256:abc" {
		t.Errorf("got imageID %v, want the runtime's image ID", cs["imageID"])
	}
	if rc, ok := cs["restartCount"].(float64); !ok || rc != 3 {
		t.Errorf("got restartCount %#v, want the JSON number 3", cs["restartCount"])
	}
}

func TestListPodsOverGRPC(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, dsPod("p"), dsPod("q", onNode("edge-2")))
	resp, err := f.rpc.ListPods(context.Background(), &edgeotav1.ListPodsRequest{})
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	if resp.GetKind() != "PodList" || len(resp.GetItems()) != 1 || resp.GetItems()[0].GetMetadata().GetName() != "p" {
		t.Errorf("got %v, want a PodList holding only p", resp)
	}
	conds := resp.GetItems()[0].GetStatus().GetConditions()
	if len(conds) != 2 || conds[1].GetType() != "PodNeedUpgrade" || conds[1].GetStatus() != "True" || conds[1].GetMessage() != testTarget {
		t.Errorf("got conditions %v, want Ready and PodNeedUpgrade=True", conds)
	}
}

func TestListPodsBeforeSyncIsUnavailable(t *testing.T) {
	f := newFixture(t, fixtureOptions{unsynced: true}, dsPod("p"))
	_, err := f.rpc.ListPods(context.Background(), &edgeotav1.ListPodsRequest{})
	if got := status.Code(err); got != codes.Unavailable {
		t.Errorf("got %v (%v), want Unavailable", got, err)
	}
}

// TestListPodsFollowsTheCache changes the node's pods and wants both
// protocols to show each change: the answer (and its encodings) are reused
// only while the cache stays the same.
func TestListPodsFollowsTheCache(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, dsPod("p"))
	pods := f.client.CoreV1().Pods("default")
	ctx := context.Background()
	steps := []struct {
		name   string
		change func() error
		want   string // "name=image ..." of the listed pods
	}{
		{"unchanged", func() error { return nil }, "p=nginx:1.19.4"},
		{"added", func() error { _, err := pods.Create(ctx, dsPod("q"), metav1.CreateOptions{}); return err }, "p=nginx:1.19.4 q=nginx:1.19.4"},
		{"updated", func() error {
			p := dsPod("p")
			p.Spec.Containers[0].Image = "nginx:1.20"
			_, err := pods.Update(ctx, p, metav1.UpdateOptions{})
			return err
		}, "p=nginx:1.20 q=nginx:1.19.4"},
		{"deleted", func() error { return pods.Delete(ctx, "q", metav1.DeleteOptions{}) }, "p=nginx:1.20"},
	}
	for _, step := range steps {
		if err := step.change(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		var gotREST, gotGRPC string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			var list corev1.PodList
			if err := json.Unmarshal([]byte(f.do(http.MethodGet, "/pods", "application/json").body), &list); err != nil {
				t.Fatalf("%s: decoding GET /pods: %v", step.name, err)
			}
			var rest []string
			for _, p := range list.Items {
				rest = append(rest, p.Name+"="+p.Spec.Containers[0].Image)
			}
			resp, err := f.rpc.ListPods(ctx, &edgeotav1.ListPodsRequest{})
			if err != nil {
				t.Fatalf("%s: ListPods: %v", step.name, err)
			}
			var grpcPods []string
			for _, p := range resp.GetItems() {
				grpcPods = append(grpcPods, p.GetMetadata().GetName()+"="+p.GetSpec().GetContainers()[0].GetImage())
			}
			if gotREST, gotGRPC = strings.Join(rest, " "), strings.Join(grpcPods, " "); gotREST == step.want && gotGRPC == step.want {
				break
			}
		}
		if gotREST != step.want || gotGRPC != step.want {
			t.Errorf("%s: got REST %q and gRPC %q, want %q", step.name, gotREST, gotGRPC, step.want)
		}
	}
}
