// Command ota-server is the edgeota node agent: it serves the OTA contract
// (edgeota.v1.OTAService) for the pods of one node, over gRPC and REST on one
// port, loopback only by default. TLS (--tls-cert-file, --tls-private-key-file),
// client certificates (--client-ca-file) and bearer tokens (--token-auth-file)
// lock it down; once either way of authenticating is on, group
// edgeota:viewers may list and edgeota:upgraders may also act. It keeps its
// view of the pods and the actions queued while the API server is unreachable
// in --state-dir; "ota-server prepare-state-dir" creates that directory and
// hands it to the agent's user, and does nothing else (for a privileged init
// container). Unless GOMEMLIMIT says otherwise, the Go runtime's soft memory
// limit is 20 MiB.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/apiidentity"
	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/internal/command"
	"github.com/edgeota/edgeota/ownerauth"
	"github.com/edgeota/edgeota/rollout"
	"github.com/edgeota/edgeota/server"
	"github.com/edgeota/edgeota/statedir"
)

// drainTimeout bounds how long shutdown waits for in-flight requests.
const drainTimeout = 10 * time.Second

// defaultStateDir is where the agent keeps its state on a node: the hostPath
// deploy/server.yaml mounts.
const defaultStateDir = "/var/lib/edgeota"

// staleTargetsFile is the file of target images earlier agents kept in the
// state directory.
const staleTargetsFile = "targets.json"

type options struct {
	kubeconfig  string
	nodeName    string
	bindAddress string
	port        int
	apiTimeout  time.Duration

	tlsCertFile  string
	tlsKeyFile   string
	clientCAFile string
	tokenFile    string

	identity apiidentity.Mode

	stateDir        string
	upgradeDeadline time.Duration
	maxWatchers     int
	queuedActionTTL time.Duration
}

func main() {
	limitMemory()
	if len(os.Args) > 1 && os.Args[1] == prepareCommand {
		// The subcommand's flags follow its name.
		os.Args = append(os.Args[:1], os.Args[2:]...)
		prepareMain()
		return
	}
	fs := flag.NewFlagSet("ota-server", flag.ContinueOnError)
	opts := options{identity: apiidentity.Node}
	fs.StringVar(&opts.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty means the in-cluster configuration")
	fs.Func("identity", `who the agent is to the API server: "node" (default) impersonates the node its pod-bound token names, so that the API server scopes its reads and writes to this node's pods (Kubernetes 1.36+); "serviceaccount" sends its credentials as they are (older clusters); "auto" tries node and falls back to the service account with a warning (ad-hoc runs only). The identity in force is in /readyz, the start-up log and the metric edgeota_agent_identity`,
		func(v string) (err error) { opts.identity, err = apiidentity.ParseMode(v); return err })
	fs.StringVar(&opts.nodeName, "node-name", os.Getenv("NODE_NAME"), "the node whose pods this agent serves; required (default $NODE_NAME)")
	fs.StringVar(&opts.bindAddress, "bind-address", "127.0.0.1", "IP address to listen on; keep loopback unless the API is otherwise protected")
	fs.IntVar(&opts.port, "port", 10267, "port for gRPC and REST")
	fs.DurationVar(&opts.apiTimeout, "apiserver-timeout", server.DefaultAPIServerTimeout, "bound on each live API server call; past it Upgrade and ImagePull answer 503")
	fs.StringVar(&opts.tlsCertFile, "tls-cert-file", "", "PEM serving certificate; with --tls-private-key-file, serve gRPC and REST over TLS (HTTP/2 by ALPN)")
	fs.StringVar(&opts.tlsKeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&opts.clientCAFile, "client-ca-file", "", "PEM CA bundle; client certificates it signed authenticate their CN as the user and O as the groups (needs TLS)")
	fs.StringVar(&opts.tokenFile, "token-auth-file", "", "bearer tokens in kube-apiserver's static token file format: token,user,uid,\"group1,group2\" (needs TLS off loopback)")
	fs.StringVar(&opts.stateDir, "state-dir", defaultStateDir, "directory (0700, created if missing) where the agent keeps its view of the pods and the queued actions across restarts; empty disables them")
	fs.DurationVar(&opts.queuedActionTTL, "queued-action-ttl", server.DefaultQueuedActionTTL, "how long an action queued while the API server is unreachable waits before it expires")
	fs.DurationVar(&opts.upgradeDeadline, "upgrade-deadline", health.DefaultDeadline, "how long an upgraded pod may take to become available before its upgrade counts as FAILED, unless its DaemonSet sets "+rollout.ProgressDeadlineAnnotation)
	fs.IntVar(&opts.maxWatchers, "max-watchers", server.DefaultMaxWatchers, "concurrent WatchUpgrades streams; beyond, RESOURCE_EXHAUSTED / 429")
	command.Main(fs, func(ctx context.Context) error { return run(ctx, opts) })
}

func (o options) validate() error {
	if o.nodeName == "" {
		return errors.New("--node-name is required (or set $NODE_NAME, e.g. from the downward API's spec.nodeName)")
	}
	if net.ParseIP(o.bindAddress) == nil {
		return fmt.Errorf("--bind-address %q is not an IP address", o.bindAddress)
	}
	if o.port < 0 || o.port > 65535 {
		return fmt.Errorf("--port %d is out of range 0-65535", o.port)
	}
	if o.apiTimeout <= 0 {
		return fmt.Errorf("--apiserver-timeout %s must be positive", o.apiTimeout)
	}
	if o.queuedActionTTL <= 0 {
		return fmt.Errorf("--queued-action-ttl %s must be positive", o.queuedActionTTL)
	}
	if (o.tlsCertFile == "") != (o.tlsKeyFile == "") {
		return errors.New("--tls-cert-file and --tls-private-key-file go together: set both or neither")
	}
	if o.clientCAFile != "" && o.tlsCertFile == "" {
		return errors.New("--client-ca-file needs TLS: set --tls-cert-file and --tls-private-key-file")
	}
	if o.tokenFile != "" && o.tlsCertFile == "" && !o.loopback() {
		return fmt.Errorf("--token-auth-file over plain HTTP is only allowed on loopback, and --bind-address is %s: set --tls-cert-file and --tls-private-key-file, or bind to 127.0.0.1", o.bindAddress)
	}
	if o.upgradeDeadline <= 0 {
		return fmt.Errorf("--upgrade-deadline %s must be positive", o.upgradeDeadline)
	}
	if o.maxWatchers <= 0 {
		return fmt.Errorf("--max-watchers %d must be positive", o.maxWatchers)
	}
	return nil
}

// loopback reports whether the agent listens on loopback only.
func (o options) loopback() bool { return net.ParseIP(o.bindAddress).IsLoopback() }

// authenticates reports whether any caller must prove who it is.
func (o options) authenticates() bool { return o.clientCAFile != "" || o.tokenFile != "" }

// serving loads the credentials the options name: how callers authenticate,
// and the TLS configuration (nil for plain HTTP).
func (o options) serving() (ownerauth.Authenticator, *tls.Config, error) {
	auth := ownerauth.Authenticator{ClientCerts: o.clientCAFile != ""}
	if o.tokenFile != "" {
		tokens, err := ownerauth.LoadTokenFile(o.tokenFile)
		if err != nil {
			return auth, nil, err
		}
		auth.Tokens = tokens
	}
	if o.tlsCertFile == "" {
		return auth, nil, nil
	}
	clientAuth := tls.RequireAndVerifyClientCert
	if auth.Tokens != nil {
		clientAuth = tls.VerifyClientCertIfGiven // a bearer token may stand in for a certificate
	}
	cfg, err := ownerauth.TLSConfig(o.tlsCertFile, o.tlsKeyFile, o.clientCAFile, clientAuth)
	return auth, cfg, err
}

func run(ctx context.Context, o options) error {
	if err := o.validate(); err != nil {
		return err
	}
	auth, tlsConfig, err := o.serving()
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	if !o.loopback() && !o.authenticates() {
		logger.Info("WARNING: serving off loopback without authentication: anyone who can reach this address can upgrade this node's pods; set --client-ca-file or --token-auth-file",
			"address", o.bindAddress)
	}
	// A state directory that cannot be used stops the start, before any
	// contact with the API server.
	var dir *statedir.Dir
	if o.stateDir != "" {
		if dir, err = statedir.Open(o.stateDir); err != nil {
			return fmt.Errorf("--state-dir: %w", err)
		}
		// Earlier agents kept there the target revisions' images they read
		// from ControllerRevisions; they now come with the pods (the
		// controller's offer, package podchannel), and the file is stale.
		if err := dir.Remove(staleTargetsFile); err != nil {
			logger.Info("Could not remove a stale file from the state directory", "file", staleTargetsFile, "err", err)
		}
	} else {
		logger.Info("No --state-dir: the view of the pods is lost at every restart and actions cannot be queued")
	}
	config, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the API server configuration: %w", err)
	}
	config.UserAgent = "ota-server/" + o.nodeName
	clock := &server.APIServerClock{}
	config.Wrap(clock.Wrap)
	var queue *server.ActionQueue
	if dir != nil {
		queue = server.NewActionQueue(ctx, dir, o.queuedActionTTL, clock)
	}
	// Every API call goes through the identity, which is settled at the
	// API server's first answer: until then the stored view is served and
	// live calls answer as from a dead zone.
	identity := server.NewAPIIdentity()
	pods := server.NewPodCache(ctx, identity, o.nodeName, server.PodCacheOptions{Clock: clock, StateDir: dir})
	svc := server.New(o.nodeName, identity, pods, server.Options{APITimeout: o.apiTimeout, Auth: auth, Clock: clock, Queue: queue,
		Identity: identity, Upgrades: server.UpgradeOptions{Deadline: o.upgradeDeadline, MaxWatchers: o.maxWatchers}})
	handler, err := server.NewHandler(ctx, svc)
	if err != nil {
		return err
	}
	// An identity ruled out (a token of another node, impersonation
	// refused) stops the agent with the reason; a signal stops it cleanly.
	serveCtx, stopServing := context.WithCancelCause(ctx)
	defer stopServing(nil)
	// The identity, then the pod cache (and its writes to the state
	// directory), the queue and the answers to the controller's
	// proof-of-life challenges run until Serve returns, and are waited for,
	// so that the last write is done before the process exits.
	bgCtx, stopBackground := context.WithCancel(ctx)
	var background sync.WaitGroup
	background.Go(func() {
		if err := settleIdentity(bgCtx, o, config, identity); err != nil {
			if bgCtx.Err() == nil {
				stopServing(err)
			}
			return
		}
		pods.Run(bgCtx)
	})
	background.Go(func() { svc.RunQueue(bgCtx) })
	background.Go(func() { svc.AnswerChallenges(bgCtx) })
	defer func() { stopBackground(); background.Wait() }()

	addr := net.JoinHostPort(o.bindAddress, strconv.Itoa(o.port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	if tlsConfig != nil {
		l = tls.NewListener(l, tlsConfig)
	}
	logger.Info("Serving the OTA API", "address", l.Addr().String(), "node", o.nodeName, "identity", o.identity,
		"tls", tlsConfig != nil, "clientCertificates", auth.ClientCerts, "tokens", auth.Tokens != nil)
	err = server.Serve(serveCtx, l, handler, drainTimeout)
	if cause := context.Cause(serveCtx); ctx.Err() == nil && cause != nil {
		return cause
	}
	return err
}

// settleIdentity settles who the agent is to the API server (see package
// apiidentity), waiting for the API server's first answer, and puts it in
// force with its client.
func settleIdentity(ctx context.Context, o options, config *rest.Config, identity *server.APIIdentity) error {
	settled, err := apiidentity.Settle(ctx, config, o.nodeName, o.identity, apiidentity.Options{Timeout: o.apiTimeout})
	if err != nil {
		return fmt.Errorf("--identity=%s: %w", o.identity, err)
	}
	clientConfig := config
	if settled.Mode == apiidentity.Node {
		clientConfig = apiidentity.AsNode(config, o.nodeName)
	}
	client, err := server.NewClient(clientConfig)
	if err != nil {
		return fmt.Errorf("creating the API client: %w", err)
	}
	identity.Settle(settled, client)
	logger := klog.FromContext(ctx)
	if settled.Mode == apiidentity.Node {
		logger.Info("Acting as the node: the API server scopes the agent's reads and writes to this node's pods", "identity", settled.Mode, "user", settled.User)
	} else {
		logger.Info("Acting as the service account: reads are not node-scoped", "identity", settled.Mode, "requested", o.identity)
	}
	return nil
}
