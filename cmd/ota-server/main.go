// Command ota-server is the edgeota node agent: it serves the OTA contract
// (edgeota.v1.OTAService) for the pods of one node, over gRPC and REST on one
// port, loopback only by default.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

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
}

func main() {
	fs := flag.NewFlagSet("ota-server", flag.ContinueOnError)
	opts := options{}
	fs.StringVar(&opts.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty means the in-cluster configuration")
	fs.StringVar(&opts.nodeName, "node-name", os.Getenv("NODE_NAME"), "the node whose pods this agent serves (default $NODE_NAME)")
	fs.StringVar(&opts.bindAddress, "bind-address", "127.0.0.1", "IP address to listen on; keep loopback unless the API is otherwise protected")
	fs.IntVar(&opts.port, "port", 10267, "port for gRPC and REST")
	fs.DurationVar(&opts.apiTimeout, "apiserver-timeout", server.DefaultAPIServerTimeout, "bound on each live API server call; past it Upgrade and ImagePull answer 503")
	klog.InitFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background().WithName("ota-server"))
	if err := run(ctx, opts); err != nil {
		klog.FromContext(ctx).Error(err, "ota-server failed")
		klog.Flush()
		os.Exit(1)
	}
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
	return nil
}

func run(ctx context.Context, o options) error {
	if err := o.validate(); err != nil {
		return err
	}
	config, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the API server configuration: %w", err)
	}
	config.UserAgent = "ota-server/" + o.nodeName
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating the API client: %w", err)
	}

	factory := server.NewPodInformerFactory(client, o.nodeName)
	svc := server.New(o.nodeName, client, factory.Core().V1().Pods(), o.apiTimeout)
	handler, err := server.NewHandler(ctx, svc)
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()

	addr := net.JoinHostPort(o.bindAddress, strconv.Itoa(o.port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	klog.FromContext(ctx).Info("Serving the OTA API", "address", l.Addr().String(), "node", o.nodeName)
	return server.Serve(ctx, l, handler, drainTimeout)
}
