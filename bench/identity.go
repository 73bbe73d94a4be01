package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/harness"
)

// identityScenario: what acting as its node costs the agent. The agent of
// deploy/ (its service account, a token bound to its pod as the kubelet
// mounts it) runs with --identity=node, every request impersonating
// system:node:<node> (the API server authorizes the impersonation, then the
// request as the node), beside the same token with
// --identity=serviceaccount, in alternating pairs: its time from start to a
// synced cache (a list of its node's podsPerNode pods and a watch), and how
// fast its watch delivers a change.
var identityScenario = scenario{name: "identity", run: runIdentity}

// identityChanges is how many pod changes each agent's watch is timed on.
const identityChanges = 30

// benchViewBinding lets the agent's service account read pods without
// impersonation, for the baseline: the built-in view ClusterRole, bound by
// the bench alone (deploy/ never grants it).
const benchViewBinding = "edgeota-bench-ota-server-view"

// identityRun is one agent's figures.
type identityRun struct {
	startToSync time.Duration
	watch       []time.Duration // change sent → seen in GET /pods
}

type identityFigures struct {
	node, serviceAccount []identityRun
}

func runIdentity(ctx context.Context, s *session, _ *findings) (table, error) {
	if err := s.stopNodeAgent(); err != nil {
		return table{}, err
	}
	f, err := benchIdentity(ctx, s)
	if err != nil {
		return table{}, err
	}
	return identityTable(f), nil
}

// benchIdentity installs deploy/, fills agentNode with podsPerNode pods and
// runs the pairs; it removes what it installed.
func benchIdentity(ctx context.Context, s *session) (identityFigures, error) {
	var f identityFigures
	deploy := filepath.Join(s.root, "deploy")
	if _, err := s.cluster.Kubectl(ctx, "apply", "--server-side", "-k", deploy); err != nil {
		return f, fmt.Errorf("applying deploy/: %w", err)
	}
	cleanup := func() error {
		ctx := context.WithoutCancel(ctx)
		_, err := s.cluster.Kubectl(ctx, "delete", "--ignore-not-found", "--wait=false", "-k", deploy)
		if e := s.cluster.Client.RbacV1().ClusterRoleBindings().Delete(ctx, benchViewBinding, metav1.DeleteOptions{}); e != nil && !apierrors.IsNotFound(e) {
			err = errors.Join(err, e)
		}
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: benchViewBinding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: harness.SystemNamespace, Name: "ota-server"}},
	}
	if _, err := s.cluster.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return f, errors.Join(fmt.Errorf("binding the baseline's view role: %w", err), cleanup())
	}
	kubeconfig, err := agentTokenKubeconfig(ctx, s)
	if err != nil {
		return f, errors.Join(err, cleanup())
	}
	if err := createNodePods(ctx, s); err != nil {
		return f, errors.Join(err, cleanup())
	}
	for i := range s.p.pairs {
		modes := []string{"node", "serviceaccount"}
		if i%2 == 1 { // alternate who goes first, so that drift does not favour one
			slices.Reverse(modes)
		}
		for _, mode := range modes {
			r, err := measureIdentity(ctx, s, kubeconfig, mode, i)
			if err != nil {
				return f, errors.Join(err, cleanup())
			}
			if mode == "node" {
				f.node = append(f.node, r)
			} else {
				f.serviceAccount = append(f.serviceAccount, r)
			}
		}
	}
	return f, errors.Join(deleteNamespace(ctx, s.cluster.Client, nodeAPINamespace), cleanup())
}

// agentTokenKubeconfig writes a kubeconfig holding the token the kubelet
// would mount in deploy/'s agent pod on agentNode.
func agentTokenKubeconfig(ctx context.Context, s *session) (string, error) {
	var pod *corev1.Pod
	deadline := time.Now().Add(readyTimeout)
	for pod == nil {
		list, err := s.cluster.Client.CoreV1().Pods(harness.SystemNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/name=ota-server", FieldSelector: "spec.nodeName=" + agentNode})
		if err == nil && len(list.Items) > 0 {
			pod = &list.Items[0]
			break
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no agent pod of deploy/ on %s within %s (%v)", agentNode, readyTimeout, err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	token, err := s.cluster.Token(ctx, harness.SystemNamespace, "ota-server", pod)
	if err != nil {
		return "", err
	}
	path := filepath.Join(s.logDir, "agent-token.kubeconfig")
	if err := s.cluster.WriteKubeconfig(path, "", token); err != nil {
		return "", err
	}
	return path, nil
}

// measureIdentity starts an agent in the mode and times its start until it
// serves the live view of every pod, then its watch on identityChanges
// changes of one pod.
func measureIdentity(ctx context.Context, s *session, kubeconfig, mode string, pair int) (identityRun, error) {
	var r identityRun
	start := time.Now()
	agent, err := s.startAgent(ctx, harness.AgentOptions{Name: fmt.Sprintf("ota-server-%s-%d", mode, pair), Kubeconfig: kubeconfig,
		Identity: mode, Stateless: true})
	if err != nil {
		return r, err
	}
	err = pollAgent(ctx, agent, "/readyz", func(b []byte) bool { return strings.Contains(string(b), "serving the live view") })
	if err == nil {
		err = pollAgent(ctx, agent, "/pods", func(b []byte) bool { return allRunning(b, podsPerNode) })
	}
	if err != nil {
		return r, errors.Join(err, s.stopChild(agent))
	}
	r.startToSync = time.Since(start)
	pods, err := s.cluster.Client.CoreV1().Pods(nodeAPINamespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || len(pods.Items) == 0 {
		return r, errors.Join(fmt.Errorf("a pod to change: %v", err), s.stopChild(agent))
	}
	target := pods.Items[0].Name
	for i := range identityChanges {
		value := fmt.Sprintf("%s-%d-%d", mode, pair, i)
		patch := fmt.Sprintf(`{"metadata":{"labels":{"edgeota-bench-identity":%q}}}`, value)
		sent := time.Now()
		if _, err := s.cluster.Client.CoreV1().Pods(nodeAPINamespace).Patch(ctx, target, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return r, errors.Join(fmt.Errorf("changing pod %s: %w", target, err), s.stopChild(agent))
		}
		if err := pollAgent(ctx, agent, "/pods", func(b []byte) bool { return strings.Contains(string(b), value) }); err != nil {
			return r, errors.Join(err, s.stopChild(agent))
		}
		r.watch = append(r.watch, time.Since(sent))
	}
	progress("identity %s, pair %d: synced in %s, watch p50 %s", mode, pair+1, r.startToSync.Round(time.Millisecond),
		measure.Percentile(measure.Sorted(r.watch), 0.5).Round(time.Millisecond))
	return r, s.stopChild(agent)
}

// identityPoll is how often the scenario asks the agent: fine enough to time
// milliseconds, where readiness probes poll every 200 ms.
const identityPoll = 2 * time.Millisecond

// pollAgent asks the agent for path until the answer is 200 and ready
// accepts its body, within readyTimeout.
func pollAgent(ctx context.Context, agent *child, path string, ready func([]byte) bool) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		if body, err := agent.get(ctx, path); err == nil && ready(body) {
			return nil
		}
		if err := agent.Exited(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the agent's %s not as awaited within %s: %w", path, readyTimeout, ctx.Err())
		case <-time.After(identityPoll):
		}
	}
}

func identityTable(f identityFigures) table {
	syncs := func(runs []identityRun) []time.Duration {
		var out []time.Duration
		for _, r := range runs {
			out = append(out, r.startToSync)
		}
		return out
	}
	watches := func(runs []identityRun) []time.Duration {
		var out []time.Duration
		for _, r := range runs {
			out = append(out, r.watch...)
		}
		return out
	}
	nodeSync, saSync := measure.Median(syncs(f.node)), measure.Median(syncs(f.serviceAccount))
	ratio := measure.Median(measure.PairRatios(syncs(f.node), syncs(f.serviceAccount)))
	nodeWatch, saWatch := measure.Sorted(watches(f.node)), measure.Sorted(watches(f.serviceAccount))
	pct := func(xs []time.Duration, q float64) string { return millis(measure.Percentile(xs, q)) }
	return table{
		title: fmt.Sprintf("Identity: the agent acting as its node (--identity=node) beside its service account, %d pods, %d pairs", podsPerNode, len(f.node)),
		rows: []row{
			{"start → cache synced (median; ratio: median of the pairs')", millis(nodeSync), millis(saSync), times(ratio), "", ""},
			{fmt.Sprintf("watch: a pod change → seen in GET /pods, p50 / p99 (%d changes)", len(nodeWatch)),
				pct(nodeWatch, 0.5) + " / " + pct(nodeWatch, 0.99), pct(saWatch, 0.5) + " / " + pct(saWatch, 0.99),
				times(measure.Ratio(measure.Percentile(nodeWatch, 0.5), measure.Percentile(saWatch, 0.5))), "", ""},
		},
		notes: []string{
			"edgeota: ota-server --identity=node with deploy/'s token (bound to its pod on " + agentNode + "), impersonating system:node:" + agentNode +
				"; baseline: the same token, --identity=serviceaccount, reading through the built-in view role bound for the bench alone",
			"start → cache synced: process start until /readyz serves the live view and GET /pods shows every pod running (a list by field selector, then a watch)",
			fmt.Sprintf("watch: the time from a label change sent by the bench to the agent's GET /pods showing it, asked every %s", identityPoll),
		},
	}
}
