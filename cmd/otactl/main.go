// Command otactl is the node owner's CLI for the edgeota node agent: it lists
// the node's apps and where each upgrade stands, watches them change, and
// pre-pulls or upgrades an app, following it to the end with --wait. It
// speaks gRPC through the client generated in gen/ (the Go SDK).
//
//	otactl [flags] list [-o json]
//	otactl [flags] watch [-o json]
//	otactl [flags] pull NAMESPACE/DAEMONSET [--wait] [--timeout D]
//	otactl [flags] upgrade NAMESPACE/DAEMONSET [--wait] [--queue-if-offline] [--timeout D]
//	otactl [flags] hold [NAMESPACE/DAEMONSET|--all] (--for D|--until RFC3339) [--reason TEXT] [--queue-if-offline]
//	otactl [flags] release [NAMESPACE/DAEMONSET|--all] [--queue-if-offline]
//
// hold and release without an app act on every app of the node, as --all.
// --version prints the build. Exit codes: 0 done; 1 the pull or upgrade failed (the reason is printed,
// e.g. CrashLoopBackOff); 2 bad usage; 3 --timeout passed; 4 the agent is
// unreachable or unavailable; 5 unauthenticated, or the agent refused (its
// message is printed); 6 no such app on this node.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/edgeota/edgeota/internal/exitcode"
	"github.com/edgeota/edgeota/internal/holdtime"
	"github.com/edgeota/edgeota/internal/terminal"
	"github.com/edgeota/edgeota/internal/version"
)

// defaultServer is the agent's default address: loopback, its default port.
const defaultServer = "127.0.0.1:10267"

// options are the flags every command takes.
type options struct {
	server         string
	token          string
	tokenFile      string
	caFile         string
	certFile       string
	keyFile        string
	insecure       bool
	output         string
	wait           bool
	queueIfOffline bool
	timeout        time.Duration
	version        bool
	all            bool
	holdFor        string
	holdUntil      string
	reason         string
}

const usage = `usage: otactl [flags] COMMAND [ARGS]

Commands:
  list                          this node's apps and where each upgrade stands (-o json)
  watch                         the same, as it changes (-o json)
  pull NAMESPACE/DAEMONSET      pre-pull the images of the app's new version (--wait: until PULLED)
  upgrade NAMESPACE/DAEMONSET   upgrade the app (--wait: until UPGRADED; --queue-if-offline)
  hold [NAMESPACE/DAEMONSET]    ask the cluster not to upgrade the app, or every app (no app, or --all),
                                --for 2h or --until 2026-11-25T18:00:00Z, [--reason driving] [--queue-if-offline]
  release [NAMESPACE/DAEMONSET] release the app's hold, or every app's (no app, or --all) [--queue-if-offline]

Exit codes: 0 done, 1 failed, 2 usage, 3 timeout, 4 agent unreachable,
5 unauthenticated or refused, 6 unknown app.

Flags (before or after the command):
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// newFlags returns the flag set of every command, bound to o.
func newFlags(o *options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("otactl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.server, "server", defaultServer, "the agent's address, host:port")
	fs.StringVar(&o.token, "token", "", "bearer token")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding the bearer token")
	fs.StringVar(&o.caFile, "ca-file", "", "PEM CA bundle to verify the agent's certificate: connect with TLS")
	fs.StringVar(&o.certFile, "cert-file", "", "PEM client certificate (with --key-file): connect with TLS")
	fs.StringVar(&o.keyFile, "key-file", "", "PEM private key of --cert-file")
	fs.BoolVar(&o.insecure, "insecure", false, "send the bearer token without TLS to an agent that is not on loopback: anyone on the way can read and reuse it")
	fs.StringVar(&o.output, "o", "", `output format: "" (a table, or lines) or "json"`)
	fs.BoolVar(&o.wait, "wait", false, "pull, upgrade: follow the app until the pull or upgrade is done or failed")
	fs.BoolVar(&o.queueIfOffline, "queue-if-offline", false, "upgrade, hold, release: if the agent cannot reach the API server, queue the request until it can")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "pull, upgrade, hold, release: give up after this long (exit 3)")
	fs.BoolVar(&o.all, "all", false, "hold, release: every app on the node (the default without an app)")
	fs.StringVar(&o.holdFor, "for", "", "hold: how long, "+holdtime.Syntax+"; at most "+holdtime.MaxText)
	fs.StringVar(&o.holdUntil, "until", "", "hold: until when, RFC 3339 (2026-11-25T18:00:00Z, or with an offset)")
	fs.StringVar(&o.reason, "reason", "", "hold: why, for people (e.g. driving)")
	fs.BoolVar(&o.version, "version", false, "print the version, git commit, build date and Go version, then exit")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseArgs parses flags placed anywhere among the arguments, and returns
// the positional ones (the command and its argument).
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// run is otactl with its arguments; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := newFlags(&o, stderr)
	positional, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return exitcode.OK
	}
	if err != nil {
		return exitcode.Usage
	}
	if o.version {
		fmt.Fprint(stdout, version.Get().String(fs.Name()))
		return exitcode.OK
	}
	if err := o.validate(positional); err != nil {
		fmt.Fprintf(stderr, "otactl: %v\n", err)
		fs.Usage()
		return exitcode.Usage
	}
	client, closeConn, err := o.dial()
	if err != nil {
		fmt.Fprintf(stderr, "otactl: %v\n", err)
		return exitcode.Usage
	}
	defer closeConn()
	tty, _ := terminal.Of(stdout, os.Getenv("TERM"))
	c := &cli{client: client, out: stdout, opts: o, tty: tty, zone: time.Local}
	switch positional[0] {
	case "list":
		err = c.list(ctx)
	case "watch":
		err = c.watch(ctx)
	case "pull", "upgrade":
		var ns, ds string
		ns, ds, err = parseApp(positional[1])
		if err == nil {
			err = c.act(ctx, positional[0], ns, ds)
		}
	case "hold", "release":
		var ns, ds string
		if len(positional) == 2 {
			ns, ds, err = parseApp(positional[1])
		}
		if err == nil {
			err = c.hold(ctx, positional[0], ns, ds)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "otactl: %s\n", describe(err, o.server))
	}
	return exitCode(err)
}

// validate checks the command line.
func (o options) validate(positional []string) error {
	if len(positional) == 0 {
		return errors.New("no command")
	}
	want := map[string]int{"list": 1, "watch": 1, "pull": 2, "upgrade": 2, "hold": 2, "release": 2}
	command := positional[0]
	n, ok := want[command]
	holding := command == "hold" || command == "release"
	switch {
	case !ok:
		return fmt.Errorf("unknown command %q", command)
	case holding && len(positional) > n:
		return fmt.Errorf("%s takes at most %d argument(s), got %d", command, n-1, len(positional)-1)
	case !holding && len(positional) != n:
		return fmt.Errorf("%s takes %d argument(s), got %d", command, n-1, len(positional)-1)
	case o.output != "" && o.output != "json":
		return fmt.Errorf(`-o %q: want "json" or nothing`, o.output)
	case o.timeout <= 0:
		return fmt.Errorf("--timeout %s must be positive", o.timeout)
	case o.token != "" && o.tokenFile != "":
		return errors.New("--token and --token-file: give one")
	case (o.certFile == "") != (o.keyFile == ""):
		return errors.New("--cert-file and --key-file go together")
	case (o.token != "" || o.tokenFile != "") && !o.usesTLS() && !o.insecure && !local(o.server):
		return fmt.Errorf("refusing to send the bearer token in the clear to %s, which is not loopback: anyone on the way could read and reuse it; connect with TLS (--ca-file), or give --insecure if you accept that", o.server)
	case o.queueIfOffline && command != "upgrade" && !holding:
		return errors.New("--queue-if-offline applies to upgrade, hold and release only")
	case o.all && !holding:
		return errors.New("--all applies to hold and release only")
	case o.all && len(positional) == 2:
		return fmt.Errorf("%s: give an app or --all, not both", command)
	case (o.holdFor != "" || o.holdUntil != "" || o.reason != "") && command != "hold":
		return errors.New("--for, --until and --reason apply to hold only")
	case command == "hold":
		return o.validateHold()
	}
	return nil
}

// validateHold checks a hold's end as the agent would, so that a typo is a
// usage error before anything is sent: exactly one of --for, in the agent's
// syntax and bounds, and --until, RFC 3339 (the agent checks it against the
// API server's clock).
func (o options) validateHold() error {
	switch {
	case o.holdFor != "" && o.holdUntil != "":
		return errors.New("hold: give --for or --until, not both")
	case o.holdFor == "" && o.holdUntil == "":
		return errors.New("hold: give --for (e.g. 2h) or --until (RFC 3339, e.g. 2026-11-25T18:00:00Z)")
	case o.holdFor != "":
		if _, err := holdtime.ParseDuration(o.holdFor); err != nil {
			return fmt.Errorf("--for: %w", err)
		}
	default:
		if _, err := o.until(); err != nil {
			return err
		}
	}
	return nil
}

// until is --until's time.
func (o options) until() (time.Time, error) {
	t, err := time.Parse(time.RFC3339, o.holdUntil)
	if err != nil {
		return t, usageError(fmt.Sprintf("--until %q: want RFC 3339, e.g. 2026-11-25T18:00:00Z or 2026-11-25T19:00:00+01:00", o.holdUntil))
	}
	return t, nil
}

// parseApp splits NAMESPACE/DAEMONSET.
func parseApp(ref string) (namespace, daemonSet string, err error) {
	ns, ds, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || ds == "" || strings.Contains(ds, "/") {
		return "", "", usageError(fmt.Sprintf("%q: want NAMESPACE/DAEMONSET", ref))
	}
	return ns, ds, nil
}

// usageError is a mistake on the command line found after parsing.
type usageError string

func (e usageError) Error() string { return string(e) }

// outcome is how a followed pull or upgrade ended when it did not succeed.
type outcome struct {
	code    int
	message string
}

func (o *outcome) Error() string { return o.message }

// exitCode maps a command's error to otactl's exit code.
func exitCode(err error) int {
	var out *outcome
	var usage usageError
	switch {
	case err == nil:
		return exitcode.OK
	case errors.As(err, &out):
		return out.code
	case errors.As(err, &usage):
		return exitcode.Usage
	case errors.Is(err, context.DeadlineExceeded):
		return exitcode.Timeout
	}
	switch status.Code(err) {
	case codes.NotFound:
		return exitcode.NotFound
	case codes.Unavailable:
		return exitcode.Unreachable
	case codes.DeadlineExceeded:
		return exitcode.Timeout
	case codes.Unauthenticated, codes.PermissionDenied, codes.FailedPrecondition, codes.InvalidArgument, codes.Aborted,
		codes.ResourceExhausted:
		return exitcode.Refused
	}
	return exitcode.Failed
}

// describe says what went wrong in the agent's own words, with a hint for
// the failures a user can fix.
func describe(err error, server string) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	switch st.Code() {
	case codes.Unavailable:
		return fmt.Sprintf("agent unreachable or unavailable at %s: %s", server, st.Message())
	case codes.Unauthenticated:
		return fmt.Sprintf("unauthenticated: %s (give --token, --token-file or --cert-file)", st.Message())
	case codes.PermissionDenied, codes.FailedPrecondition, codes.InvalidArgument, codes.Aborted, codes.ResourceExhausted:
		return "refused: " + st.Message()
	case codes.DeadlineExceeded:
		return "timed out: " + st.Message()
	}
	return st.Message()
}
