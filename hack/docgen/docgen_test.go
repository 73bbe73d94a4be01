package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestParseHelpOfGoFlags reads what Go's flag package prints, from a flag
// set built here, so that the parser follows the printer.
func TestParseHelpOfGoFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("kubeconfig", "", "path to a kubeconfig")
	fs.String("node-name", "", "the node (default $NODE_NAME)")
	fs.String("namespace", "edgeota-system", "namespace (default $POD_NAMESPACE, else edgeota-system)")
	fs.Int("workers", 4, "DaemonSets synced concurrently")
	fs.Bool("leader-elect", true, "elect a leader")
	fs.Bool("profiling", false, "serve profiles")
	fs.Duration("ttl", 24*time.Hour, "how long\nover two lines")
	fs.Func("identity", `who: "node" (default) or "serviceaccount"`, func(string) error { return nil })
	fs.Bool("v", false, "one letter")
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()

	got := parseHelp("Usage of x:\n" + b.String())
	want := []flagDoc{
		{name: "identity", typ: "value", usage: `who: "node" (default) or "serviceaccount"`},
		{name: "kubeconfig", typ: "string", usage: "path to a kubeconfig"},
		{name: "leader-elect", def: "true", usage: "elect a leader"},
		{name: "namespace", typ: "string", def: "edgeota-system", usage: "namespace (default $POD_NAMESPACE, else edgeota-system)"},
		{name: "node-name", typ: "string", usage: "the node (default $NODE_NAME)"},
		{name: "profiling", usage: "serve profiles"},
		{name: "ttl", typ: "duration", def: "24h0m0s", usage: "how long\nover two lines"},
		{name: "v", usage: "one letter"},
		{name: "workers", typ: "int", def: "4", usage: "DaemonSets synced concurrently"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
}

// TestParseHelpOfPflags reads what pflag prints, as kubectl-edgeota's
// --help shows it after its usage text.
func TestParseHelpOfPflags(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.BoolP("watch", "w", false, "status: follow the rollout")
	fs.Duration("timeout", 0, "give up after this long")
	fs.String("kubeconfig", "", "path to the kubeconfig file to use")
	fs.StringP("namespace", "n", "", "namespace scope")
	fs.String("request-timeout", "0", "how long to wait")
	fs.SetOutput(io.Discard)

	got := parseHelp("Usage:\n  kubectl edgeota rollout status daemonset/NAME [-n NS]\n\n  status  where the rollout stands\n\nFlags:\n" + fs.FlagUsages())
	want := []flagDoc{
		{name: "watch", short: "w", usage: "status: follow the rollout"},
		{name: "timeout", typ: "duration", usage: "give up after this long"},
		{name: "kubeconfig", typ: "string", usage: "path to the kubeconfig file to use"},
		{name: "namespace", short: "n", typ: "string", usage: "namespace scope"},
		{name: "request-timeout", typ: "string", def: "0", usage: "how long to wait"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
}

func TestMeaningDropsTheConstantsName(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"MaxFailedAnnotation", "MaxFailedAnnotation is how many nodes may fail.\n", "How many nodes may fail."},
		{"PausedAnnotation", `PausedAnnotation, "true", stops deletions.`, `"true", stops deletions.`},
		{"ReasonRolloutHalted", "ReasonRolloutHalted: max-failed nodes failed.", "max-failed nodes failed."},
		{"StrategyAnnotation", "StrategyAnnotation opts a DaemonSet in: edgeota.io/paused, <hash> | x.", "Opts a DaemonSet in: `edgeota.io/paused`, &lt;hash&gt; \\| x."},
		{"X", "Counts edgeota_controller_rollout_nodes, set by --record-namespace.", "Counts `edgeota_controller_rollout_nodes`, set by `--record-namespace`."},
	} {
		if got := meaning(c.name, c.doc); got != c.want {
			t.Errorf("meaning(%q): got %q, want %q", c.doc, got, c.want)
		}
	}
}

func TestAnchorIDs(t *testing.T) {
	for key, want := range map[string]string{
		"apps.openyurt.io/update-strategy":   "apps-openyurt-io-update-strategy",
		"edgeota_controller_rollout_nodes":   "edgeota-controller-rollout-nodes",
		"ota-server prepare-state-dir-owner": "ota-server-prepare-state-dir-owner",
	} {
		if got := anchorID(key); got != want {
			t.Errorf("anchorID(%q): got %q, want %q", key, got, want)
		}
	}
}
