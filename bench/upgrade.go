package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/podcondition"
)

// upgradeScenario: POST .../upgrade to the agent, or (baseline) a direct API
// delete of the same pod, alternating, until a watch sees the pod
// terminating. It has no target: the agent does more by contract (a live
// GET before a preconditioned DELETE).
var upgradeScenario = scenario{name: "upgrade", run: runUpgrade}

// upgradeNamespace holds the upgrade scenario's OTA DaemonSet, on the agent's
// node only.
const upgradeNamespace = "bench-upgrade"

// An upgrade the agent refuses because its cache lags the API server by a
// write (PodNeedUpgrade not yet True, a stale resourceVersion) is retried
// this often, within this bound; the timing starts at the accepted attempt.
const (
	retryInterval = 20 * time.Millisecond
	retryTimeout  = 5 * time.Second
)

// upgradeFigures are the upgrade scenario's results: request until the watch
// sees the pod terminating (deletionTimestamp set) or gone, whichever comes
// first.
type upgradeFigures struct {
	agent   []time.Duration // POST .../upgrade to the agent
	direct  []time.Duration // baseline: the bench deletes the pod itself
	retries int             // agent refusals retried (cache lag)
	cpu     time.Duration   // the scenario's controller, its whole life
	memory  measure.Memory
}

func runUpgrade(ctx context.Context, s *session, _ *findings) (table, error) {
	progress("upgrade latency: %d upgrades per method", s.p.upgrades)
	agent, err := s.nodeAgent(ctx)
	if err != nil {
		return table{}, err
	}
	f, err := benchUpgrade(ctx, s, agent)
	if err != nil {
		return table{}, err
	}
	return upgradeTable(f), nil
}

// benchUpgrade alternates upgrades through the agent with direct deletes of
// the same DaemonSet's pod, each after an image change has made the pod
// PodNeedUpgrade=True.
func benchUpgrade(ctx context.Context, s *session, agent *child) (upgradeFigures, error) {
	var f upgradeFigures
	client := s.cluster.Client
	nodes := []string{agentNode}
	ds := daemonSet("ota", otaStrategy, map[string]string{"kubernetes.io/hostname": agentNode})
	pods, err := deploy(ctx, client, upgradeNamespace, ds, nodes)
	if err != nil {
		return f, err
	}
	defer pods.close()
	ctrl, err := s.startController(ctx, "ota-controller-upgrade", 0)
	if err != nil {
		return f, err
	}
	for i := 1; i <= 2*s.p.upgrades; i++ {
		img := image(1 + i%2) // alternate two tags
		if err := setImage(ctx, client, upgradeNamespace, "ota", img); err != nil {
			return f, err
		}
		pod, err := waitNeedUpgrade(ctx, pods, img)
		if err != nil {
			return f, err
		}
		byAgent := i%2 == 1
		start, err := time.Now(), error(nil)
		if byAgent {
			start, err = postUpgrade(ctx, agent, pod, &f.retries)
		} else {
			err = client.CoreV1().Pods(upgradeNamespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		}
		if err != nil {
			return f, fmt.Errorf("upgrading pod %s: %w", pod.Name, err)
		}
		var took time.Duration
		err = pods.until(ctx, settleTimeout, "pod "+pod.Name+" to be deleted", func(now time.Time, items map[string]*corev1.Pod) bool {
			p := items[upgradeNamespace+"/"+pod.Name]
			took = now.Sub(start)
			return p == nil || p.UID != pod.UID || p.DeletionTimestamp != nil
		})
		if err != nil {
			return f, err
		}
		if byAgent {
			f.agent = append(f.agent, took)
		} else {
			f.direct = append(f.direct, took)
		}
		if err := waitUpToDate(ctx, pods, img, nodes); err != nil {
			return f, err
		}
	}
	if f.cpu, err = ctrl.cpu(); err != nil {
		return f, err
	}
	if f.memory, err = ctrl.memory(); err != nil {
		return f, err
	}
	return f, errors.Join(s.stopChild(ctrl), deleteNamespace(ctx, client, upgradeNamespace))
}

// waitNeedUpgrade waits until the node's live pod runs another image than img
// and is marked PodNeedUpgrade=True, and returns it.
func waitNeedUpgrade(ctx context.Context, pods *view[*corev1.Pod], img string) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := pods.until(ctx, settleTimeout, "PodNeedUpgrade=True", func(_ time.Time, items map[string]*corev1.Pod) bool {
		for _, p := range items {
			if p.DeletionTimestamp == nil && p.Spec.Containers[0].Image != img && podcondition.IsTrue(&p.Status, podcondition.NeedUpgrade) {
				pod = p
				return true
			}
		}
		return false
	})
	return pod, err
}

// postUpgrade asks the agent to upgrade the pod, retrying while the agent
// refuses for want of a fresh cache, and returns when the accepted attempt
// started.
func postUpgrade(ctx context.Context, agent *child, pod *corev1.Pod, retries *int) (time.Time, error) {
	url := fmt.Sprintf("http://%s/openyurt.io/v1/namespaces/%s/pods/%s/upgrade", agent.addr, pod.Namespace, pod.Name)
	deadline := time.Now().Add(retryTimeout)
	for {
		start := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
		if err != nil {
			return start, err
		}
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return start, err
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			return start, nil
		case time.Now().After(deadline):
			return start, fmt.Errorf("POST %s: %s: %s", url, resp.Status, body)
		}
		*retries++
		select {
		case <-ctx.Done():
			return start, ctx.Err()
		case <-time.After(retryInterval):
		}
	}
}

func upgradeTable(f upgradeFigures) table {
	a, d := measure.Sorted(f.agent), measure.Sorted(f.direct)
	return table{
		title: "Upgrade latency: request until the pod's deletion is seen by a watch",
		rows: []row{
			{fmt.Sprintf("p50 (%d upgrades each)", len(a)), millis(measure.Percentile(a, 0.5)), millis(measure.Percentile(d, 0.5)), times(measure.Ratio(measure.Percentile(a, 0.5), measure.Percentile(d, 0.5))), "", ""},
			{"p99", millis(measure.Percentile(a, 0.99)), millis(measure.Percentile(d, 0.99)), times(measure.Ratio(measure.Percentile(a, 0.99), measure.Percentile(d, 0.99))), "", ""},
			{"controller CPU, whole scenario (marking every upgrade)", seconds(f.cpu), "", "", "", ""},
			controllerRSSRow("controller peak RSS (VmHWM)", f.memory),
		},
		notes: []string{
			"edgeota: POST /openyurt.io/v1/namespaces/{ns}/pods/{name}/upgrade to the agent; baseline: the bench deletes the pod itself (one API DELETE with a UID precondition), alternating. Deletion seen = the first watch event with deletionTimestamp set (or the pod gone).",
			fmt.Sprintf("Upgrades the agent refused first and were retried (its cache a write behind): %d; timing starts at the accepted attempt.", f.retries),
		},
	}
}
