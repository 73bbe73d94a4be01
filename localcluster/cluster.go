package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgeota/edgeota/proc"
)

// Components are the processes kwokctl starts for a cluster, named as in its
// pids/ directory.
var Components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller"}

// ErrNeedsLinux is Create's answer on any other OS: the cluster's binaries,
// kwokctl's process handling and the checks of its components (/proc) are
// Linux's.
var ErrNeedsLinux = errors.New("the local cluster needs Linux (kube-apiserver and friends as local processes, read through /proc)")

// createTimeout bounds kwokctl's wait for a new cluster to be ready: it takes
// seconds on a laptop, far longer only when something is wrong.
const createTimeout = 3 * time.Minute

// createAttempts is how many times Create starts a cluster before giving up.
const createAttempts = 3

// Options describe a local cluster.
type Options struct {
	// Root is the checkout root; the cluster lives in Root/.kwok and its
	// binaries in Root/bin.
	Root string
	// Name is kwokctl's cluster name; clusters that run at the same time need
	// different names.
	Name string
	// Kubeconfig is where kwokctl writes the admin kubeconfig; empty means
	// Root/.kwok/<Name>.kubeconfig. The file is the cluster's alone.
	Kubeconfig string
	// Nodes is how many edge nodes to add, named by NodeName(1..Nodes).
	Nodes int
	// Arm64Nodes is how many of them, the last ones, are arm64 nodes
	// (kubernetes.io/arch); the others are amd64. With ImagePulls, a tag
	// names other bytes on each architecture (RegistryImageID), as a
	// multi-platform image does.
	Arm64Nodes int
	// Log receives kwokctl's and kubectl's output; nil discards it.
	Log io.Writer
	// NodeHeartbeat is how often the nodes report their status, their only
	// heartbeat without NodeLeases: every NodeHeartbeat to
	// 1.5 × NodeHeartbeat. Zero means every 10-15 s. The controller's proof
	// of life waits for one heartbeat per wave, so tests of whole rollouts
	// shorten it. With NodeLeases it must be zero.
	NodeHeartbeat time.Duration
	// NodeLeases makes the nodes heartbeat as kubelets do: node Leases
	// renewed every 10 s and the status written every 5 minutes (see
	// Heartbeat, and what a cut-off node does then).
	NodeLeases bool
	// ImagePulls, when set, models image pulls: a pod whose node has not
	// pulled its images waits for their pulls before KWOK starts it, and
	// missing images and flaky registries fail as on a kubelet (see
	// ImagePulls). A simulator in this process carries them out until
	// Delete. Nil starts every pod at once, as KWOK alone does.
	ImagePulls *ImagePulls
}

// Cluster is a running local cluster.
type Cluster struct {
	// Name is kwokctl's name for the cluster.
	Name string
	// Kubeconfig is the path of the admin kubeconfig.
	Kubeconfig string
	// Config is the admin client configuration read from Kubeconfig.
	Config *rest.Config
	// Client is an admin client of the cluster.
	Client kubernetes.Interface
	// Tools locates the binaries.
	Tools Tools

	workDir    string
	log        io.Writer
	heartbeat  Heartbeat
	imagePulls *ImagePulls
	// pulls is the running image pull simulator, with ImagePulls.
	pulls *pullSimulator
}

// Create starts a cluster with kwokctl's binary runtime and adds opts.Nodes
// edge nodes, waiting until they are Ready; with opts.ImagePulls it then
// starts the image pull simulator, before any pod is created. A start whose
// components do not all come up (e.g. a port taken between kwokctl's choice
// and the bind, when clusters start side by side) is deleted and tried
// again, up to createAttempts times. On failure it deletes what it started.
func Create(ctx context.Context, opts Options) (*Cluster, error) {
	if runtime.GOOS != "linux" {
		return nil, ErrNeedsLinux
	}
	c := newCluster(opts)
	if err := c.heartbeat.Validate(); err != nil {
		return nil, err
	}
	if c.imagePulls != nil {
		if err := c.imagePulls.Validate(); err != nil {
			return nil, err
		}
	}
	if err := c.Tools.Check(ClusterBinaries...); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.workDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating kwokctl's work dir: %w", err)
	}
	var err error
	for attempt := 1; attempt <= createAttempts; attempt++ {
		if err = c.start(ctx); err == nil {
			break
		}
		err = errors.Join(err, c.Delete(context.WithoutCancel(ctx)))
		fmt.Fprintf(c.log, "localcluster: attempt %d of %d to start cluster %q failed: %v\n", attempt, createAttempts, c.Name, err)
		if ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, opts.Nodes)
	for i := range names {
		names[i] = NodeName(i + 1)
	}
	arm := max(len(names)-max(opts.Arm64Nodes, 0), 0)
	if err := errors.Join(c.AddNodes(ctx, names[:arm]...), c.AddNodesArch(ctx, "arm64", names[arm:]...)); err != nil {
		return nil, errors.Join(err, c.Delete(context.WithoutCancel(ctx)))
	}
	if c.imagePulls != nil {
		if c.pulls, err = startPullSimulator(ctx, c.Client, *c.imagePulls, c.log); err != nil {
			return nil, errors.Join(err, c.Delete(context.WithoutCancel(ctx)))
		}
	}
	return c, nil
}

// start creates the cluster and waits until every component serves.
func (c *Cluster) start(ctx context.Context) error {
	if err := c.writeOwner(); err != nil {
		return err
	}
	if err := c.create(ctx); err != nil {
		return err
	}
	if err := c.connect(); err != nil {
		return err
	}
	return c.waitComponents(ctx)
}

// RemoveLeftover deletes the cluster opts names if its files exist, as left by
// a process that died before deleting it, and reports whether there was one.
// The caller must know that no live process still uses it.
func RemoveLeftover(ctx context.Context, opts Options) (bool, error) {
	c := newCluster(opts)
	if _, err := os.Stat(c.WorkDir()); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return true, c.Delete(ctx)
}

func newCluster(opts Options) *Cluster {
	c := &Cluster{
		Name:       opts.Name,
		Kubeconfig: opts.Kubeconfig,
		Tools:      ToolsIn(opts.Root),
		workDir:    filepath.Join(opts.Root, ".kwok"),
		log:        opts.Log,
		heartbeat:  Heartbeat{Leases: opts.NodeLeases, Interval: opts.NodeHeartbeat},
		imagePulls: opts.ImagePulls,
	}
	if c.Kubeconfig == "" {
		c.Kubeconfig = filepath.Join(c.workDir, opts.Name+".kubeconfig")
	}
	if c.log == nil {
		c.log = io.Discard
	}
	return c
}

func (c *Cluster) create(ctx context.Context) error {
	ports, err := proc.FreePorts(6)
	if err != nil {
		return err
	}
	config := c.configPath()
	if err := writeConfig(config, c.heartbeat, c.imagePulls != nil, ports[5]); err != nil {
		return err
	}
	t := c.Tools
	err = c.kwokctl(ctx, "create", "cluster",
		"--config", config,
		"--runtime", "binary",
		"--etcd-binary", t.Path("etcd"),
		"--kube-apiserver-binary", t.Path("kube-apiserver"),
		"--kube-controller-manager-binary", t.Path("kube-controller-manager"),
		"--kube-scheduler-binary", t.Path("kube-scheduler"),
		"--kwok-controller-binary", t.Path("kwok"),
		// Ports of FreePorts's rather than kwokctl's fixed scan from 32767
		// down, which clusters created side by side race for (and etcd's
		// peer port in the configuration).
		"--etcd-port", ports[0],
		"--kube-apiserver-port", ports[1],
		"--kube-controller-manager-port", ports[2],
		"--kube-scheduler-port", ports[3],
		"--controller-port", ports[4],
		"--disable-qps-limits",
		// The node lifecycle controller checks nodes every 5 s and gives up on
		// one after 40 s without a heartbeat (factor 5: 25 s and 200 s).
		"--heartbeat-factor", "1",
		// One instance of each: with leader election they exit when the API
		// server is away past their renew deadline (10 s), and the cluster
		// would be left without its DaemonSet controller or scheduler.
		"--extra-args", "kube-controller-manager=leader-elect=false",
		"--extra-args", "kube-scheduler=leader-elect=false",
		// NodeRestriction, as kubeadm and managed clusters enable it: a node's
		// identity may delete and write the status of its own pods only. A
		// node agent acting as its node (ota-server --identity=node) has no
		// other guard on its writes. The flag adds to kube-apiserver's default
		// plugins, which stay on (ValidatingAdmissionPolicy among them).
		"--extra-args", "kube-apiserver=enable-admission-plugins=NodeRestriction",
		"--wait", createTimeout.String(),
	)
	if err != nil {
		return fmt.Errorf("creating local cluster %q: %w", c.Name, err)
	}
	return nil
}

func (c *Cluster) connect() error {
	config, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("reading the kubeconfig of local cluster %q: %w", c.Name, err)
	}
	config.QPS, config.Burst = -1, 0 // the tests' own cluster: no client-side throttling
	// Protobuf, as the cluster's components and ota-controller speak: the
	// bench's and the tests' watches of every node and pod then cost the API
	// server and the 2 cores they share with what they measure far less
	// than JSON.
	config.ContentType = kruntime.ContentTypeProtobuf
	config.AcceptContentTypes = kruntime.ContentTypeProtobuf + "," + kruntime.ContentTypeJSON
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating a client of local cluster %q: %w", c.Name, err)
	}
	c.Config, c.Client = config, client
	return nil
}

// Delete stops the image pull simulator, if it runs, and every process of
// the cluster, and removes its files, the kubeconfig and owner file
// included.
func (c *Cluster) Delete(ctx context.Context) error {
	if c.pulls != nil {
		c.pulls.stop()
		c.pulls = nil
	}
	if _, err := os.Stat(c.WorkDir()); err == nil {
		if err := c.kwokctl(ctx, "delete", "cluster"); err != nil {
			return fmt.Errorf("deleting local cluster %q: %w", c.Name, err)
		}
	}
	live.remove(c)
	for _, file := range []string{c.Kubeconfig, c.configPath(), c.ownerPath()} {
		if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing the files of local cluster %q: %w", c.Name, err)
		}
	}
	return nil
}

// configPath is where the cluster's kwokctl configuration is written.
func (c *Cluster) configPath() string {
	return filepath.Join(c.workDir, c.Name+".kwok.yaml")
}

// kwokctl runs kwokctl on this cluster, in the checkout's work dir and with
// the cluster's own kubeconfig, so that neither ~/.kwok nor ~/.kube is used.
func (c *Cluster) kwokctl(ctx context.Context, args ...string) error {
	args = append(args, "--name", c.Name, "--kubeconfig", c.Kubeconfig)
	cmd := exec.CommandContext(ctx, c.Tools.Path("kwokctl"), args...)
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+c.workDir)
	cmd.Stdout, cmd.Stderr = c.log, c.log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kwokctl %v: %w", args[:2], err)
	}
	return nil
}

// Kubectl runs bin/kubectl against the cluster as admin and returns its
// standard output; its standard error is part of the error. Its discovery
// cache is KubectlCacheDir, not ~/.kube/cache.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.Tools.Path("kubectl"),
		append([]string{"--kubeconfig", c.Kubeconfig, "--cache-dir", c.KubectlCacheDir()}, args...)...)
	var stderr proc.TailBuffer
	cmd.Stderr = io.MultiWriter(&stderr, c.log)
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("kubectl %v: %w: %s", args, err, stderr.String())
	}
	return out, nil
}

// WorkDir is the cluster's own directory under kwokctl's work dir: its
// logs, PID files, PKI and the recorded component commands.
func (c *Cluster) WorkDir() string {
	return filepath.Join(c.workDir, "clusters", c.Name)
}

// KubectlCacheDir is where kubectl should keep its discovery cache for this
// cluster (flag --cache-dir): in the checkout, and deleted with the cluster.
func (c *Cluster) KubectlCacheDir() string {
	return filepath.Join(c.WorkDir(), "kubectl-cache")
}

// CAFile is the certificate authority that signed the API server's
// certificate, for kubeconfigs that do not use the admin's.
func (c *Cluster) CAFile() string {
	return filepath.Join(c.WorkDir(), "pki", "ca.crt")
}

// Repush models a push of image's tag again, to other bytes: nodes that
// pull it from now on get a new digest (RegistryImageID), those that hold
// it keep the bytes they pulled, as a node's runtime does. It needs
// ImagePulls: the simulator tells KWOK which digest each node holds.
func (c *Cluster) Repush(image string) error {
	if c.pulls == nil {
		return errors.New("localcluster: a push of a tag again needs image pulls modelled (Options.ImagePulls)")
	}
	c.pulls.repush(image)
	return nil
}
