// Package command runs edgeota's binaries the same way, so that operators
// meet one behaviour: klog's flags beside the binary's own, --version, a
// context that SIGTERM or SIGINT cancels (graceful shutdown), structured logs
// named after the binary, and exit codes 0 (done, -help or --version), 2 (bad
// flags), 1 (failure).
package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/internal/version"
)

// Main parses the command line into fs (whose name names the binary), then
// calls run until it returns or a signal cancels its context, and exits.
// --version prints the build (internal/version) instead of running.
func Main(fs *flag.FlagSet, run func(context.Context) error) {
	klog.InitFlags(fs)
	showVersion := fs.Bool("version", false, "print the version, git commit, build date and Go version, then exit")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if *showVersion {
		fmt.Print(version.Get().String(fs.Name()))
		os.Exit(0)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	ctx = klog.NewContext(ctx, klog.Background().WithName(fs.Name()))
	err := run(ctx)
	stop()
	if err != nil {
		klog.FromContext(ctx).Error(err, fs.Name()+" failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}
