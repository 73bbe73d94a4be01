package harness

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/proc"
)

// agentReadyTimeout bounds the wait for an agent's first cache sync: seconds
// on a quiet machine, a minute or more only when several clusters share it.
const agentReadyTimeout = 2 * time.Minute

// loopback is where every child of a run listens.
const loopback = "127.0.0.1"

// disabled is ota-controller's address for a server it should not start.
const disabled = "0"

// SystemNamespace is edgeota's own namespace, as deploy/ names it: the
// controllers the harness starts keep their rollout records there, and the
// harness creates it if need be.
const SystemNamespace = "edgeota-system"

// ensureNamespace creates the namespace unless it exists.
func (h *Harness) ensureNamespace(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := h.Cluster.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// ControllerOptions say how to run an ota-controller.
type ControllerOptions struct {
	// Name names the process and its log; empty means ControllerBinary.
	Name string
	// Binary replaces bin/ota-controller when set (e.g. another build to
	// compare with).
	Binary string
	// Kubeconfig is the controller's; empty means the cluster's admin one.
	Kubeconfig string
	// LeaseNamespace, when set, makes it elect a leader through a Lease in
	// that namespace, as replicas in a cluster do; empty runs it alone,
	// without leader election.
	LeaseNamespace string
	// MetricsAddr serves /metrics when set (host:port); empty disables it.
	MetricsAddr string
	// KubeAPIQPS and KubeAPIBurst set its client's rate limits; zero keeps
	// the binary's defaults.
	KubeAPIQPS   float64
	KubeAPIBurst int
	// Verbosity is its log verbosity (klog's -v); zero keeps the default.
	Verbosity int
	// Flags are added after those above, for settings the harness does not
	// name; a flag given twice takes its last value.
	Flags []string
}

// args are the controller's command-line flags.
func (o ControllerOptions) args(kubeconfig string) []string {
	args := []string{"--kubeconfig", kubeconfig, "--record-namespace", SystemNamespace,
		"--metrics-bind-address", cmp.Or(o.MetricsAddr, disabled), "--health-probe-bind-address", disabled}
	if o.LeaseNamespace == "" {
		args = append(args, "--leader-elect=false")
	} else {
		args = append(args, "--leader-elect=true", "--leader-elect-namespace", o.LeaseNamespace)
	}
	if o.KubeAPIQPS != 0 {
		args = append(args, "--kube-api-qps", strconv.FormatFloat(o.KubeAPIQPS, 'g', -1, 64))
	}
	if o.KubeAPIBurst != 0 {
		args = append(args, "--kube-api-burst", strconv.Itoa(o.KubeAPIBurst))
	}
	if o.Verbosity != 0 {
		args = append(args, "-v="+strconv.Itoa(o.Verbosity))
	}
	return append(args, o.Flags...)
}

// StartController starts an ota-controller on the run's cluster. It does not
// wait for it: what "ready" means (serving metrics, having synced) is the
// caller's to say.
func (h *Harness) StartController(o ControllerOptions) (*proc.Process, error) {
	if o.Name == "" {
		o.Name = ControllerBinary
	}
	if err := h.ensureNamespace(SystemNamespace); err != nil {
		return nil, err
	}
	if o.Binary == "" {
		o.Binary = h.Tools.Path(ControllerBinary)
	}
	if o.Kubeconfig == "" {
		o.Kubeconfig = h.Cluster.Kubeconfig
	}
	return h.Start(o.Name, append([]string{o.Binary}, o.args(o.Kubeconfig)...)...)
}

// DefaultAgentIdentity is the --identity of the agents the harness starts
// unless told otherwise: their credentials as given, since by default they
// get the cluster admin's kubeconfig, which names no node. An agent acting as
// its node needs a token bound to a pod on it (localcluster's Token) and the
// impersonation RBAC of deploy/.
const DefaultAgentIdentity = "serviceaccount"

// AgentOptions say how to run an ota-server, a node agent.
type AgentOptions struct {
	// Node is the node whose pods it serves.
	Node string
	// Name names the process and its log; empty means AgentBinary-Node.
	Name string
	// Kubeconfig is the agent's; empty means the cluster's admin one.
	Kubeconfig string
	// Port is its loopback port; empty means a free one.
	Port string
	// StateDir is where it keeps its stored view of the pods and its queued
	// actions; empty means NAME-state in the log directory, never the
	// binary's default /var/lib/edgeota, which belongs to the machine.
	StateDir string
	// Stateless runs it without a state directory (--state-dir ""), StateDir
	// unused: the view is lost at every restart and actions cannot be
	// queued. The benchmarks' baseline for what the state directory costs.
	Stateless bool
	// Identity is its --identity; empty means DefaultAgentIdentity.
	Identity string
	// Flags are added after those above, for settings the harness does not
	// name; a flag given twice takes its last value.
	Flags []string
}

// Agent is a running ota-server.
type Agent struct {
	*proc.Process
	// Node is the node whose pods it serves.
	Node string
	// Addr is the host:port it serves gRPC and REST on.
	Addr string
}

// args are the agent's command-line flags, once StartAgent has filled in
// the defaults.
func (o AgentOptions) args() []string {
	stateDir := o.StateDir
	if o.Stateless {
		stateDir = ""
	}
	args := []string{"--kubeconfig", o.Kubeconfig, "--node-name", o.Node, "--bind-address", loopback, "--port", o.Port, "--state-dir", stateDir,
		"--identity", cmp.Or(o.Identity, DefaultAgentIdentity)}
	return append(args, o.Flags...)
}

// StartAgent starts an ota-server on loopback and waits until its pod cache
// has synced (/readyz), failing at once if it exits meanwhile.
func (h *Harness) StartAgent(ctx context.Context, o AgentOptions) (*Agent, error) {
	if o.Name == "" {
		o.Name = AgentBinary + "-" + o.Node
	}
	if o.Kubeconfig == "" {
		o.Kubeconfig = h.Cluster.Kubeconfig
	}
	if o.Port == "" {
		ports, err := proc.FreePorts(1)
		if err != nil {
			return nil, err
		}
		o.Port = ports[0]
	}
	if o.StateDir == "" && !o.Stateless {
		o.StateDir = filepath.Join(h.LogDir, o.Name+"-state")
	}
	p, err := h.Start(o.Name, append([]string{h.Tools.Path(AgentBinary)}, o.args()...)...)
	if err != nil {
		return nil, err
	}
	a := &Agent{Process: p, Node: o.Node, Addr: net.JoinHostPort(loopback, o.Port)}
	if err := p.WaitReady(ctx, "http://"+a.Addr+"/readyz", agentReadyTimeout); err != nil {
		return nil, fmt.Errorf("starting the agent of %s: %w", o.Node, err)
	}
	return a, nil
}
