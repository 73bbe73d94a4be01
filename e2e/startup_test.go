//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/edgeota/edgeota/harness"
)

// probePrefix begins the generated names of the objects ota-controller
// creates in dry-run at start (cmd/ota-controller/startup.go), spelled here
// as an operator would look for them: none may ever be persisted.
const probePrefix = "edgeota-startup-check-"

// TestStartupExitsWhenNamespaceMissing: ota-controller started with a
// --record-namespace that does not exist exits 1 at once, saying so and
// what to do, and so does one whose --leader-elect-namespace does not exist;
// once the namespace is created as the message says, it starts and leads.
// Its probes of the namespaces that exist persist nothing.
//
// It runs alone (e2e/README.md): it applies deploy/ (or the chart) and its
// fixed names in edgeota-system.
func TestStartupExitsWhenNamespaceMissing(t *testing.T) {
	const absent = "edgeota-absent"
	e := newEnv(t, 0)
	e.expectControllerExits(harness.ControllerOptions{Name: "ota-controller-records-absent", LeaseNamespace: systemNamespace,
		Flags: []string{"--record-namespace", absent}},
		"cannot create configmaps in namespace edgeota-absent, where ota-controller keeps its rollout records (--record-namespace): the namespace does not exist",
		"Create it (kubectl create namespace edgeota-absent), or pass --record-namespace naming an existing namespace")
	e.expectControllerExits(harness.ControllerOptions{Name: "ota-controller-lease-absent", LeaseNamespace: absent},
		"cannot create leases.coordination.k8s.io in namespace edgeota-absent, where ota-controller keeps the leader-election Lease ota-controller (--leader-elect-namespace): the namespace does not exist",
		"Create it (kubectl create namespace edgeota-absent), or pass --leader-elect-namespace naming an existing namespace")
	e.expectNoProbes(systemNamespace)

	// The remedy, as the message spells it.
	if _, err := e.cluster.Kubectl(e.ctx(), "create", "namespace", absent); err != nil {
		t.Fatal(err)
	}
	e.startControllerWith(harness.ControllerOptions{LeaseNamespace: absent, Flags: []string{"--record-namespace", absent}})
	e.waitLeaseHeld(absent)
	e.expectNoProbes(absent)
}

// TestStartupExitsWhenForbidden: deploy/'s controller identity without the
// Roles of its rollout records and of its Lease exits 1 at once, naming for
// each the namespace, the resource and the verb refused, and the commands
// that grant them; those commands recreate deploy/'s Roles as they were,
// and the controller then starts and leads.
//
// It runs alone (e2e/README.md): it applies deploy/ (or the chart) and its
// fixed names in edgeota-system.
func TestStartupExitsWhenForbidden(t *testing.T) {
	e := newEnv(t, 0)
	e.applyDeploy("deploy")
	grants := []struct {
		role, group, resource string
		// refused is the start of the message; commands is the remedy it
		// spells, and what follows it.
		refused, commands string
	}{{
		role: "ota-controller-rollout-records", resource: "configmaps",
		refused: "cannot create configmaps in namespace edgeota-system, where ota-controller keeps its rollout records (--record-namespace): forbidden",
		commands: "kubectl -n edgeota-system create role ota-controller-rollout-records --verb=list,watch,create,patch,delete --resource=configmaps && " +
			"kubectl -n edgeota-system create rolebinding ota-controller-rollout-records --role=ota-controller-rollout-records --serviceaccount=edgeota-system:ota-controller" +
			"; or pass --record-namespace naming a namespace where it has them",
	}, {
		role: "ota-controller-leader-election", group: "coordination.k8s.io", resource: "leases",
		refused: "cannot create leases.coordination.k8s.io in namespace edgeota-system, where ota-controller keeps the leader-election Lease ota-controller (--leader-elect-namespace): forbidden",
		commands: "kubectl -n edgeota-system create role ota-controller-leader-election --verb=get,create,update --resource=leases.coordination.k8s.io && " +
			"kubectl -n edgeota-system create rolebinding ota-controller-leader-election --role=ota-controller-leader-election --serviceaccount=edgeota-system:ota-controller" +
			"; or pass --leader-elect-namespace naming a namespace where it has them",
	}}
	roles := e.cluster.Client.RbacV1().Roles(systemNamespace)
	deployed := map[string][]rbacv1.PolicyRule{}
	for _, g := range grants {
		role, err := roles.Get(e.ctx(), g.role, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		deployed[g.role] = role.Rules
		if err := roles.Delete(e.ctx(), g.role, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := e.cluster.Client.RbacV1().RoleBindings(systemNamespace).Delete(e.ctx(), g.role, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	token, err := e.cluster.Token(e.ctx(), systemNamespace, controllerAccount, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := e.writeKubeconfig(controllerAccount, "", token)
	identity := clientFor(t, kubeconfig)
	for _, g := range grants {
		waitMayCreate(t, identity, g.group, g.resource, false)
	}

	var want []string
	for _, g := range grants {
		want = append(want, g.refused, g.commands)
	}
	e.expectControllerExits(harness.ControllerOptions{Name: "ota-controller-forbidden", Kubeconfig: kubeconfig, LeaseNamespace: systemNamespace},
		append(want, "system:serviceaccount:edgeota-system:ota-controller", "cannot create resource")...)
	e.expectNoProbes(systemNamespace)

	// The remedy, as the message spells it.
	for _, g := range grants {
		commands, _, _ := strings.Cut(g.commands, ";")
		for command := range strings.SplitSeq(commands, " && ") {
			if _, err := e.cluster.Kubectl(e.ctx(), strings.Fields(strings.TrimPrefix(command, "kubectl "))...); err != nil {
				t.Fatal(err)
			}
		}
		granted, err := roles.Get(e.ctx(), g.role, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(granted.Rules, deployed[g.role]) {
			t.Errorf("the message's Role %s grants %+v, want deploy/'s %+v", g.role, granted.Rules, deployed[g.role])
		}
		waitMayCreate(t, identity, g.group, g.resource, true)
	}
	e.startControllerWith(harness.ControllerOptions{Name: "ota-controller-granted", Kubeconfig: kubeconfig, LeaseNamespace: systemNamespace})
	e.waitLeaseHeld(systemNamespace)
	e.expectNoProbes(systemNamespace)
}

// expectControllerExits starts bin/ota-controller as opts say and fails the
// test unless it exits 1 within waitTimeout (a deadline against a hang, not
// a measure) with a log saying each of want. It returns the log.
func (e *env) expectControllerExits(opts harness.ControllerOptions, want ...string) string {
	e.t.Helper()
	p, err := e.h.StartController(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = e.h.Stop(p) })
	select {
	case <-p.Done():
	case <-e.ctx().Done():
		e.t.Fatalf("%s still runs after %s, want it to exit; see %s", p.Name, waitTimeout, p.LogPath)
	}
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		e.t.Fatal(err)
	}
	log := string(data)
	var exit *exec.ExitError
	if !errors.As(p.Err(), &exit) || exit.ExitCode() != 1 {
		e.t.Errorf("%s: got exit %v, want status 1", p.Name, p.Err())
	}
	for _, w := range append([]string{`"ota-controller failed"`}, want...) {
		if !strings.Contains(log, w) {
			e.t.Errorf("%s's log:\n%s\nwant it to say %q", p.Name, log, w)
		}
	}
	return log
}

// expectNoProbes fails the test if a start-up probe object was persisted in
// the namespace.
func (e *env) expectNoProbes(namespace string) {
	e.t.Helper()
	ctx := e.ctx()
	configMaps, err := e.cluster.Client.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	leases, err := e.cluster.Client.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, cm := range configMaps.Items {
		names = append(names, "configmap/"+cm.Name)
	}
	for _, l := range leases.Items {
		names = append(names, "lease/"+l.Name)
	}
	for _, n := range names {
		if strings.Contains(n, probePrefix) {
			e.t.Errorf("got %s in namespace %s, want no start-up probe persisted (all: %v)", n, namespace, names)
		}
	}
}

// waitLeaseHeld waits until the controller's Lease in the namespace has a
// holder: a controller that passed its start-up checks leads.
func (e *env) waitLeaseHeld(namespace string) {
	e.t.Helper()
	eventually(e.t, "Lease "+namespace+"/"+leaseName+" held", func(ctx context.Context) (bool, string, error) {
		lease, err := e.cluster.Client.CoordinationV1().Leases(namespace).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", "no holder", nil
	})
}

// waitMayCreate waits until the API server's authorizer answers want for
// the client's creating the resource in edgeota-system: RBAC changes reach
// it through a watch, not at once.
func waitMayCreate(t *testing.T, client kubernetes.Interface, group, resource string, want bool) {
	t.Helper()
	eventually(t, "the authorizer's answer to create "+resource, func(ctx context.Context) (bool, string, error) {
		review, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: systemNamespace, Verb: "create", Group: group, Resource: resource,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, "", err
		}
		return review.Status.Allowed == want, review.Status.Reason, nil
	})
}
