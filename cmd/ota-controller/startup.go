package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/controller"
	"github.com/edgeota/edgeota/internal/kube"
)

// The start-up checks. Without them a controller whose record namespace is
// missing starts, fails every sync and never says why: it may not read
// Namespaces, and a list in a missing namespace answers 200 with nothing. A
// dry-run create answers what a real one would (404 for a missing
// namespace, 403 for missing rights, admission included) and persists
// nothing, so every replica checks each namespace it writes before it
// campaigns: a misconfigured replica exits saying what to do instead of
// standing by, or leading, forever without acting.

// probeGenerateName begins the generated name of each probe object. Nothing
// of a probe could be taken for a rollout record, even by an admission
// webhook or an audit log that sees it: records are named
// edgeota-rollout-<DaemonSet UID>-..., and are found by their label
// controller.RecordLabel, which a probe does not carry (it has no label).
const probeGenerateName = "edgeota-startup-check-"

// The Roles of deploy/ that grant what the checks probe, and the rest of
// what the controller does there (charts/edgeota/templates/rbac-controller.yaml):
// the remedy names them, so that following it recreates them as deploy/ has
// them (TestStartupExitsWhenForbidden, in e2e/, compares).
const (
	recordsRole = "ota-controller-rollout-records"
	leaseRole   = "ota-controller-leader-election"
)

// checker runs the start-up checks. Its timings are fields so that tests
// need not wait.
type checker struct {
	// backoff spaces the attempts after an answer that is not final.
	backoff wait.Backoff
	// attemptTimeout bounds each request, so that an API server that does
	// not answer (a black-holed link) is logged and retried like one that
	// refuses the connection.
	attemptTimeout time.Duration
}

// defaultChecker retries from half a second up to every 10 s, so that a
// controller started before its API server proceeds within seconds of its
// first answer, and logs a failure at most every 10 s meanwhile.
var defaultChecker = checker{
	backoff:        wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 100, Cap: 10 * time.Second},
	attemptTimeout: 10 * time.Second,
}

// startupCheck is one kind of object the controller must be allowed to
// create in one namespace.
type startupCheck struct {
	// namespace is where; flag is the flag that named it, without dashes.
	namespace, flag string
	// resource is the kind's resource as kubectl and RBAC spell it, with its
	// group ("leases.coordination.k8s.io").
	resource string
	// verbs are all those the controller uses on the resource there, in
	// kubectl create role's form; role is deploy/'s Role granting them.
	verbs, role string
	// keeps says what the controller keeps there, for people.
	keeps string
	// create creates a probe object with opts.
	create func(ctx context.Context, opts metav1.CreateOptions) error
}

// startupChecks are the checks o calls for: ConfigMaps in the record
// namespace and, with leader election, Leases in the Lease's namespace.
func startupChecks(o options, client kube.Interface) []startupCheck {
	checks := []startupCheck{{
		namespace: o.recordNS, flag: recordNamespaceFlag,
		resource: "configmaps", verbs: "list,watch,create,patch,delete", role: recordsRole,
		keeps: "its rollout records",
		create: func(ctx context.Context, opts metav1.CreateOptions) error {
			_, err := client.CoreV1().ConfigMaps(o.recordNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: probeMeta(o.recordNS)}, opts)
			return err
		},
	}}
	if o.leaderElect {
		checks = append(checks, startupCheck{
			namespace: o.leaseNamespace, flag: leaseNamespaceFlag,
			resource: "leases.coordination.k8s.io", verbs: "get,create,update", role: leaseRole,
			keeps: "the leader-election Lease " + leaseName,
			create: func(ctx context.Context, opts metav1.CreateOptions) error {
				_, err := client.CoordinationV1().Leases(o.leaseNamespace).Create(ctx, &coordinationv1.Lease{ObjectMeta: probeMeta(o.leaseNamespace)}, opts)
				return err
			},
		})
	}
	return checks
}

// probeMeta is a probe object's metadata: a generated name, and nothing else.
func probeMeta(namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{GenerateName: probeGenerateName, Namespace: namespace}
}

// run runs the checks in order. It returns nil once each has passed, and
// otherwise every final failure at once (so that one restart fixes them
// all), each saying what to do. An answer that is not final (the API server
// unreachable or starting, a 5xx, a timeout) is logged and retried with
// backoff until ctx ends; the error then wraps ctx's.
func (k checker) run(ctx context.Context, client kube.Interface, checks []startupCheck) error {
	var failures []error
	missing := map[string]*namespaceMissingError{}
	for _, c := range checks {
		if m := missing[c.namespace]; m != nil {
			// One message for the namespace, naming every flag that chose it.
			m.checks = append(m.checks, c)
			continue
		}
		err := k.probe(ctx, client, c)
		if m, ok := errors.AsType[*namespaceMissingError](err); ok {
			missing[c.namespace] = m
		}
		if err != nil {
			failures = append(failures, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(failures...)
}

// probe creates c's probe object in dry-run until the API server answers
// finally: nil when it may, a final error saying what to do when it may not.
func (k checker) probe(ctx context.Context, client kube.Interface, c startupCheck) error {
	logger := klog.FromContext(ctx).WithValues("namespace", c.namespace, "resource", c.resource, "verb", "create")
	opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: controller.FieldManager}
	backoff := k.backoff
	for attempt := 1; ; attempt++ {
		attemptCtx, cancel := context.WithTimeout(ctx, k.attemptTimeout)
		err := c.create(attemptCtx, opts)
		cancel()
		if err == nil {
			logger.Info("Start-up check passed")
			return nil
		}
		if final := k.final(ctx, client, c, err); final != nil {
			return final
		}
		if ctx.Err() != nil {
			return interrupted(ctx, c, attempt, err)
		}
		delay := backoff.Step()
		logger.Error(err, "Start-up check failed, retrying", "attempt", attempt, "retryIn", delay)
		select {
		case <-ctx.Done():
			return interrupted(ctx, c, attempt, err)
		case <-time.After(delay):
		}
	}
}

// interrupted is the error of a check that ctx ended before it was settled.
func interrupted(ctx context.Context, c startupCheck, attempts int, last error) error {
	return fmt.Errorf("checking that ota-controller may create %s in namespace %s: stopped (%w) after %d attempts; the last answer: %w",
		c.resource, c.namespace, ctx.Err(), attempts, last)
}

// namespacesNotReady is how the API server's NamespaceLifecycle admission
// refuses every namespaced create (403) until its cache of namespaces has
// synced, just after the API server starts: the one 403 that passes by
// itself. Its status carries no cause, so its text tells it.
const namespacesNotReady = "not yet ready to handle request"

// final says what to do when err is final for c: a missing namespace (404)
// or a refusal (403). It returns nil for any other answer, which may change
// by itself.
func (k checker) final(ctx context.Context, client kube.Interface, c startupCheck, err error) error {
	where := fmt.Sprintf("cannot create %s in namespace %s, where ota-controller keeps %s (--%s)", c.resource, c.namespace, c.keeps, c.flag)
	switch {
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), namespacesNotReady):
		return nil
	case apierrors.IsNotFound(err) && namespaceNotFound(err, c.namespace):
		return &namespaceMissingError{namespace: c.namespace, checks: []startupCheck{c}}
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: the API server answered 404 without naming the namespace (%w): check that the kubeconfig's server is the cluster's API server", where, err)
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return fmt.Errorf("%s: the namespace is being deleted (%w). Once it is gone, create it again (kubectl create namespace %s), or pass --%s naming another namespace",
			where, err, c.namespace, c.flag)
	case apierrors.IsForbidden(err):
		return k.forbidden(ctx, client, c, where, err)
	}
	return nil
}

// namespaceNotFound reports whether a 404 is the namespace's, as the API
// server's NamespaceLifecycle admission answers for a missing namespace.
func namespaceNotFound(err error, namespace string) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	d := status.Status().Details
	return d.Kind == "namespaces" && d.Name == namespace
}

// forbidden says what to do about a 403. It asks the API server (a
// SelfSubjectAccessReview) whether RBAC is what refused: a 403 that its
// identity is allowed came from admission (a policy, a webhook, a quota),
// which no Role fixes. For RBAC it names the Role to create and, from a
// SelfSubjectReview, the identity to bind it to.
func (k checker) forbidden(ctx context.Context, client kube.Interface, c startupCheck, where string, refusal error) error {
	ctx, cancel := context.WithTimeout(ctx, k.attemptTimeout)
	defer cancel()
	resource, group, _ := strings.Cut(c.resource, ".")
	review, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: c.namespace, Verb: "create", Group: group, Resource: resource,
		}},
	}, metav1.CreateOptions{})
	if err == nil && review.Status.Allowed {
		return fmt.Errorf("%s: refused by admission, not by RBAC, which allows it (%w). Change the admission policy, webhook or quota the API server names, or pass --%s naming another namespace",
			where, refusal, c.flag)
	}
	return fmt.Errorf("%s: forbidden (%w). Grant the controller's identity what it needs there, as deploy/'s Role %s does: "+
		"kubectl -n %s create role %s --verb=%s --resource=%s && kubectl -n %s create rolebinding %s --role=%s %s; or pass --%s naming a namespace where it has them",
		where, refusal, c.role,
		c.namespace, c.role, c.verbs, c.resource, c.namespace, c.role, c.role, k.subject(ctx, client), c.flag)
}

// subject is kubectl create rolebinding's flag naming the controller's
// identity, as a SelfSubjectReview tells it; when the API server does not
// tell, a placeholder for the user its 403 named.
func (k checker) subject(ctx context.Context, client kube.Interface) string {
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || review.Status.UserInfo.Username == "" {
		klog.FromContext(ctx).V(2).Info("Could not learn the controller's identity for the remedy", "err", err)
		return "--user=<the user named above>"
	}
	user := review.Status.UserInfo.Username
	if sa, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		return "--serviceaccount=" + sa
	}
	return "--user=" + user
}

// namespaceMissingError is the final failure of the checks in a namespace
// that does not exist: one message for them all.
type namespaceMissingError struct {
	namespace string
	checks    []startupCheck
}

func (e *namespaceMissingError) Error() string {
	var resources, keeps, flags []string
	for _, c := range e.checks {
		resources = append(resources, c.resource)
		keeps = append(keeps, fmt.Sprintf("%s (--%s)", c.keeps, c.flag))
		flags = append(flags, "--"+c.flag)
	}
	return fmt.Sprintf("cannot create %s in namespace %s, where ota-controller keeps %s: the namespace does not exist. "+
		"Create it (kubectl create namespace %s), or pass %s naming an existing namespace",
		strings.Join(resources, " or "), e.namespace, strings.Join(keeps, " and "), e.namespace, strings.Join(flags, " and "))
}
