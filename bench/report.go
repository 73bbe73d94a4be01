package main

import (
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/localcluster"
)

// row is one figure beside its baseline, the ratio of the two, the target
// and whether it is met; empty cells print as a dash.
type row struct {
	figure, edgeota, baseline, ratio, target, met string
}

// table is one scenario's section of the report; the driver numbers its
// title.
type table struct {
	title string
	rows  []row
	notes []string
}

func (t table) write(w io.Writer) {
	fmt.Fprintf(w, "\n### %s\n\n", t.title)
	fmt.Fprintln(w, "| figure | edgeota | baseline | ratio | target | met? |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- |")
	for _, r := range t.rows {
		cells := []string{r.figure, r.edgeota, r.baseline, r.ratio, r.target, r.met}
		for i, c := range cells {
			if c == "" {
				cells[i] = "–"
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	if len(t.notes) > 0 {
		fmt.Fprintln(w)
	}
	for _, n := range t.notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
}

// controllerRSSTarget bounds ota-controller's peak memory up to 2,000
// nodes, in every scenario that runs it (Go's default GOGC, no GOMEMLIMIT).
const controllerRSSTarget = 60 << 20

// controllerRSSRow is the row of a scenario's controller's peak memory, with
// the anonymous part of its RSS when read (heap and stacks; the rest is
// file-backed, mostly the binary's own pages, about the same at every N).
func controllerRSSRow(figure string, m measure.Memory) row {
	return row{figure, fmt.Sprintf("%s (%s anonymous at the end)", mib(m.PeakRSS), mib(m.AnonRSS)), "", "",
		"≤ 60 MiB (up to 2,000 nodes)", verdict(m.PeakRSS <= controllerRSSTarget)}
}

// budgetRow is the row of the most nodes seen at once without an available
// pod, which must never pass the budget; baseline is the native
// controller's figure, if measured.
func budgetRow(p params, worst int, baseline string) row {
	return row{"most nodes without an available pod, any sample", fmt.Sprint(worst), baseline, "",
		fmt.Sprintf("≤ %d (budget)", p.budget()), verdict(worst <= p.budget())}
}

// header describes the machine, the versions, the parameters and the
// scenarios of a run.
func header(s *session, started time.Time, kubeVersion string, scenarios []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## edgeota benchmark, %s\n\n", started.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- Machine: %d CPUs, Linux %s, load average at start %s (shared: other work runs too)\n",
		runtime.NumCPU(), measure.KernelRelease(), measure.LoadAverage())
	fmt.Fprintf(&b, "- Versions: %s, Kubernetes %s, %s, edgeota %s\n",
		runtime.Version(), kubeVersion, toolVersion(s, "kwok"), gitDescribe(s.root))
	fmt.Fprintf(&b, "- Parameters: N=%d KWOK nodes (delay-free stages), %d alternating pairs per ratio, "+
		"%s per node-API load level, %d upgrades per method, controller --kube-api-qps %g --kube-api-burst %d, budget 10%% = %d nodes\n",
		s.p.nodes, s.p.pairs, s.p.loadTime, s.p.upgrades, s.p.qps, s.p.burst, s.p.budget())
	fmt.Fprintf(&b, "- Nodes heartbeat: rollout and cutoff: %s (BENCH_HEARTBEAT); atrest, proof and requests: %s; the others: %s\n",
		s.p.rolloutHeartbeat, kubeletHeartbeat(s.p), localcluster.Heartbeat{})
	if s.p.imagePulls != nil {
		fmt.Fprintf(&b, "- Image pulls: modelled, %s per image a node has not pulled (BENCH_PULL_DELAY; localcluster.ImagePulls)", s.p.imagePulls.Delay)
		if n := len(s.p.imagePulls.Delays); n > 0 {
			fmt.Fprintf(&b, "; %d images of the pre-download scenarios with delays of their own", n)
		}
		b.WriteString("\n")
	}
	agents := "none (BENCH_AGENTS=0): the nodes prove themselves alive by their heartbeats alone"
	if s.p.agents {
		agents = "simulated on every node (BENCH_AGENTS=1): the controller's challenges are answered"
	}
	fmt.Fprintf(&b, "- Node agents in rollout and cutoff: %s; proof runs its own on every node\n", agents)
	fmt.Fprintf(&b, "- Scenarios: %s\n", strings.Join(scenarios, ", "))
	return b.String()
}

// toolVersion is the first line of `bin/NAME --version`.
func toolVersion(s *session, name string) string {
	if s.cluster == nil {
		return name + " (no cluster)"
	}
	out, err := exec.Command(s.cluster.Tools.Path(name), "--version").Output()
	if err != nil {
		return name + " (version unknown)"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// gitDescribe names the commit measured, marked dirty when the tree differs.
func gitDescribe(root string) string {
	out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output()
	if err != nil {
		return "(not a git checkout)"
	}
	return strings.TrimSpace(string(out))
}

// pick takes one figure of every run.
func pick[R, T any](runs []R, get func(R) T) []T {
	out := make([]T, len(runs))
	for i, r := range runs {
		out[i] = get(r)
	}
	return out
}

// pairList shows each pair's two times.
func pairList(a, b []time.Duration) string {
	pairs := make([]string, len(a))
	for i := range a {
		pairs[i] = seconds(a[i]) + " / " + seconds(b[i])
	}
	return strings.Join(pairs, ", ")
}

// Cell formats.

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// roundList shows each round's times, variant by variant ("a / b / c"),
// rounds separated by commas: the runs behind a table's medians.
func roundList(variants ...[]time.Duration) string {
	out := make([]string, len(variants[0]))
	for i := range out {
		times := make([]string, len(variants))
		for j, v := range variants {
			times[j] = seconds(v[i])
		}
		out[i] = strings.Join(times, " / ")
	}
	return strings.Join(out, ", ")
}

func millis(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func mib(bytes int64) string { return fmt.Sprintf("%.1f MiB", float64(bytes)/(1<<20)) }

func times(r float64) string { return fmt.Sprintf("%.2f×", r) }

// verdict says whether a target is met; a miss stands out.
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}
