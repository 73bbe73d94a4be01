// Command ota-server is the edgeota node agent: it serves the OTA contract
// (edgeota.v1.OTAService) for the pods of one node, over gRPC and REST on one
// port, loopback only by default. TLS (--tls-cert-file, --tls-private-key-file),
// client certificates (--client-ca-file) and bearer tokens (--token-auth-file)
// lock it down; once either way of authenticating is on, group
// edgeota:viewers may list and edgeota:upgraders may also act. Unless
// GOMEMLIMIT says otherwise, the Go runtime's soft memory limit is 20 MiB.
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
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/internal/command"
	"github.com/edgeota/edgeota/server"
)

// drainTimeout bounds how long shutdown waits for in-flight requests.
const drainTimeout = 10 * time.Second

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
}

func main() {
	limitMemory()
	fs := flag.NewFlagSet("ota-server", flag.ContinueOnError)
	opts := options{}
	fs.StringVar(&opts.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty means the in-cluster configuration")
	fs.StringVar(&opts.nodeName, "node-name", os.Getenv("NODE_NAME"), "the node whose pods this agent serves (default $NODE_NAME)")
	fs.StringVar(&opts.bindAddress, "bind-address", "127.0.0.1", "IP address to listen on; keep loopback unless the API is otherwise protected")
	fs.IntVar(&opts.port, "port", 10267, "port for gRPC and REST")
	fs.DurationVar(&opts.apiTimeout, "apiserver-timeout", server.DefaultAPIServerTimeout, "bound on each live API server call; past it Upgrade and ImagePull answer 503")
	fs.StringVar(&opts.tlsCertFile, "tls-cert-file", "", "PEM serving certificate; with --tls-private-key-file, serve gRPC and REST over TLS")
	fs.StringVar(&opts.tlsKeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&opts.clientCAFile, "client-ca-file", "", "PEM CA bundle; client certificates it signed authenticate their CN as the user and O as the groups (needs TLS)")
	fs.StringVar(&opts.tokenFile, "token-auth-file", "", "bearer tokens in kube-apiserver's static token file format: token,user,uid,\"group1,group2\" (needs TLS off loopback)")
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
	if (o.tlsCertFile == "") != (o.tlsKeyFile == "") {
		return errors.New("--tls-cert-file and --tls-private-key-file go together: set both or neither")
	}
	if o.clientCAFile != "" && o.tlsCertFile == "" {
		return errors.New("--client-ca-file needs TLS: set --tls-cert-file and --tls-private-key-file")
	}
	if o.tokenFile != "" && o.tlsCertFile == "" && !o.loopback() {
		return fmt.Errorf("--token-auth-file over plain HTTP is only allowed on loopback, and --bind-address is %s: set --tls-cert-file and --tls-private-key-file, or bind to 127.0.0.1", o.bindAddress)
	}
	return nil
}

// loopback reports whether the agent listens on loopback only.
func (o options) loopback() bool { return net.ParseIP(o.bindAddress).IsLoopback() }

// authenticates reports whether any caller must prove who it is.
func (o options) authenticates() bool { return o.clientCAFile != "" || o.tokenFile != "" }

// serving loads the credentials the options name: how callers authenticate,
// and the TLS configuration (nil for plain HTTP).
func (o options) serving() (server.Authenticator, *tls.Config, error) {
	auth := server.Authenticator{ClientCerts: o.clientCAFile != ""}
	if o.tokenFile != "" {
		tokens, err := server.LoadTokenFile(o.tokenFile)
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
	cfg, err := server.TLSConfig(o.tlsCertFile, o.tlsKeyFile, o.clientCAFile, clientAuth)
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
	config, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the API server configuration: %w", err)
	}
	config.UserAgent = "ota-server/" + o.nodeName
	client, err := server.NewClient(config)
	if err != nil {
		return fmt.Errorf("creating the API client: %w", err)
	}

	pods := server.NewPodCache(client, o.nodeName)
	svc := server.New(o.nodeName, client, pods, o.apiTimeout)
	handler, err := server.NewHandler(ctx, svc, auth)
	if err != nil {
		return err
	}
	podsCtx, stopPods := context.WithCancel(ctx)
	informerDone := make(chan struct{})
	go func() { defer close(informerDone); pods.Run(podsCtx) }()
	defer func() { stopPods(); <-informerDone }()

	addr := net.JoinHostPort(o.bindAddress, strconv.Itoa(o.port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	if tlsConfig != nil {
		l = tls.NewListener(l, tlsConfig)
	}
	logger.Info("Serving the OTA API", "address", l.Addr().String(), "node", o.nodeName,
		"tls", tlsConfig != nil, "clientCertificates", auth.ClientCerts, "tokens", auth.Tokens != nil)
	return server.Serve(ctx, l, handler, drainTimeout)
}
