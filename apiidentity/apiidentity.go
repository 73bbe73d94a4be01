// Package apiidentity settles who the node agent is to the API server.
//
// A node agent runs on hardware in its owner's hands, and its credentials can
// be read off the device. Acting as its node (Mode Node: every request
// carries Impersonate-User: system:node:<node>, Kubernetes' constrained
// impersonation, 1.36 and later), a token taken from one node reads and
// changes that node's pods and nothing else: the Node authorizer lets a node
// list and watch only its own pods and get only pods bound to it, and the
// NodeRestriction admission plugin confines its deletes and status writes to
// them. Acting as its service account (Mode ServiceAccount), the credentials
// as given, its reads are whatever RBAC grants: every pod of the cluster.
//
// The agent may start in a dead zone, so the identity is settled at the first
// answer from the API server (Settle keeps asking while it is unreachable);
// an answer that rules the wanted identity out is an error that says why and
// what to do, or, in Mode Auto, a fall back to the service account.
package apiidentity

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/internal/choice"
)

// Mode is how the agent identifies itself to the API server
// (ota-server --identity).
type Mode string

// The modes.
const (
	// Node impersonates the node the agent's token is bound to; a token
	// that cannot is an error.
	Node Mode = "node"
	// ServiceAccount sends the credentials as given, as agents always did.
	ServiceAccount Mode = "serviceaccount"
	// Auto is Node when it works and ServiceAccount otherwise, with a
	// warning: for ad-hoc runs only (a service account kept able to read
	// pods for the fall back lets a stolen token simply not impersonate).
	Auto Mode = "auto"
)

// Modes are the values ParseMode accepts, for flag help.
var Modes = []Mode{Node, ServiceAccount, Auto}

// ParseMode reads a --identity value.
func ParseMode(s string) (Mode, error) {
	m, err := choice.Parse(s, Modes)
	if err != nil {
		return "", fmt.Errorf("--identity %w", err)
	}
	return m, nil
}

// NodeNameExtra is the user extra in which a service-account token bound to
// a pod (what the kubelet mounts) names the node the pod runs on: the node
// the API server lets it impersonate.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// NodeUser is the user name of a node's identity.
func NodeUser(node string) string { return "system:node:" + node }

// AsNode returns a copy of config whose every request impersonates node. Only
// the user is named: in constrained impersonation the API server gives a
// node its groups itself.
func AsNode(config *rest.Config, node string) *rest.Config {
	c := rest.CopyConfig(config)
	c.Impersonate = rest.ImpersonationConfig{UserName: NodeUser(node)}
	return c
}

// Settled is the identity in force.
type Settled struct {
	// Mode is Node or ServiceAccount, never Auto.
	Mode Mode
	// User is the user the API server sees: system:node:<node>, or the
	// credentials' own user (as the API server named it; empty when it was
	// not asked, in Mode ServiceAccount).
	User string
	// FellBack says why Mode Auto settled on ServiceAccount; empty otherwise.
	FellBack string
}

// Options tune Settle; zero fields take their defaults.
type Options struct {
	// Timeout bounds each request (default 5s).
	Timeout time.Duration
	// Backoff is the first wait after the API server did not answer; it
	// doubles up to MaxBackoff (default 1s and 30s).
	Backoff, MaxBackoff time.Duration
}

// Settle decides the identity of the agent of node for want. In Mode
// ServiceAccount it asks nothing. Otherwise it asks the API server, with the
// credentials of config, who they are (a SelfSubjectReview: their node must be
// node) and then lists node's pods as node (the proof that impersonation is
// allowed); while the API server does not answer (unreachable, timed out,
// 5xx, 429) it asks again with backoff until ctx ends. In Mode Node every
// answer that rules impersonation out is an error saying why and what to do;
// Mode Auto settles on ServiceAccount instead, logging one warning. A token
// bound to another node is an error in both.
func Settle(ctx context.Context, config *rest.Config, node string, want Mode, opts Options) (Settled, error) {
	if want == ServiceAccount {
		return Settled{Mode: ServiceAccount}, nil
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.Backoff <= 0 {
		opts.Backoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	a, err := newAsker(config, node, opts)
	if err != nil {
		return Settled{}, err
	}
	user, err := a.retry(ctx, a.review)
	if err != nil {
		return fallBack(ctx, want, user, err)
	}
	if _, err := a.retry(ctx, a.listAsNode); err != nil {
		return fallBack(ctx, want, user, err)
	}
	return Settled{Mode: Node, User: NodeUser(node)}, nil
}

// refusal is a definite answer that rules the node identity out.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

// mismatch is a token bound to another node: never a reason to fall back.
type mismatch struct{ msg string }

func (m *mismatch) Error() string { return m.msg }

// fallBack ends Settle after err: an error in Mode Node (and for a mismatch
// or a cancelled wait in any mode), the service account in Mode Auto.
func fallBack(ctx context.Context, want Mode, user string, err error) (Settled, error) {
	var r *refusal
	if want != Auto || !errors.As(err, &r) {
		return Settled{}, err
	}
	klog.FromContext(ctx).Info("WARNING: --identity=auto: acting as the service account, whose reads are not node-scoped: "+
		"a token taken from this node can read every pod the service account may read; use --identity=node where the cluster allows it",
		"user", user, "reason", r.msg)
	return Settled{Mode: ServiceAccount, User: user, FellBack: r.msg}, nil
}

// asker makes Settle's two requests.
type asker struct {
	node  string
	authn rest.Interface // authentication.k8s.io/v1, as the credentials
	pods  rest.Interface // core/v1, as the node
	opts  Options
}

func newAsker(config *rest.Config, node string, opts Options) (*asker, error) {
	review, err := restClient(config, authenticationv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	pods, err := restClient(AsNode(config, node), schema.GroupVersion{Version: "v1"}, "/api")
	if err != nil {
		return nil, err
	}
	return &asker{node: node, authn: review, pods: pods, opts: opts}, nil
}

// restClient speaks JSON to one API group, with only the types it decodes
// registered (the agent links no clientset).
func restClient(config *rest.Config, gv schema.GroupVersion, apiPath string) (rest.Interface, error) {
	scheme := runtime.NewScheme()
	if err := authenticationv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering %s: %w", authenticationv1.SchemeGroupVersion, err)
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	c := rest.CopyConfig(config)
	c.GroupVersion = &gv
	c.APIPath = apiPath
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("creating the API client: %w", err)
	}
	return rc, nil
}

// retry makes the request until the API server answers it: its result, or
// the error of a definite answer, or ctx's.
func (a *asker) retry(ctx context.Context, request func(context.Context) (string, error)) (string, error) {
	logger := klog.FromContext(ctx)
	backoff := a.opts.Backoff
	for attempt := 1; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
		user, err := request(rctx)
		cancel()
		if err == nil || !unanswered(err) {
			return user, err
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		if attempt == 1 {
			logger.Info("The API server does not answer: the agent's identity is settled when it does; meanwhile the stored view is served and queued actions wait",
				"err", err, "retryIn", wait)
		} else {
			logger.V(2).Info("The API server still does not answer", "err", err, "attempt", attempt, "retryIn", wait)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("settling the agent's identity: %w", context.Cause(ctx))
		case <-time.After(wait):
		}
		backoff = min(2*backoff, a.opts.MaxBackoff)
	}
}

// unanswered reports whether err is no answer from the API server: no
// response (unreachable, timed out), a 5xx, or 429. A refusal or a mismatch
// is an answer.
func unanswered(err error) bool {
	var r *refusal
	var m *mismatch
	if errors.As(err, &r) || errors.As(err, &m) {
		return false
	}
	var s apierrors.APIStatus
	if !errors.As(err, &s) {
		return true
	}
	code := s.Status().Code
	return code >= http.StatusInternalServerError || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code == 0
}

// review asks who the credentials are, and checks that they are bound to the
// agent's node. It returns the user the API server named.
func (a *asker) review(ctx context.Context) (string, error) {
	req := &authenticationv1.SelfSubjectReview{TypeMeta: metav1.TypeMeta{
		APIVersion: authenticationv1.SchemeGroupVersion.String(), Kind: "SelfSubjectReview"}}
	got := &authenticationv1.SelfSubjectReview{}
	if err := a.authn.Post().Resource("selfsubjectreviews").Body(req).Do(ctx).Into(got); err != nil {
		if unanswered(err) {
			return "", err
		}
		return "", &refusal{fmt.Sprintf("the API server refused to say who the agent's credentials are (a SelfSubjectReview, Kubernetes 1.28 or later): %v", err)}
	}
	user := got.Status.UserInfo.Username
	nodes := got.Status.UserInfo.Extra[NodeNameExtra]
	switch {
	case len(nodes) == 0 || nodes[0] == "":
		return user, &refusal{fmt.Sprintf("the agent's credentials (user %q) name no node (no %s): acting as its node needs a service-account token bound to the agent's pod, as the kubelet mounts it; with other credentials use --identity=serviceaccount",
			user, NodeNameExtra)}
	case nodes[0] != a.node:
		return user, &mismatch{fmt.Sprintf("the agent's token is bound to a pod on node %q, not on --node-name %q: an agent serves only the node its token names (check --node-name, or $NODE_NAME from the downward API's spec.nodeName)",
			nodes[0], a.node)}
	}
	return user, nil
}

// listAsNode lists one of the node's pods as the node: the request every
// other one of the agent's is like.
func (a *asker) listAsNode(ctx context.Context) (string, error) {
	err := a.pods.Get().Resource("pods").
		Param("fieldSelector", fields.OneTermEqualSelector("spec.nodeName", a.node).String()).
		Param("limit", "1").Do(ctx).Error()
	switch {
	case err == nil:
		return NodeUser(a.node), nil
	case unanswered(err):
		return "", err
	}
	return "", &refusal{fmt.Sprintf("the API server refused to let the agent act as node %q (%v): acting as its node needs Kubernetes 1.36 or later "+
		"(constrained impersonation, feature gate ConstrainedImpersonation) and RBAC that grants the agent's service account "+
		"impersonate:associated-node on nodes in group authentication.k8s.io and impersonate-on:associated-node:<verb> on pods "+
		"(list, watch, delete) and pods/status (patch), as deploy/ does; on an older cluster run --identity=serviceaccount with deploy/serviceaccount/",
		a.node, err)}
}
