// Package command runs edgeota's binaries the same way, so that operators
// meet one behaviour: klog's flags beside the binary's own, a context that
// SIGTERM or SIGINT cancels (graceful shutdown), structured logs named after
// the binary, and exit codes 0 (done or -help), 2 (bad flags), 1 (failure).
package command

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"
)

// Main parses the command line into fs (whose name names the binary), then
// calls run until it returns or a signal cancels its context, and exits.
func Main(fs *flag.FlagSet, run func(context.Context) error) {
	klog.InitFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
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
