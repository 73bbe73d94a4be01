//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/localcluster"
)

// TestMain deletes, before the scenarios run, the clusters an earlier run
// left behind when it died (a -timeout panic kills the test binary before
// any cleanup, and a cluster's components are not its children), and, after
// them, any cluster of this run that a scenario did not get to delete.
func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	if root, err := harness.Root(); err == nil {
		swept, err := localcluster.SweepOrphans(ctx, root)
		if len(swept) > 0 {
			fmt.Fprintf(os.Stderr, "e2e: deleted %d clusters left by a run that died: %v\n", len(swept), swept)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: sweeping the clusters of earlier runs: %v\n", err)
		}
	}
	cancel()
	code := m.Run()
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := localcluster.DeleteOwned(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: deleting this run's clusters: %v\n", err)
		code = max(code, 1)
	}
	os.Exit(code)
}
