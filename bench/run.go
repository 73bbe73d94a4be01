package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// resultsFile is where the report is written, relative to the checkout.
const resultsFile = "bench/results/latest.md"

// runStarted is when the run began, for progress lines.
var runStarted = time.Now()

// run creates the cluster, runs the six scenarios in order, each on a quiet
// cluster with fresh measured processes, and writes the report. Tables are
// printed as scenarios finish; the results file is written only by a run
// that completes, so a failed run never replaces the last good table.
func run(ctx context.Context) (err error) {
	p, err := loadParams()
	if err != nil {
		return err
	}
	progress("creating a cluster of %d KWOK nodes", p.nodes)
	s, err := newSession(ctx, p)
	if err != nil {
		return err
	}
	defer func() {
		progress("deleting the cluster")
		err = errors.Join(err, s.close())
	}()
	version, err := s.cluster.Client.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("reading the API server's version: %w", err)
	}
	var report strings.Builder
	report.WriteString(header(s, runStarted, version.GitVersion))
	fmt.Print(report.String())
	emit := func(t table) {
		var b strings.Builder
		t.write(&b)
		fmt.Print(b.String())
		report.WriteString(b.String())
	}

	progress("1. rollout: %d alternating pairs", p.pairs)
	roll, err := benchRollout(ctx, s)
	if err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	emit(rolloutTable(p, roll))

	progress("2. cut-off nodes")
	cut, err := benchCutOff(ctx, s)
	if err != nil {
		return fmt.Errorf("cut-off nodes: %w", err)
	}
	emit(cutoffTable(p, cut, roll))

	progress("3. OTA marking: %d alternating pairs", p.pairs)
	mark, err := benchMarking(ctx, s)
	if err != nil {
		return fmt.Errorf("OTA marking: %w", err)
	}
	emit(markingTable(p, mark))

	progress("4. node API")
	agent, err := startAgent(ctx, s)
	if err != nil {
		return err
	}
	api, err := benchNodeAPI(ctx, s, agent)
	if err != nil {
		return fmt.Errorf("node API: %w", err)
	}
	emit(nodeAPITable(api))

	progress("5. upgrade latency: %d upgrades per method", p.upgrades)
	up, err := benchUpgrade(ctx, s, agent)
	if err != nil {
		return fmt.Errorf("upgrade latency: %w", err)
	}
	emit(upgradeTable(up))
	if err := s.stopChild(agent); err != nil {
		return err
	}

	progress("6. persistence: the agent with and without its state directory")
	persist, err := benchPersistence(ctx, s)
	if err != nil {
		return fmt.Errorf("persistence: %w", err)
	}
	emit(persistenceTable(persist))

	footer := fmt.Sprintf("\nWhole run: %s; load average at the end %s. Logs of the measured processes: .cache/bench/. "+
		"What limits the missed figures: bench/README.md, \"What limits the figures\".\n",
		time.Since(runStarted).Round(time.Second), loadAverage())
	fmt.Print(footer)
	report.WriteString(footer)
	path := filepath.Join(s.root, resultsFile)
	if err := os.WriteFile(path, []byte(report.String()), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := updateReadme(filepath.Join(s.root, readmeFile), report.String()); err != nil {
		return err
	}
	progress("wrote %s and the table in %s", resultsFile, readmeFile)
	return nil
}

// progress reports on standard error how far the run has got.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "==> [%s] %s\n", time.Since(runStarted).Round(time.Second), fmt.Sprintf(format, args...))
}
