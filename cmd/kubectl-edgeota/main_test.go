package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgeota/edgeota/internal/exitcode"
	"github.com/edgeota/edgeota/rollout"
	"github.com/edgeota/edgeota/window"
)

// The tests' DaemonSet lives in the kubeconfig's current namespace.
const (
	testNamespace = "fleet"
	testName      = "web"
)

// testNow is the tests' clock: a Friday.
var testNow = time.Date(2025, 1, 10, 12, 0, 0, 0, time.UTC)

// kubeconfig has two contexts: edge (current, namespace fleet) and lab.
const kubeconfig = `apiVersion: v1
kind: Config
current-context: edge
clusters:
- name: edge
  cluster: {server: "https://edge.example:6443"}
- name: lab
  cluster: {server: "https://lab.example:6443"}
users:
- name: operator
  user: {token: secret}
contexts:
- name: edge
  context: {cluster: edge, user: operator, namespace: fleet}
- name: lab
  context: {cluster: lab, user: operator, namespace: lab}
`

// useKubeconfig writes kubeconfig to a file and points $KUBECONFIG at it.
func useKubeconfig(t *testing.T) string {
	t.Helper()
	path := kubeconfigFile(t)
	t.Setenv("KUBECONFIG", path)
	return path
}

// kubeconfigFile writes kubeconfig to a file and returns its path.
func kubeconfigFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newDaemonSet is the DaemonSet opted in to AdvancedRollingUpdate, its spec
// observed by the DaemonSet controller, with the extra annotations.
func newDaemonSet(annotations map[string]string) *appsv1.DaemonSet {
	all := map[string]string{rollout.StrategyAnnotation: "AdvancedRollingUpdate", "owner": "team-edge"}
	for k, v := range annotations {
		all[k] = v
	}
	labels := map[string]string{"app": testName}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: testName, Namespace: testNamespace, UID: "uid-web", Generation: 2, Annotations: all, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.19.5"}}},
			},
		},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 2},
	}
}

// newRevision is a ControllerRevision of the DaemonSet whose UID is owner.
func newRevision(owner types.UID, number int64, hash string) *appsv1.ControllerRevision {
	isController := true
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: testName + "-" + hash, Namespace: testNamespace,
			Labels:          map[string]string{"app": testName, appsv1.DefaultDaemonSetUniqueLabelKey: hash},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: testName, UID: owner, Controller: &isController}},
		},
		Revision: number,
	}
}

// statusOf is the annotations carrying the controller's status.
func statusOf(t *testing.T, s rollout.Status) map[string]string {
	t.Helper()
	return statusOfValue(s)
}

// merge merges annotation maps, the later winning.
func merge(maps ...map[string]string) map[string]string {
	all := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			all[k] = v
		}
	}
	return all
}

// newCluster is a fake cluster with the DaemonSet, its revisions 1 (h1) and
// 2 (h2), and a revision 9 of another DaemonSet that shares its labels.
func newCluster(ds *appsv1.DaemonSet) *fake.Clientset {
	objects := []runtime.Object{newRevision(ds.UID, 1, "h1"), newRevision(ds.UID, 2, "h2"), newRevision("uid-other", 9, "h9")}
	objects[2].(*appsv1.ControllerRevision).Name = "other-h9"
	return fake.NewClientset(append(objects, ds)...)
}

// syncBuffer is a bytes.Buffer safe to read while the plugin writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// plugin runs the plugin with the arguments against client, in UTC at
// testNow, and returns its output and exit code.
func plugin(t *testing.T, client kubernetes.Interface, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut syncBuffer
	code = run(t.Context(), args, testEnv(client, &out, &errOut))
	return out.String(), errOut.String(), code
}

func testEnv(client kubernetes.Interface, stdout, stderr *syncBuffer) environment {
	return environment{
		stdout: stdout, stderr: stderr,
		connect: func(clientcmd.ClientConfig) (kubernetes.Interface, error) { return client, nil },
		now:     func() time.Time { return testNow },
		zone:    time.UTC,
	}
}

func at(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }

// TestStatus checks the output and exit code of each stage of a rollout,
// printed once.
func TestStatus(t *testing.T) {
	useKubeconfig(t)
	for _, c := range []struct {
		name        string
		annotations map[string]string
		code        int
		stdout      string
		stderr      string
	}{
		{
			name:        "complete",
			annotations: statusOf(t, rollout.Status{Revision: 2, Hash: "h2", Updated: 3, Total: 3, Strategy: rollout.StrategyAdvancedRollingUpdate}),
			stdout:      "daemonset \"web\" successfully rolled out: revision 2 (h2) on all 3 nodes\n",
		},
		{
			name: "halted",
			annotations: statusOf(t, rollout.Status{Revision: 2, Hash: "h2", Updated: 1, Total: 6, Halted: true, Reason: "2 nodes failed (max-failed 2)",
				Failed:   rollout.FailedNodes{Count: 2, Nodes: []string{"edge-node-1", "edge-node-2"}, Reasons: map[string]string{"edge-node-1": "CrashLoopBackOff"}},
				Strategy: rollout.StrategyAdvancedRollingUpdate}),
			code: exitcode.Failed,
			stdout: "daemonset \"web\" rollout halted: 2 nodes failed (max-failed 2)\n" +
				"  revision   2 (h2), AdvancedRollingUpdate\n" +
				"  updated    1 of 6 nodes\n" +
				"  failed     2 nodes: edge-node-1 (CrashLoopBackOff), edge-node-2\n",
			stderr: "error: daemonset \"web\" rollout halted: 2 nodes failed (max-failed 2)\n",
		},
		{
			name: "settled nodes down, and downloads",
			annotations: statusOf(t, rollout.Status{Revision: 2, Hash: "h2", Updated: 3, Total: 6, Strategy: rollout.StrategyAdvancedRollingUpdate,
				SettledUnavailable: &rollout.NodeList{Count: 1, Nodes: []string{"n1"}},
				Pulls:              &rollout.Pulls{InFlight: 2, Done: 1, Failed: 1, Waiting: 1},
				Failed:             rollout.FailedNodes{Count: 3, Nodes: []string{"n5"}, Lost: 1}}),
			stdout: "Waiting for daemonset \"web\" rollout to finish: 3 of 6 nodes updated\n" +
				"  revision   2 (h2), AdvancedRollingUpdate\n" +
				"  updated    3 of 6 nodes\n" +
				"  failed     3 nodes: n5 and 1 more and 1 no longer in the rollout record\n" +
				"  down       1 node settled, their pod unavailable now (holding the budget): n1\n" +
				"  downloads  2 pulling, 1 pulled, 1 failed (no pod lost), 1 node waiting for their download\n",
		},
		{
			name: "held",
			annotations: statusOf(t, rollout.Status{Revision: 2, Hash: "h2", Updated: 4, Total: 6,
				Held: &rollout.TimedNodes{Count: 2, At: at(testNow.Add(4 * time.Hour))}, Strategy: rollout.StrategyAdvancedRollingUpdate}),
			stdout: "Waiting for daemonset \"web\" rollout to finish: 4 of 6 nodes updated\n" +
				"  revision   2 (h2), AdvancedRollingUpdate\n" +
				"  updated    4 of 6 nodes\n" +
				"  held       2 nodes by the owner, the last hold ends 2025-01-10 16:00 UTC (in 4h00m)\n",
		},
		{
			name: "waiting for the window",
			annotations: merge(map[string]string{rollout.MaintenanceWindowAnnotation: "mon-fri 22:00-04:00 Europe/Berlin"},
				statusOf(t, rollout.Status{Revision: 2, Hash: "h2", Updated: 2, Total: 5, InFlight: 0,
					WaitingForWindow: &rollout.TimedNodes{Count: 3, At: at(time.Date(2025, 1, 10, 21, 0, 0, 0, time.UTC))}, Strategy: rollout.StrategyAdvancedRollingUpdate})),
			stdout: "Waiting for daemonset \"web\" rollout to finish: 2 of 5 nodes updated\n" +
				"  revision   2 (h2), AdvancedRollingUpdate\n" +
				"  updated    2 of 5 nodes\n" +
				"  waiting    3 nodes for the maintenance window, the next opens 2025-01-10 21:00 UTC (in 9h00m)\n" +
				"  window     Mon-Fri 22:00-04:00 Europe/Berlin\n",
		},
		{
			name: "in progress",
			annotations: statusOf(t, rollout.Status{Revision: 2, Hash: "h2", Updated: 3, Total: 8, InFlight: 2, Skipped: 1,
				Failed: rollout.FailedNodes{Count: 12, Nodes: []string{"n1", "n2"}}, Strategy: rollout.StrategyAdvancedRollingUpdate,
				Proven: &rollout.ProvenNodes{Answer: 2, Heartbeat: 1}}),
			stdout: "Waiting for daemonset \"web\" rollout to finish: 3 of 8 nodes updated\n" +
				"  revision   2 (h2), AdvancedRollingUpdate\n" +
				"  updated    3 of 8 nodes\n" +
				"  proven     2 by the node agent's answer, 1 by heartbeat\n" +
				"  in flight  2\n" +
				"  skipped    1 node NotReady, upgraded when back\n" +
				"  failed     12 nodes: n1, n2 and 10 more\n",
		},
		{
			name: "paused",
			annotations: statusOf(t, rollout.Status{Revision: 2, Hash: "h2", Updated: 1, Total: 4, HeldBack: 3, Paused: true,
				Reason: "edgeota.io/paused is true", Strategy: rollout.StrategyAdvancedRollingUpdate}),
			stdout: "Waiting for daemonset \"web\" rollout: paused (edgeota.io/paused); 1 of 4 nodes updated\n" +
				"  revision   2 (h2), AdvancedRollingUpdate\n" +
				"  updated    1 of 4 nodes\n" +
				"  held back  3 nodes by pause, node selector or partition\n",
		},
		{
			name: "as far as the partition allows",
			annotations: statusOf(t, rollout.Status{Revision: 2, Hash: "h2", Updated: 4, Total: 6, HeldBack: 2,
				Strategy: rollout.StrategyAdvancedRollingUpdate, Proven: &rollout.ProvenNodes{Heartbeat: 4}}),
			stdout: "daemonset \"web\" rolled out as far as allowed: revision 2 (h2) on 4 of 6 nodes, 2 held back by the node selector or partition\n" +
				"  revision   2 (h2), AdvancedRollingUpdate\n" +
				"  updated    4 of 6 nodes\n" +
				"  proven     4 by heartbeat\n" +
				"  held back  2 nodes by pause, node selector or partition\n",
		},
		{
			name: "OTA offers",
			annotations: statusOf(t, rollout.Status{Revision: 2, Hash: "h2", Updated: 1, Total: 6,
				Offered: &rollout.TimedNodes{Count: 5, At: at(testNow.Add(48 * time.Hour))}, Strategy: rollout.StrategyOTA}),
			stdout: "Waiting for daemonset \"web\" rollout to finish: 1 of 6 nodes updated\n" +
				"  revision   2 (h2), OTA\n" +
				"  updated    1 of 6 nodes\n" +
				"  offered    5 not taken by the owner yet, the first deadline 2025-01-12 12:00 UTC (in 2d0h)\n",
		},
		{
			name: "stale: a halt of the previous revision",
			annotations: merge(map[string]string{rollout.MaintenanceWindowAnnotation: "Sat 22:00-02:00"},
				statusOf(t, rollout.Status{Revision: 1, Hash: "h1", Updated: 1, Total: 6, Halted: true, Reason: "1 node failed (max-failed 1)"})),
			stdout: "Waiting for the controller to take up revision 2 (h2) of daemonset \"web\": its rollout status is about revision 1 (h1)\n" +
				"  window     Sat 22:00-02:00\n",
		},
		{
			name:        "stale: the same number, another hash",
			annotations: statusOf(t, rollout.Status{Revision: 2, Hash: "h1", Updated: 6, Total: 6}),
			stdout:      "Waiting for the controller to take up revision 2 (h2) of daemonset \"web\": its rollout status is about revision 2 (h1)\n",
		},
		{
			name:   "no status yet",
			stdout: "Waiting for the controller: daemonset \"web\" has no rollout status yet (if that lasts, its events say why: kubectl describe daemonset web -n fleet)\n",
		},
		{
			name:        "a status that does not parse",
			annotations: map[string]string{rollout.RolloutStatusAnnotation: "{"},
			stdout:      "Waiting for the controller: the rollout status of daemonset \"web\" does not parse (unexpected end of JSON input)\n",
		},
		{
			name: "an invalid window",
			annotations: merge(map[string]string{rollout.MaintenanceWindowAnnotation: "Mon-Fry 22:00-04:00"},
				statusOf(t, rollout.Status{Revision: 2, Hash: "h2", Updated: 0, Total: 2})),
			stdout: "Waiting for daemonset \"web\" rollout to finish: 0 of 2 nodes updated\n" +
				"  revision   2 (h2)\n" +
				"  updated    0 of 2 nodes\n" +
				"  window     invalid, nothing is upgraded until it is fixed: window \"Mon-Fry 22:00-04:00\": unknown day \"Fry\": want Mon..Sun or Monday..Sunday (any case), a range such as Mon-Fri or Fri-Mon, a comma-separated list, * or daily; the days come before the time range\n",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := plugin(t, newCluster(newDaemonSet(c.annotations)), "rollout", "status", "daemonset/web")
			if code != c.code || stdout != c.stdout || stderr != c.stderr {
				t.Errorf("got exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr, c.code, c.stdout, c.stderr)
			}
		})
	}
}

// TestStatusBeforeTheDaemonSetController: a spec the DaemonSet controller
// has not observed yet may have no revision yet: the status of the
// previous one must not pass for it.
func TestStatusBeforeTheDaemonSetController(t *testing.T) {
	useKubeconfig(t)
	ds := newDaemonSet(statusOf(t, rollout.Status{Revision: 2, Hash: "h2", Updated: 3, Total: 3}))
	ds.Generation = 3
	stdout, stderr, code := plugin(t, newCluster(ds), "rollout", "status", "ds/web")
	want := "Waiting for the DaemonSet controller to take up the spec of daemonset \"web\"\n"
	if code != exitcode.OK || stdout != want || stderr != "" {
		t.Errorf("got exit %d, %q, %q, want 0, %q", code, stdout, stderr, want)
	}
}

// TestStatusShowsTimesInTheUsersZone: times are the reader's.
func TestStatusShowsTimesInTheUsersZone(t *testing.T) {
	useKubeconfig(t)
	berlin, err := window.LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	client := newCluster(newDaemonSet(statusOf(t, rollout.Status{Revision: 2, Hash: "h2", Updated: 0, Total: 1,
		WaitingForWindow: &rollout.TimedNodes{Count: 1, At: at(testNow.Add(-90 * time.Second))}})))
	var out, errOut syncBuffer
	env := testEnv(client, &out, &errOut)
	env.zone = berlin
	run(t.Context(), []string{"rollout", "status", "ds/web"}, env)
	if want := "  waiting    1 node for the maintenance window, the next opens 2025-01-10 12:58 CET (1m30s ago)\n"; !strings.Contains(out.String(), want) {
		t.Errorf("got:\n%s\nwant a line %q", out.String(), want)
	}
}

// TestStatusErrors: each failure has its exit code and says what is wrong.
func TestStatusErrors(t *testing.T) {
	useKubeconfig(t)
	refuse := func(verb string, err error) *fake.Clientset {
		client := newCluster(newDaemonSet(nil))
		client.PrependReactor(verb, "*", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, err })
		return client
	}
	notOptedIn := newDaemonSet(nil)
	delete(notOptedIn.Annotations, rollout.StrategyAnnotation)
	legacy := newDaemonSet(map[string]string{rollout.LegacyStrategyAnnotation: "OTA"})
	delete(legacy.Annotations, rollout.StrategyAnnotation)
	for _, c := range []struct {
		name   string
		client *fake.Clientset
		code   int
		stderr string
	}{
		{"no such DaemonSet", fake.NewClientset(), exitcode.NotFound, "error: daemonset \"web\" not found in namespace \"fleet\"\n"},
		{"not opted in", newCluster(notOptedIn), exitcode.Failed,
			"error: daemonset \"web\" is not rolled out by edgeota: it has no annotation apps.openyurt.io/update-strategy (kubectl rollout status follows the native strategies)\n"},
		{"unauthenticated", refuse("get", apierrors.NewUnauthorized("no token")), exitcode.Refused,
			"error: unauthenticated: no token (check the kubeconfig's credentials)\n"},
		{"forbidden to list revisions", refuse("list", apierrors.NewForbidden(appsv1.Resource("controllerrevisions"), "", nil)), exitcode.Refused,
			"error: forbidden: listing the controller revisions of daemonset \"web\": controllerrevisions.apps is forbidden: <nil>\n"},
		{"unavailable", refuse("get", apierrors.NewServiceUnavailable("etcd is down")), exitcode.Unreachable, "error: etcd is down\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := plugin(t, c.client, "rollout", "status", "ds/web")
			if code != c.code || stderr != c.stderr || stdout != "" {
				t.Errorf("got exit %d, stdout %q, stderr %q, want exit %d, stderr %q", code, stdout, stderr, c.code, c.stderr)
			}
		})
	}
	t.Run("the legacy annotation opts in", func(t *testing.T) {
		if _, stderr, code := plugin(t, newCluster(legacy), "rollout", "status", "ds/web"); code != exitcode.OK {
			t.Errorf("got exit %d, %s, want 0", code, stderr)
		}
	})
}

// watching is a fake cluster that reports when the plugin's watch of
// DaemonSets is in place, so that a test changes the DaemonSet only once
// the watch will see it (the fake replays nothing).
func watching(t *testing.T, ds *appsv1.DaemonSet) (*fake.Clientset, <-chan struct{}) {
	t.Helper()
	return watchingCluster(ds)
}

// watchingCluster is watching, for a test's child process (see TestMain).
func watchingCluster(ds *appsv1.DaemonSet) (*fake.Clientset, <-chan struct{}) {
	client := newCluster(ds)
	started := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("daemonsets", func(action clienttesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(appsv1.SchemeGroupVersion.WithResource("daemonsets"), action.GetNamespace())
		once.Do(func() { close(started) })
		return true, w, err
	})
	return client, started
}

// follow runs `rollout status --watch` in the background, waits for its
// watch, then calls change; it returns the plugin's output and exit code.
func follow(t *testing.T, ds *appsv1.DaemonSet, change func(*fake.Clientset), extra ...string) (stdout, stderr string, code int) {
	t.Helper()
	client, started := watching(t, ds)
	var out, errOut syncBuffer
	done := make(chan int)
	go func() {
		done <- run(t.Context(), append([]string{"rollout", "status", "ds/web", "--watch"}, extra...), testEnv(client, &out, &errOut))
	}()
	select {
	case <-started:
	case code := <-done:
		t.Fatalf("exited %d before watching:\n%s%s", code, out.String(), errOut.String())
	case <-time.After(time.Minute):
		t.Fatalf("no watch after a minute; output:\n%s", out.String())
	}
	change(client)
	select {
	case code = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("still watching after a minute; output:\n%s", out.String())
	}
	return out.String(), errOut.String(), code
}

// setStatus writes the controller's status on the fake DaemonSet.
func setStatus(t *testing.T, s rollout.Status) func(*fake.Clientset) {
	return func(client *fake.Clientset) {
		if err := writeStatus(client, s); err != nil {
			t.Error(err)
		}
	}
}

// writeStatus writes s as the controller's status on the fake DaemonSet.
func writeStatus(client *fake.Clientset, s rollout.Status) error {
	ds, err := client.AppsV1().DaemonSets(testNamespace).Get(context.Background(), testName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ds.Annotations = merge(ds.Annotations, statusOfValue(s))
	_, err = client.AppsV1().DaemonSets(testNamespace).Update(context.Background(), ds, metav1.UpdateOptions{})
	return err
}

// TestWatch: --watch follows the rollout to its end, whichever it is.
func TestWatch(t *testing.T) {
	useKubeconfig(t)
	inProgress := rollout.Status{Revision: 2, Hash: "h2", Updated: 1, Total: 3, InFlight: 1, Strategy: rollout.StrategyOTA}
	const inProgressLines = "Waiting for daemonset \"web\" rollout to finish: 1 of 3 nodes updated\n" +
		"  revision   2 (h2), OTA\n" +
		"  updated    1 of 3 nodes\n" +
		"  in flight  1\n"
	const completeLine = "daemonset \"web\" successfully rolled out: revision 2 (h2) on all 3 nodes\n"

	t.Run("to completion", func(t *testing.T) {
		stdout, stderr, code := follow(t, newDaemonSet(statusOf(t, inProgress)),
			setStatus(t, rollout.Status{Revision: 2, Hash: "h2", Updated: 3, Total: 3, Strategy: rollout.StrategyOTA}))
		if want := inProgressLines + completeLine; code != exitcode.OK || stdout != want || stderr != "" {
			t.Errorf("got exit %d, stdout:\n%s\nstderr: %s\nwant exit 0, stdout:\n%s", code, stdout, stderr, want)
		}
	})
	t.Run("to a halt", func(t *testing.T) {
		stdout, stderr, code := follow(t, newDaemonSet(statusOf(t, inProgress)),
			setStatus(t, rollout.Status{Revision: 2, Hash: "h2", Updated: 1, Total: 3, Halted: true, Reason: "1 node failed (max-failed 1)",
				Failed: rollout.FailedNodes{Count: 1, Nodes: []string{"n3"}}, Strategy: rollout.StrategyOTA}))
		want := inProgressLines + "daemonset \"web\" rollout halted: 1 node failed (max-failed 1)\n" +
			"  revision   2 (h2), OTA\n" +
			"  updated    1 of 3 nodes\n" +
			"  failed     1 node: n3\n"
		if code != exitcode.Failed || stdout != want || stderr != "error: daemonset \"web\" rollout halted: 1 node failed (max-failed 1)\n" {
			t.Errorf("got exit %d, stdout:\n%s\nstderr: %s\nwant exit 1, stdout:\n%s", code, stdout, stderr, want)
		}
	})
	t.Run("from a stale status to completion", func(t *testing.T) {
		stdout, _, code := follow(t, newDaemonSet(statusOf(t, rollout.Status{Revision: 1, Hash: "h1", Updated: 3, Total: 3})),
			setStatus(t, rollout.Status{Revision: 2, Hash: "h2", Updated: 3, Total: 3}))
		want := "Waiting for the controller to take up revision 2 (h2) of daemonset \"web\": its rollout status is about revision 1 (h1)\n" + completeLine
		if code != exitcode.OK || stdout != want {
			t.Errorf("got exit %d, stdout:\n%s\nwant exit 0, stdout:\n%s", code, stdout, want)
		}
	})
	t.Run("the DaemonSet deleted", func(t *testing.T) {
		_, stderr, code := follow(t, newDaemonSet(statusOf(t, inProgress)), func(client *fake.Clientset) {
			if err := client.AppsV1().DaemonSets(testNamespace).Delete(context.Background(), testName, metav1.DeleteOptions{}); err != nil {
				t.Error(err)
			}
		})
		if want := "error: daemonset \"web\" not found in namespace \"fleet\"\n"; code != exitcode.NotFound || stderr != want {
			t.Errorf("got exit %d, stderr %q, want %d, %q", code, stderr, exitcode.NotFound, want)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		stdout, stderr, code := plugin(t, newCluster(newDaemonSet(statusOf(t, inProgress))), "rollout", "status", "ds/web", "-w", "--timeout", "300ms")
		want := "error: timed out after 300ms; Waiting for daemonset \"web\" rollout to finish: 1 of 3 nodes updated\n"
		if code != exitcode.Timeout || stdout != inProgressLines || stderr != want {
			t.Errorf("got exit %d, stdout:\n%s\nstderr: %s\nwant exit 3, stderr %q", code, stdout, stderr, want)
		}
	})
	t.Run("already complete: no watch", func(t *testing.T) {
		client := newCluster(newDaemonSet(statusOf(t, rollout.Status{Revision: 2, Hash: "h2", Updated: 3, Total: 3})))
		var out, errOut syncBuffer
		if code := run(t.Context(), []string{"rollout", "status", "ds/web", "--watch"}, testEnv(client, &out, &errOut)); code != exitcode.OK || out.String() != completeLine {
			t.Errorf("got exit %d, %q, want 0, %q", code, out.String(), completeLine)
		}
		for _, a := range client.Actions() {
			if a.GetVerb() == "watch" {
				t.Errorf("got a watch of %s, want none", a.GetResource().Resource)
			}
		}
	})
}

// TestPauseResume: pause and resume write a merge patch of edgeota.io/paused
// alone, and change nothing else of the DaemonSet.
func TestPauseResume(t *testing.T) {
	useKubeconfig(t)
	for _, c := range []struct {
		verb    string
		paused  map[string]string // the annotation before
		patch   string
		want    map[string]string // the annotation after
		printed string
	}{
		{"pause", nil, `{"metadata":{"annotations":{"edgeota.io/paused":"true"}}}`, map[string]string{rollout.PausedAnnotation: "true"}, "daemonset.apps/web paused\n"},
		{"pause", map[string]string{rollout.PausedAnnotation: "false"}, `{"metadata":{"annotations":{"edgeota.io/paused":"true"}}}`, map[string]string{rollout.PausedAnnotation: "true"}, "daemonset.apps/web paused\n"},
		{"resume", map[string]string{rollout.PausedAnnotation: "true"}, `{"metadata":{"annotations":{"edgeota.io/paused":null}}}`, nil, "daemonset.apps/web resumed\n"},
		{"resume", nil, `{"metadata":{"annotations":{"edgeota.io/paused":null}}}`, nil, "daemonset.apps/web resumed\n"},
	} {
		t.Run(c.verb+" from "+c.paused[rollout.PausedAnnotation], func(t *testing.T) {
			before := newDaemonSet(c.paused)
			client := newCluster(before.DeepCopy())
			stdout, stderr, code := plugin(t, client, "rollout", c.verb, "daemonset", "web")
			if code != exitcode.OK || stdout != c.printed || stderr != "" {
				t.Fatalf("got exit %d, %q, %q, want 0, %q", code, stdout, stderr, c.printed)
			}
			var writes []string
			for _, a := range client.Actions() {
				switch a := a.(type) {
				case clienttesting.PatchAction:
					if a.GetPatchType() != types.MergePatchType || a.GetName() != testName {
						t.Errorf("got a %s patch of %s, want a merge patch of %s", a.GetPatchType(), a.GetName(), testName)
					}
					writes = append(writes, string(a.GetPatch()))
				case clienttesting.GetAction, clienttesting.ListAction:
				default:
					writes = append(writes, a.GetVerb()+" "+a.GetResource().Resource)
				}
			}
			if len(writes) != 1 || writes[0] != c.patch {
				t.Errorf("got writes %q, want the one patch %s", writes, c.patch)
			}
			after, err := client.AppsV1().DaemonSets(testNamespace).Get(t.Context(), testName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := before.DeepCopy()
			delete(want.Annotations, rollout.PausedAnnotation)
			want.Annotations = merge(want.Annotations, c.want)
			after.ManagedFields, after.ResourceVersion = nil, ""
			if got, _ := json.Marshal(after); string(got) != string(mustJSON(t, want)) {
				t.Errorf("got the DaemonSet\n%s\nwant\n%s", got, mustJSON(t, want))
			}
		})
	}
	t.Run("not opted in", func(t *testing.T) {
		ds := newDaemonSet(nil)
		delete(ds.Annotations, rollout.StrategyAnnotation)
		client := newCluster(ds)
		_, stderr, code := plugin(t, client, "rollout", "pause", "ds/web")
		if code != exitcode.Failed || !strings.Contains(stderr, "is not rolled out by edgeota") {
			t.Errorf("got exit %d, %q, want 1 saying it is not rolled out by edgeota", code, stderr)
		}
		for _, a := range client.Actions() {
			if a.GetVerb() == "patch" {
				t.Errorf("got a patch, want none")
			}
		}
	})
	t.Run("not found", func(t *testing.T) {
		_, stderr, code := plugin(t, fake.NewClientset(), "rollout", "resume", "ds/web")
		if want := "error: daemonset \"web\" not found in namespace \"fleet\"\n"; code != exitcode.NotFound || stderr != want {
			t.Errorf("got exit %d, %q, want %d, %q", code, stderr, exitcode.NotFound, want)
		}
	})
	t.Run("forbidden", func(t *testing.T) {
		client := newCluster(newDaemonSet(nil))
		client.PrependReactor("patch", "daemonsets", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(appsv1.Resource("daemonsets"), testName, nil)
		})
		if _, stderr, code := plugin(t, client, "rollout", "pause", "ds/web"); code != exitcode.Refused || !strings.HasPrefix(stderr, "error: forbidden: ") {
			t.Errorf("got exit %d, %q, want %d, forbidden", code, stderr, exitcode.Refused)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestUsage: every mistake on the command line is exit 2 with a message
// saying what is wrong.
func TestUsage(t *testing.T) {
	useKubeconfig(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no command: want rollout status|pause|resume daemonset/NAME"},
		{[]string{"status", "ds/web"}, `unknown command "status": want rollout`},
		{[]string{"rollout"}, "rollout needs a verb: status, pause or resume"},
		{[]string{"rollout", "restart", "ds/web"}, `unknown verb "restart": want status, pause or resume`},
		{[]string{"rollout", "status"}, "rollout status: no DaemonSet: want daemonset/NAME"},
		{[]string{"rollout", "status", "web"}, `rollout status: "web": want daemonset/NAME`},
		{[]string{"rollout", "status", "deployment/web"}, `rollout status: resource type "deployment": only DaemonSets are rolled out by edgeota (daemonset/NAME or ds/NAME)`},
		{[]string{"rollout", "status", "ds/Web_1"}, `rollout status: DaemonSet name "Web_1": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{[]string{"rollout", "status", "ds/web", "ds/api"}, `rollout status: got 2 arguments ["ds/web" "ds/api"], want one DaemonSet: daemonset/NAME`},
		{[]string{"rollout", "status", "ds/web", "--timeout", "5m"}, "--timeout 5m0s: want a positive duration, with --watch"},
		{[]string{"rollout", "status", "ds/web", "-w", "--timeout", "-1s"}, "--timeout -1s: want a positive duration, with --watch"},
		{[]string{"rollout", "pause", "ds/web", "--watch"}, "--watch and --timeout apply to rollout status, not pause"},
		{[]string{"rollout", "status", "ds/web", "--bogus"}, "unknown flag: --bogus"},
	} {
		stdout, stderr, code := plugin(t, fake.NewClientset(), c.args...)
		if want := "error: " + c.want + "\nSee 'kubectl edgeota --help'.\n"; code != exitcode.Usage || stdout != "" || stderr != want {
			t.Errorf("%q: got exit %d, %q, %q, want 2, %q", c.args, code, stdout, stderr, want)
		}
	}
	for _, ref := range [][]string{{"ds/web"}, {"daemonset/web"}, {"daemonsets/web"}, {"DaemonSet/web"}, {"daemonsets.apps/web"}, {"daemonset", "web"}} {
		if _, stderr, code := plugin(t, newCluster(newDaemonSet(nil)), append([]string{"rollout", "status"}, ref...)...); code != exitcode.OK {
			t.Errorf("%q: got exit %d, %s, want 0", ref, code, stderr)
		}
	}
}

// TestKubeconfig: the namespace and cluster come from the kubeconfig as
// kubectl reads it: $KUBECONFIG or --kubeconfig, the current context or
// --context, the context's namespace or -n.
func TestKubeconfig(t *testing.T) {
	path := useKubeconfig(t)
	for _, c := range []struct {
		args            []string
		server, usedNS  string
		kubeconfigOnEnv bool
	}{
		{[]string{}, "https://edge.example:6443", "fleet", true},
		{[]string{"-n", "other"}, "https://edge.example:6443", "other", true},
		{[]string{"--namespace=other"}, "https://edge.example:6443", "other", true},
		{[]string{"--context", "lab"}, "https://lab.example:6443", "lab", true},
		{[]string{"--context", "lab", "-n", "other"}, "https://lab.example:6443", "other", true},
		{[]string{"--kubeconfig", path, "--context", "lab"}, "https://lab.example:6443", "lab", false},
	} {
		if !c.kubeconfigOnEnv {
			t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
		}
		var server string
		client := fake.NewClientset()
		var out, errOut syncBuffer
		env := testEnv(client, &out, &errOut)
		env.connect = func(config clientcmd.ClientConfig) (kubernetes.Interface, error) {
			rest, err := config.ClientConfig()
			if err != nil {
				return nil, err
			}
			server = rest.Host
			return client, nil
		}
		code := run(t.Context(), append([]string{"rollout", "status", "ds/web"}, c.args...), env)
		want := "error: daemonset \"web\" not found in namespace \"" + c.usedNS + "\"\n"
		if code != exitcode.NotFound || server != c.server || errOut.String() != want {
			t.Errorf("%q: got exit %d, server %s, %q, want %d, %s, %q", c.args, code, server, errOut.String(), exitcode.NotFound, c.server, want)
		}
	}
	t.Run("no kubeconfig", func(t *testing.T) {
		t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
		t.Setenv("HOME", t.TempDir())
		t.Setenv("KUBERNETES_SERVICE_HOST", "")
		var out, errOut syncBuffer
		code := run(t.Context(), []string{"rollout", "status", "ds/web"}, environment{stdout: &out, stderr: &errOut, connect: connect, now: time.Now, zone: time.UTC})
		if code != exitcode.Usage || !strings.HasPrefix(errOut.String(), "error: kubeconfig: invalid configuration: no configuration has been provided") {
			t.Errorf("got exit %d, %q, want 2 saying there is no configuration", code, errOut.String())
		}
	})
}

// TestFailureReasonsPrintNoControlCharacters: a failure's reason is what
// the kubelet reported of a container, a node's to write: the view prints
// its control characters escaped, never an escape sequence that would
// redraw the operator's terminal.
func TestFailureReasonsPrintNoControlCharacters(t *testing.T) {
	got := failedNodes(rollout.FailedNodes{Count: 1, Nodes: []string{"edge-node-1"},
		Reasons: map[string]string{"edge-node-1": "CrashLoopBackOff: \x1b[2J\x1b[Hgone\r\n"}})
	if want := `1 node: edge-node-1 (CrashLoopBackOff: \x1b[2J\x1b[Hgone\r\n)`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
