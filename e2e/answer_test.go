//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// controllerFieldManager is the controller's field manager, spelt here as
// the suite spells the contract.
const controllerFieldManager = "edgeota-ota-controller"

// agentFieldManager is the agent's.
const agentFieldManager = "edgeota-ota-server"

// challenge writes a fresh proof-of-life challenge on the pod as the
// controller does (a pods/status patch, the pod's UID as precondition) and
// returns it.
func (e *env) challenge(pod *corev1.Pod) string {
	e.t.Helper()
	c, err := podchannel.NewChallenge(pod.UID)
	if err != nil {
		e.t.Fatal(err)
	}
	value := c.String()
	if _, err := podcondition.Annotate(e.ctx(), e.cluster.Client.CoreV1(), pod,
		podcondition.Annotations{rollout.ChallengeAnnotation: &value}, controllerFieldManager); err != nil {
		e.t.Fatalf("writing a challenge on pod %s: %v", pod.Name, err)
	}
	return value
}

// answerOn reads the pod's answer, and whether the agent's field manager
// owns it (through pods/status).
func (e *env) answerOn(ctx context.Context, pod *corev1.Pod) (answer string, byAgent bool, err error) {
	got, err := e.cluster.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return "", false, err
	}
	key := fmt.Sprintf(`"f:%s"`, rollout.AnswerAnnotation)
	for _, m := range got.ManagedFields {
		if m.Manager == agentFieldManager && m.Subresource == "status" && m.FieldsV1 != nil && strings.Contains(m.FieldsV1.GetRawString(), key) {
			byAgent = true
		}
	}
	return got.Annotations[rollout.AnswerAnnotation], byAgent, nil
}

// TestAgentAnswersChallenges runs the agent as deploy/ runs it, with the
// token the kubelet would mount, NodeRestriction on, acting as its node,
// and as deploy/serviceaccount/ runs it, acting as its service account under
// the node-scope admission policy: a challenge the controller writes on its
// node's pod is answered on that pod, by the agent; with the agent's link to
// the API server cut, a new challenge goes unanswered, and is answered once
// the link is back.
//
// It runs alone (e2e/README.md): it applies deploy/ (or the chart) and its
// fixed names in edgeota-system.
func TestAgentAnswersChallenges(t *testing.T) {
	for _, tc := range []struct{ identity, deploy string }{
		{"node", "deploy"},
		{"serviceaccount", "deploy/serviceaccount"},
	} {
		t.Run(tc.identity, func(t *testing.T) {
			e := newEnv(t, 2)
			node1, node2 := localcluster.NodeName(1), localcluster.NodeName(2)
			e.applyDeploy(tc.deploy)
			e.createDaemonSet(nil)
			proxy, server := e.proxyTo()
			a := e.startRestartableAgent(node1, e.agentKubeconfig(node1, server), "--identity", tc.identity, "--apiserver-timeout", "2s")
			eventually(t, "the agent serving its live view as "+tc.identity, func(ctx context.Context) (bool, string, error) {
				_, body, err := a.get(ctx, "/readyz")
				return strings.Contains(body, "live view") && strings.Contains(body, "--identity="+tc.identity), body, err
			})
			if tc.identity == "serviceaccount" {
				// The answer must pass the policy, not come before it.
				e.waitPolicyEnforced(e.agentKubeconfig(node1, ""), e.podOn(node2))
			}

			pod := e.podOn(node1)
			want := e.challenge(pod)
			eventually(t, "the answer on "+pod.Name, func(ctx context.Context) (bool, string, error) {
				got, byAgent, err := e.answerOn(ctx, pod)
				return got == want && byAgent, fmt.Sprintf("answer %q (by the agent: %t), want %q", got, byAgent, want), err
			})

			proxy.Cut()
			cutOff := e.challenge(pod)
			consistently(t, "a challenge goes unanswered while the agent is cut off", 5*time.Second, func(ctx context.Context) (bool, string, error) {
				got, _, err := e.answerOn(ctx, pod)
				return got == want, fmt.Sprintf("answer %q while cut off", got), err
			})
			proxy.Restore()
			eventually(t, "the answer once the link is back", func(ctx context.Context) (bool, string, error) {
				got, _, err := e.answerOn(ctx, pod)
				return got == cutOff, fmt.Sprintf("answer %q, want %q", got, cutOff), err
			})

			// The agent counts an answer once the API server's reply
			// reaches it, which may be after the test sees the answer.
			eventually(t, "both answers counted as written, none refused", func(ctx context.Context) (bool, string, error) {
				_, metrics, err := a.get(ctx, "/metrics")
				for _, line := range []string{`edgeota_agent_alive_answers_total{result="written"} 2`, `edgeota_agent_alive_answers_total{result="refused"} 0`} {
					if !strings.Contains(metrics, line) {
						return false, fmt.Sprintf("got /metrics:\n%s\nwant %s", metrics, line), err
					}
				}
				return true, "", err
			})
		})
	}
}
