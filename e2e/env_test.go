//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/localcluster"
)

// testNamespace is where each scenario's own objects live.
const testNamespace = "e2e"

// nodeHeartbeat is how often the scenarios' nodes report their status: every
// 2-3 s instead of a kubelet's 10-15 s. The controller's proof of life waits
// for one heartbeat per wave of a rollout, so it bounds how fast rollouts go;
// 2 s keeps a 10-node rollout within seconds and costs a small cluster a few
// node status writes a second.
const nodeHeartbeat = 2 * time.Second

// env is one scenario's world: a fresh cluster and a directory for logs,
// started and torn down by the harness.
type env struct {
	t       *testing.T
	h       *harness.Harness
	root    string
	cluster *localcluster.Cluster
	logDir  string
	ns      string
}

// newEnv creates a cluster with the given number of edge nodes for the test,
// heartbeating every nodeHeartbeat, deleted when the test ends, with a
// namespace for its objects. A missing binary fails the test: the suite
// never passes by not running.
func newEnv(t *testing.T, nodes int) *env {
	t.Helper()
	return newEnvWith(t, harness.ClusterOptions{Nodes: nodes, NodeHeartbeat: nodeHeartbeat})
}

// newKubeletEnv is newEnv with nodes that heartbeat as kubelets do with
// their defaults: node Leases renewed every 10 s, status every 5 minutes.
func newKubeletEnv(t *testing.T, nodes int) *env {
	t.Helper()
	return newEnvWith(t, harness.ClusterOptions{Nodes: nodes, NodeLeases: true})
}

// newEnvWith is newEnv with the cluster opts describe (named after the test).
func newEnvWith(t *testing.T, opts harness.ClusterOptions) *env {
	t.Helper()
	h, err := harness.New(harness.Options{LogDir: filepath.Join(".cache", "e2e", t.Name())})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, h: h, root: h.Root, logDir: h.LogDir, ns: testNamespace}
	t.Cleanup(func() {
		if t.Failed() && e.cluster != nil {
			e.keepClusterLogs()
		}
		if err := h.Close(); err != nil {
			t.Errorf("tearing down: %v", err)
		}
	})

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	opts.Name = clusterName(t)
	if _, err := h.StartCluster(ctx, opts); err != nil {
		t.Fatalf("creating the local cluster: %v", err)
	}
	e.cluster = h.Cluster
	t.Logf("cluster %s with %d nodes up in %s; logs in %s", e.cluster.Name, opts.Nodes, time.Since(start).Round(time.Millisecond), e.logDir)
	e.createNamespace(ctx)
	return e
}

// clusterName is the test's name made a valid cluster name, unique per run.
func clusterName(t *testing.T) string {
	name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	name = strings.TrimPrefix(name, "test")
	return harness.UniqueClusterName("e2e" + name[:min(len(name), 30)])
}

// createNamespace creates the test namespace and waits for its default
// service account, without which pods are refused.
func (e *env) createNamespace(ctx context.Context) {
	e.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}
	if _, err := e.cluster.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("creating namespace %s: %v", e.ns, err)
	}
	eventually(e.t, "the default service account of namespace "+e.ns, func(ctx context.Context) (bool, string, error) {
		_, err := e.cluster.Client.CoreV1().ServiceAccounts(e.ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, "", nil
	})
}

// keepClusterLogs copies the components' logs next to the test's, as
// deleting the cluster removes them.
func (e *env) keepClusterLogs() {
	logs, _ := filepath.Glob(filepath.Join(e.cluster.WorkDir(), "logs", "*.log"))
	for _, src := range logs {
		data, err := os.ReadFile(src)
		if err == nil {
			_ = os.WriteFile(filepath.Join(e.logDir, "cluster-"+filepath.Base(src)), data, 0o644)
		}
	}
	e.t.Logf("logs kept in %s", e.logDir)
}

// ctx is a context for one step of a scenario.
func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(e.t.Context(), waitTimeout)
	e.t.Cleanup(cancel)
	return ctx
}
