// Command kubectl-edgeota is a kubectl plugin, `kubectl edgeota`, for the
// operator of edgeota's rollouts: kubectl's own `rollout status` refuses
// OnDelete DaemonSets, and `rollout pause` refuses DaemonSets altogether.
//
//	kubectl edgeota rollout status daemonset/NAME [-n NS] [--watch] [--timeout D]
//	kubectl edgeota rollout pause daemonset/NAME [-n NS]
//	kubectl edgeota rollout resume daemonset/NAME [-n NS]
//
// status tells where the rollout stands, from the controller's summary on the
// DaemonSet (edgeota.io/rollout-status), and whether that summary is stale;
// with --watch on a terminal it draws the rollout live (live.go), and prints
// text blocks anywhere else. pause and resume write and remove
// edgeota.io/paused. The kubeconfig is found as kubectl finds it
// (--kubeconfig, $KUBECONFIG, ~/.kube/config), and kubectl's connection
// flags apply (--context, -n, --server, --token, ...).
//
// Exit codes: 0 complete (without --watch: printed, unless halted); 1 halted,
// or the DaemonSet is not rolled out by edgeota, or another error; 2 bad
// usage or kubeconfig; 3 --timeout passed; 4 the API server is unreachable or
// unavailable; 5 unauthenticated or forbidden; 6 no such DaemonSet.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	_ "time/tzdata" // times are shown in the user's zone ($TZ), also where the system has no zoneinfo

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/edgeota/edgeota/internal/exitcode"
	"github.com/edgeota/edgeota/internal/terminal"
	"github.com/edgeota/edgeota/internal/version"
)

// fieldManager names the plugin's writes in managedFields.
const fieldManager = "kubectl-edgeota"

const usage = `Follow and control edgeota's rollouts of DaemonSets.

Usage:
  kubectl edgeota rollout status daemonset/NAME [-n NS] [--watch] [--timeout D]
  kubectl edgeota rollout pause daemonset/NAME [-n NS]
  kubectl edgeota rollout resume daemonset/NAME [-n NS]

  status  where the rollout stands: nodes updated, in flight, waiting for their
          maintenance window, held by their owners, skipped while NotReady,
          failed; OTA offers not taken yet; whether the controller is behind.
          Prints once, or with --watch follows it until it completes or halts:
          on a terminal, drawn live in one frame (a bar of the nodes by state,
          countdowns); elsewhere, or with TERM=dumb, as text blocks.
  pause   stops new deletions and offers (annotation edgeota.io/paused).
  resume  removes edgeota.io/paused.

  The DaemonSet is daemonset/NAME, ds/NAME or daemonset NAME.

Exit codes: 0 complete (without --watch: also in progress, as kubectl's
--watch=false), 1 halted or not rolled out by edgeota, 2 bad usage,
3 --timeout passed, 4 API server unreachable, 5 unauthenticated or forbidden,
6 no such DaemonSet.

Flags (kubectl's connection flags apply):
`

// options are the command line, parsed.
type options struct {
	watch   bool
	timeout time.Duration
	version bool
	config  clientcmd.ClientConfig
}

// environment is what the plugin works with: the real ones in main, fakes
// in tests.
type environment struct {
	stdout, stderr io.Writer
	// connect makes the API client from the kubeconfig.
	connect func(clientcmd.ClientConfig) (kubernetes.Interface, error)
	now     func() time.Time
	// zone is the user's time zone, in which times are shown.
	zone *time.Location
	// getenv reads the environment: TERM, NO_COLOR.
	getenv func(string) string
	// logs is where client-go's log lines go; nil leaves them alone.
	logs *logOutput
}

func main() {
	os.Exit(process(connect))
}

// process is the plugin as a process: its arguments, its standard streams
// and environment, client-go's log lines, and SIGINT or SIGTERM (Ctrl-C)
// ending a watch. It returns the exit code.
func process(connect func(clientcmd.ClientConfig) (kubernetes.Interface, error)) int {
	logs := newLogOutput()
	klog.SetLoggerWithOptions(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(logs))),
		klog.WriteKlogBuffer(func(line []byte) { _, _ = logs.Write(line) }))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return run(ctx, os.Args[1:], environment{stdout: os.Stdout, stderr: os.Stderr, connect: connect, now: time.Now, zone: time.Local,
		getenv: os.Getenv, logs: logs})
}

// connect is the connector of the real cluster.
func connect(config clientcmd.ClientConfig) (kubernetes.Interface, error) {
	rest, err := config.ClientConfig()
	if err != nil {
		return nil, usageError{fmt.Errorf("kubeconfig: %w", err)}
	}
	rest.UserAgent = fieldManager + "/" + version.Get().Version
	client, err := kubernetes.NewForConfig(rest)
	if err != nil {
		return nil, usageError{fmt.Errorf("kubeconfig: %w", err)}
	}
	return client, nil
}

// run is the plugin with its arguments; it returns the exit code.
func run(ctx context.Context, args []string, env environment) int {
	o, positional, err := parseFlags(args, env.stderr)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return exitcode.OK
	case err != nil:
		fmt.Fprintf(env.stderr, "error: %v\nSee 'kubectl edgeota --help'.\n", err)
		return exitcode.Usage
	case o.version:
		fmt.Fprint(env.stdout, version.Get().String("kubectl-edgeota"))
		return exitcode.OK
	}
	verb, name, err := o.parseCommand(positional)
	if err != nil {
		fmt.Fprintf(env.stderr, "error: %v\nSee 'kubectl edgeota --help'.\n", err)
		return exitcode.Usage
	}
	namespace, _, err := o.config.Namespace()
	if err != nil {
		fmt.Fprintf(env.stderr, "error: kubeconfig: %v\n", err)
		return exitcode.Usage
	}
	client, err := env.connect(o.config)
	if err != nil {
		fmt.Fprintf(env.stderr, "error: %v\n", err)
		return exitCode(err)
	}
	c := &cli{client: client, namespace: namespace, out: env.stdout, now: env.now, zone: env.zone, stderr: env.stderr, logs: env.logs}
	if env.getenv != nil {
		c.tty, _ = terminal.Of(env.stdout, env.getenv("TERM"))
		c.color = env.getenv("NO_COLOR") == ""
	}
	switch verb {
	case "status":
		err = c.status(ctx, name, o.watch, o.timeout)
	case "pause":
		err = c.setPaused(ctx, name, true)
	case "resume":
		err = c.setPaused(ctx, name, false)
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "error: %v\n", describe(err, name, namespace))
	}
	return exitCode(err)
}

// parseFlags parses the command line, flags anywhere among the arguments as
// kubectl takes them, and returns the positional arguments.
func parseFlags(args []string, stderr io.Writer) (options, []string, error) {
	var o options
	fs := pflag.NewFlagSet("kubectl-edgeota", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVarP(&o.watch, "watch", "w", false, "status: follow the rollout until it completes or halts")
	fs.DurationVar(&o.timeout, "timeout", 0, "status --watch: give up after this long (exit 3); 0 waits for ever")
	fs.BoolVar(&o.version, "version", false, "print the version, git commit, build date and Go version, then exit")
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	fs.StringVar(&rules.ExplicitPath, clientcmd.RecommendedConfigPathFlag, "", "path to the kubeconfig file to use")
	overrides := &clientcmd.ConfigOverrides{}
	clientcmd.BindOverrideFlags(overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, nil, err
	}
	o.config = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	return o, fs.Args(), nil
}

// parseCommand checks the positional arguments: rollout VERB DAEMONSET, the
// DaemonSet as TYPE/NAME or TYPE NAME. It returns the verb and the name.
func (o options) parseCommand(positional []string) (verb, name string, err error) {
	if len(positional) == 0 {
		return "", "", errors.New("no command: want rollout status|pause|resume daemonset/NAME")
	}
	if positional[0] != "rollout" {
		return "", "", fmt.Errorf("unknown command %q: want rollout", positional[0])
	}
	if len(positional) < 2 {
		return "", "", errors.New("rollout needs a verb: status, pause or resume")
	}
	verb = positional[1]
	switch verb {
	case "status":
	case "pause", "resume":
		if o.watch || o.timeout != 0 {
			return "", "", fmt.Errorf("--watch and --timeout apply to rollout status, not %s", verb)
		}
	default:
		return "", "", fmt.Errorf("unknown verb %q: want status, pause or resume", verb)
	}
	if o.timeout < 0 || o.timeout > 0 && !o.watch {
		return "", "", fmt.Errorf("--timeout %s: want a positive duration, with --watch", o.timeout)
	}
	if name, err = parseDaemonSet(positional[2:]); err != nil {
		return "", "", fmt.Errorf("rollout %s: %w", verb, err)
	}
	return verb, name, nil
}

// daemonSetTypes are the ways kubectl names the DaemonSet resource.
var daemonSetTypes = []string{"daemonset", "daemonsets", "ds", "daemonset.apps", "daemonsets.apps"}

// parseDaemonSet reads daemonset/NAME (or ds/NAME, ...) or daemonset NAME.
func parseDaemonSet(args []string) (string, error) {
	var kind, name string
	switch len(args) {
	case 0:
		return "", errors.New("no DaemonSet: want daemonset/NAME")
	case 1:
		var ok bool
		if kind, name, ok = strings.Cut(args[0], "/"); !ok {
			return "", fmt.Errorf("%q: want daemonset/NAME", args[0])
		}
	case 2:
		if strings.Contains(args[0], "/") {
			return "", fmt.Errorf("got 2 arguments %q, want one DaemonSet: daemonset/NAME", args)
		}
		kind, name = args[0], args[1]
	default:
		return "", fmt.Errorf("got %d arguments %q, want one DaemonSet: daemonset/NAME", len(args), args)
	}
	known := false
	for _, t := range daemonSetTypes {
		known = known || strings.EqualFold(kind, t)
	}
	if !known {
		return "", fmt.Errorf("resource type %q: only DaemonSets are rolled out by edgeota (daemonset/NAME or ds/NAME)", kind)
	}
	if problems := validation.IsDNS1123Subdomain(name); len(problems) > 0 {
		return "", fmt.Errorf("DaemonSet name %q: %s", name, strings.Join(problems, "; "))
	}
	return name, nil
}

// usageError is a mistake in the command line or the kubeconfig found after
// parsing.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// outcomeError ends a command with a message and an exit code of its own: a
// halted rollout, a DaemonSet edgeota does not roll out.
type outcomeError struct {
	code    int
	message string
}

func (e *outcomeError) Error() string { return e.message }

// exitCode maps a command's error to the plugin's exit code.
func exitCode(err error) int {
	var outcome *outcomeError
	var usage usageError
	var netErr net.Error
	switch {
	case err == nil:
		return exitcode.OK
	case errors.As(err, &outcome):
		return outcome.code
	case errors.As(err, &usage):
		return exitcode.Usage
	case apierrors.IsNotFound(err):
		return exitcode.NotFound
	case apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err):
		return exitcode.Refused
	case apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err) || errors.As(err, &netErr) ||
		errors.Is(err, context.DeadlineExceeded): // --request-timeout
		return exitcode.Unreachable
	}
	return exitcode.Failed
}

// describe says what went wrong, with a hint for what a user can fix.
func describe(err error, name, namespace string) string {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("daemonset %q not found in namespace %q", name, namespace)
	case apierrors.IsUnauthorized(err):
		return fmt.Sprintf("unauthenticated: %v (check the kubeconfig's credentials)", err)
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("forbidden: %v", err)
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return fmt.Sprintf("the API server is unreachable: %v", err)
	}
	return err.Error()
}
