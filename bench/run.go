package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/localcluster"
)

// resultsFile is the one place the report of a run with the parameters is
// kept, relative to the checkout: latest.md for the default N, which the
// READMEs link to, latest-<n>nodes.md for another, so that a run at another
// scale never replaces the default report; a run whose rollouts go on node
// Leases (BENCH_HEARTBEAT=lease) adds -leases, one with the at-rest
// scenario's timed variants (BENCH_ATREST_TIMED) -timed or -overdue, one
// with modelled pulls -pulls, and one with simulated agents in the rollouts
// (BENCH_AGENTS) -agents, so that none replaces the plain one. A run of
// cluster-free scenarios alone, which no cluster parameter changes, is named
// after them (latest-cache.md), so that it never replaces a report of the
// cluster's scenarios either.
func resultsFile(p params) string {
	if scs, err := selectScenarios(p.scenarios); err == nil && len(p.scenarios) > 0 &&
		!slices.ContainsFunc(scs, func(sc scenario) bool { return !sc.clusterFree }) {
		return "bench/results/latest-" + strings.Join(scenarioNames(scs), "-") + ".md"
	}
	name := "bench/results/latest"
	if p.nodes != defaultNodes {
		name += fmt.Sprintf("-%dnodes", p.nodes)
	}
	if p.rolloutHeartbeat.Leases {
		name += "-leases"
	}
	switch {
	case p.atRestOverdue:
		name += "-overdue"
	case p.atRestTimed:
		name += "-timed"
	}
	if p.imagePulls != nil {
		name += "-pulls"
	}
	if p.agents {
		name += "-agents"
	}
	return name + ".md"
}

// runStarted is when the run began, for progress lines.
var runStarted = time.Now()

// run creates the cluster and runs the selected scenarios in order, each on
// a quiet cluster with fresh measured processes, numbering their tables as
// they come. Tables are printed as scenarios finish; the results file is
// written only by a run that completes, so a failed run never replaces the
// last good report.
func run(ctx context.Context) (err error) {
	p, err := loadParams()
	if err != nil {
		return err
	}
	selected, err := selectScenarios(p.scenarios)
	if err != nil {
		return err
	}
	p.imagePulls = imagePullsFor(p, selected)
	// The cluster starts heartbeating as the first scenario that uses it
	// needs; none when no scenario does.
	first := slices.IndexFunc(selected, func(sc scenario) bool { return !sc.clusterFree })
	withCluster := first >= 0
	var heartbeat localcluster.Heartbeat
	if withCluster {
		heartbeat = selected[first].heartbeatIn(p)
		progress("creating a cluster of %d KWOK nodes", p.nodes)
	}
	s, err := newSession(ctx, p, heartbeat, withCluster)
	if err != nil {
		return err
	}
	defer func() {
		if withCluster {
			progress("deleting the cluster")
		}
		err = errors.Join(err, s.close())
	}()
	kubeVersion := "none (cluster-free scenarios only)"
	if withCluster {
		version, err := s.cluster.Client.Discovery().ServerVersion()
		if err != nil {
			return fmt.Errorf("reading the API server's version: %w", err)
		}
		kubeVersion = version.GitVersion
	}
	var report strings.Builder
	report.WriteString(header(s, runStarted, kubeVersion, scenarioNames(selected)))
	fmt.Print(report.String())
	var found findings
	for i, sc := range selected {
		progress("%d. %s", i+1, sc.name)
		if !sc.clusterFree {
			if err := s.setHeartbeat(ctx, sc.heartbeatIn(p)); err != nil {
				return fmt.Errorf("scenario %s: %w", sc.name, err)
			}
		}
		t, err := sc.run(ctx, s, &found)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", sc.name, err)
		}
		t.title = fmt.Sprintf("%d. %s", i+1, t.title)
		var b strings.Builder
		t.write(&b)
		fmt.Print(b.String())
		report.WriteString(b.String())
	}
	footer := fmt.Sprintf("\nWhole run: %s; load average at the end %s. Logs of the measured processes: .cache/bench/. "+
		"What limits the missed figures: bench/README.md, \"What limits the figures\".\n",
		time.Since(runStarted).Round(time.Second), measure.LoadAverage())
	fmt.Print(footer)
	report.WriteString(footer)
	path := filepath.Join(s.root, resultsFile(p))
	if err := os.WriteFile(path, []byte(report.String()), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	progress("wrote %s", resultsFile(p))
	return nil
}

// progress reports on standard error how far the run has got.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "==> [%s] %s\n", time.Since(runStarted).Round(time.Second), fmt.Sprintf(format, args...))
}
