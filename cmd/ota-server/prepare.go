package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/internal/command"
	"github.com/edgeota/edgeota/statedir"
)

// prepareCommand is the subcommand that readies the state directory for the
// agent and does nothing else: Kubernetes creates a hostPath owned by root,
// while the agent runs as an unprivileged user on a read-only root
// filesystem. deploy/server.yaml runs it in an init container as root with
// only CAP_CHOWN.
const prepareCommand = "prepare-state-dir"

// defaultOwner is the agent's user and group in deploy/server.yaml.
const defaultOwner = "65532:65532"

func prepareMain() {
	fs := flag.NewFlagSet("ota-server "+prepareCommand, flag.ContinueOnError)
	dir := fs.String("state-dir", defaultStateDir, "the state directory to create and hand over")
	owner := fs.String("owner", defaultOwner, "uid:gid the directory is handed to: the agent's")
	command.Main(fs, func(ctx context.Context) error {
		uid, gid, err := parseOwner(*owner)
		if err != nil {
			return err
		}
		if err := statedir.Prepare(*dir, uid, gid); err != nil {
			return err
		}
		klog.FromContext(ctx).Info("Prepared the state directory", "dir", *dir, "owner", *owner)
		return nil
	})
}

// parseOwner parses "uid:gid", both numeric.
func parseOwner(s string) (int, int, error) {
	u, g, ok := strings.Cut(s, ":")
	uid, uerr := strconv.Atoi(u)
	gid, gerr := strconv.Atoi(g)
	if !ok || uerr != nil || gerr != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("--owner %q is not a numeric uid:gid", s)
	}
	return uid, gid, nil
}
