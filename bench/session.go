package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/proc"
)

// createTimeout bounds creating the cluster with all its nodes.
const createTimeout = 10 * time.Minute

// session is one `make bench`: the harness's run, with the cluster and the
// children it started, removed by close however the run ends. This file is
// the only place that starts the cluster or a process; scenarios ask it for
// what they measure.
type session struct {
	p       params
	h       *harness.Harness
	root    string
	logDir  string
	cluster *localcluster.Cluster
	// agent is the ota-server of agentNode once a scenario has asked for it.
	agent *child
	// heartbeat is how the nodes heartbeat now.
	heartbeat localcluster.Heartbeat
}

// newSession creates a cluster of p.nodes KWOK nodes heartbeating as
// heartbeat says under a name of its own, so that a bench never shares a
// cluster with `make run` or the tests; none when withCluster is false
// (only cluster-free scenarios run).
// Its lock keeps other benchmarks out of this checkout until close: two at
// once on a shared machine would each measure the other, and share
// .cache/bench.
func newSession(ctx context.Context, p params, heartbeat localcluster.Heartbeat, withCluster bool) (*session, error) {
	h, err := harness.New(harness.Options{LogDir: filepath.Join(".cache", "bench"), Lock: filepath.Join(".cache", "bench.lock")})
	var locked *proc.LockedError
	if errors.As(err, &locked) {
		return nil, fmt.Errorf("another `make bench` is running in this checkout (%v)", locked)
	}
	if err != nil {
		return nil, err
	}
	if !withCluster {
		return &session{p: p, h: h, root: h.Root, logDir: h.LogDir}, nil
	}
	if p.audit {
		if err := enableAudit(h.LogDir); err != nil {
			return nil, errors.Join(err, h.Close())
		}
	}
	ctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	opts := harness.ClusterOptions{Name: harness.UniqueClusterName("bench"), Nodes: p.nodes, NodeHeartbeat: heartbeat.Interval, NodeLeases: heartbeat.Leases,
		ImagePulls: p.imagePulls}
	if _, err := h.StartCluster(ctx, opts); err != nil {
		return nil, errors.Join(err, h.Close())
	}
	return &session{p: p, h: h, root: h.Root, logDir: h.LogDir, cluster: h.Cluster, heartbeat: heartbeat}, nil
}

// setHeartbeat makes the nodes heartbeat as heartbeat says for the next
// scenario. When that changes it, kwok-controller restarts with the new
// stages and flags and every node heartbeats once (seconds, up to 15 s to
// go back to the default; leaving node Leases deletes them), which is why
// the scenarios run grouped by heartbeat; the alternative, a cluster per
// heartbeat, costs a minute or more of node creation at 500 nodes.
func (s *session) setHeartbeat(ctx context.Context, heartbeat localcluster.Heartbeat) error {
	if heartbeat == s.heartbeat || s.cluster == nil {
		return nil
	}
	progress("nodes heartbeat: %s (restarting kwok-controller)", heartbeat)
	if err := s.cluster.SetHeartbeat(ctx, heartbeat); err != nil {
		return err
	}
	s.heartbeat = heartbeat
	return nil
}

// close stops the children, newest first, deletes the cluster and lets
// the next benchmark in.
func (s *session) close() error {
	return s.h.Close()
}

// nodes names all the cluster's edge nodes.
func (s *session) nodes() []string {
	names := make([]string, s.p.nodes)
	for i := range names {
		names[i] = localcluster.NodeName(i + 1)
	}
	return names
}

// freeAddr is a free loopback host:port.
func freeAddr() (string, error) {
	ports, err := proc.FreePorts(1)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", ports[0]), nil
}

// startController runs a fresh bin/ota-controller named name (its log is
// .cache/bench/NAME.log, at a -v of at least verbosity, more if
// BENCH_CONTROLLER_V asks; flags are added to the harness's), so that its
// CPU time and peak memory belong to one scenario, and waits until it has
// synced a DaemonSet at least once (its sync histogram has a sample).
func (s *session) startController(ctx context.Context, name string, verbosity int, flags ...string) (*child, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p, err := s.h.StartController(harness.ControllerOptions{
		Name: name, Binary: s.p.controllerBin, MetricsAddr: addr,
		KubeAPIQPS: s.p.qps, KubeAPIBurst: s.p.burst, Verbosity: max(s.p.verbosity, verbosity), Flags: flags,
	})
	if err != nil {
		return nil, err
	}
	c := &child{Process: p, addr: addr}
	return c, c.waitServing(ctx, "/metrics", func(body []byte) bool {
		return strings.Contains(string(body), "edgeota_controller_sync_duration_seconds_count")
	})
}

// agentNode is the node whose agent is measured.
var agentNode = localcluster.NodeName(1)

// nodeAgent returns the agent of agentNode with a state directory in the
// bench's log dir (the harness's default), started by the first scenario
// that asks and shared by those after it until stopNodeAgent or the
// session's end.
func (s *session) nodeAgent(ctx context.Context) (*child, error) {
	if s.agent == nil {
		a, err := s.startAgent(ctx, harness.AgentOptions{Name: harness.AgentBinary})
		if err != nil {
			return nil, err
		}
		s.agent = a
	}
	return s.agent, nil
}

// stopNodeAgent stops the shared agent, if it runs, for a scenario that
// measures agents of its own on the same node.
func (s *session) stopNodeAgent() error {
	if s.agent == nil {
		return nil
	}
	err := s.stopChild(s.agent)
	s.agent = nil
	return err
}

// startAgent runs a fresh bin/ota-server as opts say (its log is
// .cache/bench/NAME.log) for agentNode with the admin kubeconfig, and waits
// until its cache has synced. The scenario stops it (stopChild) when it is
// done with it.
func (s *session) startAgent(ctx context.Context, opts harness.AgentOptions) (*child, error) {
	opts.Node = agentNode
	a, err := s.h.StartAgent(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &child{Process: a.Process, addr: a.Addr}, nil
}

// startAgents runs this binary as the node agents of every node (see
// runAgents), answering the proof-of-life challenges on the pods of
// namespace ns that match selector, and waits until its caches have synced.
// The scenario stops it (stopChild) when it is done with it.
func (s *session) startAgents(ctx context.Context, ns, selector string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the benchmark's binary: %w", err)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p, err := s.h.Start("agents-"+ns, self, agentsCommand, "-kubeconfig", s.cluster.Kubeconfig, "-namespace", ns, "-selector", selector, "-addr", addr)
	if err != nil {
		return nil, err
	}
	c := &child{Process: p, addr: addr}
	return c, c.waitServing(ctx, "/readyz", func([]byte) bool { return true })
}

// startCeiling runs this binary as the node API's ceiling server, answering
// with the files given (see runCeiling).
func (s *session) startCeiling(ctx context.Context, jsonPath, protoPath string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the benchmark's binary: %w", err)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p, err := s.h.Start("ceiling", self, ceilingCommand, "-json", jsonPath, "-proto", protoPath, "-addr", addr)
	if err != nil {
		return nil, err
	}
	c := &child{Process: p, addr: addr}
	return c, c.waitServing(ctx, "/pods", func([]byte) bool { return true })
}

// runSelf runs this binary with args (a measuring child, such as the cache
// scenario's), waits for it and returns its standard output; its standard
// error goes to its log.
func (s *session) runSelf(ctx context.Context, args ...string) ([]byte, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the benchmark's binary: %w", err)
	}
	log, err := os.Create(filepath.Join(s.logDir, args[0]+".log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stderr = log
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w (log: %s)", self, strings.Join(args, " "), err, log.Name())
	}
	return out, nil
}

// stopChild stops a child started by this session before the session ends.
func (s *session) stopChild(c *child) error {
	return s.h.Stop(c.Process)
}

// recordAPI is the record scenario's control plane: an etcd and a
// kube-apiserver of their own, with no other component and no nodes.
type recordAPI struct {
	etcdProcess, apiProcess *proc.Process
	// server is the API server's URL, token an admin's bearer token, etcd
	// etcd's client URL (its metrics are there).
	server, token, etcd string
	dir                 string
}

// recordQuota is the record scenario's etcd quota: a guard, so that a
// layout whose bytes grew faster than its nodes would stop on etcd's
// NOSPACE alarm instead of filling the disk.
const recordQuota = 4 << 30

// startRecordAPI starts an etcd (quota recordQuota, no fsync: the scenario
// counts bytes, not latency) and a kube-apiserver over it on loopback, with
// a static admin token and every request allowed, in a directory of the
// bench's cache removed by stopRecordAPI.
func (s *session) startRecordAPI(ctx context.Context) (*recordAPI, error) {
	tools := localcluster.ToolsIn(s.root)
	if err := tools.Check("etcd", "kube-apiserver"); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(s.logDir, "record-api-")
	if err != nil {
		return nil, err
	}
	api := &recordAPI{dir: dir}
	ports, err := proc.FreePorts(3)
	if err != nil {
		return api, err
	}
	api.etcd = "http://127.0.0.1:" + ports[0]
	peer := "http://127.0.0.1:" + ports[1]
	p, err := s.h.Start("record-etcd", tools.Path("etcd"), "--name=record", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+api.etcd, "--advertise-client-urls="+api.etcd,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer, "--initial-cluster=record="+peer,
		fmt.Sprintf("--quota-backend-bytes=%d", recordQuota), "--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return api, err
	}
	api.etcdProcess = p
	if err := p.WaitReady(ctx, api.etcd+"/health", time.Minute); err != nil {
		return api, err
	}
	token, key, err := writeRecordAPIFiles(dir)
	if err != nil {
		return api, err
	}
	api.token = token
	api.server = "https://127.0.0.1:" + ports[2]
	p, err = s.h.Start("record-apiserver", tools.Path("kube-apiserver"), "--etcd-servers="+api.etcd,
		"--bind-address=127.0.0.1", "--secure-port="+ports[2], "--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"), "--authorization-mode=AlwaysAllow",
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file="+key,
		"--service-account-signing-key-file="+key, "--service-cluster-ip-range=10.0.0.0/24",
		"--max-requests-inflight=0", "--max-mutating-requests-inflight=0", "--enable-priority-and-fairness=false")
	if err != nil {
		return api, err
	}
	api.apiProcess = p
	return api, waitAPIServer(ctx, p, api.server, token)
}

// stopRecordAPI stops the record scenario's control plane and removes its
// files.
func (s *session) stopRecordAPI(api *recordAPI) error {
	var errs []error
	for _, p := range []*proc.Process{api.apiProcess, api.etcdProcess} {
		if p != nil {
			errs = append(errs, s.h.Stop(p))
		}
	}
	return errors.Join(append(errs, os.RemoveAll(api.dir))...)
}

// writeRecordAPIFiles writes the API server's static token file (one admin
// token, in system:masters) and service account key, returning the token
// and the key's path.
func writeRecordAPIFiles(dir string) (token, keyPath string, err error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	token = hex.EncodeToString(b)
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(token+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		return "", "", err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	keyPath = filepath.Join(dir, "sa.key")
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return token, keyPath, os.WriteFile(keyPath, pemKey, 0o600)
}

// waitAPIServer waits until the API server answers /readyz (its serving
// certificate is its own, self-signed: not checked on loopback).
func waitAPIServer(ctx context.Context, p *proc.Process, server, token string) error {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.Done():
			return false, fmt.Errorf("%s exited: %w; see %s", p.Name, p.Err(), p.LogPath)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/readyz", nil)
		if err != nil {
			return false, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}
