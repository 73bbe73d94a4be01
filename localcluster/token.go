package localcluster

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// tokenLifetime is long enough for any run of `make run` or a test.
const tokenLifetime int64 = 24 * 3600

// Token mints a token of the service account, as `kubectl create token`
// does. With boundPod it is bound to that pod, as the kubelet mounts it: the
// token then names the pod's node (user extra
// authentication.kubernetes.io/node-name), which a node agent's identity
// rests on. KWOK runs no kubelet, so this is how a simulated node's agent
// gets its token.
func (c *Cluster) Token(ctx context.Context, namespace, serviceAccount string, boundPod *corev1.Pod) (string, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(tokenLifetime)}}
	if boundPod != nil {
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{
			Kind: "Pod", APIVersion: "v1", Name: boundPod.Name, UID: boundPod.UID,
		}
	}
	resp, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("minting a token for service account %s/%s: %w", namespace, serviceAccount, err)
	}
	return resp.Status.Token, nil
}
