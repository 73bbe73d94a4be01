// Command testlog runs a `go test -json` command for make test and reports
// on it: it keeps the JSON report in a file, prints a log a person reads
// (each top-level test's start and end, with the time since the run began,
// and the whole output of a test that fails), fails the run when a test is
// skipped without saying why, and names the slowest tests.
//
//	testlog run -report .cache/e2e-report.json [-side-by-side FILE] -- go test -json ./e2e/...
//	testlog slowest -n 10 .cache/e2e-report.json
//
// Tests that run side by side (t.Parallel) print their output when they
// end, whole, instead of interleaved with each other's. go test runs every
// test that runs alone (no t.Parallel) first; -side-by-side names a file
// testlog creates once they are done, for make test to start the stages that
// may run beside the rest (hack/test.sh).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runCommand(os.Args[2:])
	case "slowest":
		err = slowestCommand(os.Args[2:])
	default:
		usage()
	}
	var exit exitError
	switch {
	case errors.As(err, &exit):
		os.Exit(int(exit))
	case err != nil:
		fmt.Fprintln(os.Stderr, "testlog:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testlog run -report FILE [-side-by-side FILE] -- go test -json ...\n       testlog slowest [-n N] FILE")
	os.Exit(2)
}

// exitError is the exit code of the test command, passed on.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func runCommand(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	report := fs.String("report", "", "file to write the JSON report to (required)")
	sideBySide := fs.String("side-by-side", "", "file to create once the tests that run alone are done: the first time a parallel top-level test resumes, or at the end")
	_ = fs.Parse(args)
	argv := fs.Args()
	if *report == "" || len(argv) == 0 {
		usage()
	}
	out, err := os.Create(*report)
	if err != nil {
		return err
	}
	defer out.Close()

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	// An interrupt reaches the test binary through the process group, as
	// it would without testlog: what it prints as it ends is still read
	// and logged here.
	signal.Ignore(os.Interrupt, syscall.SIGTERM)

	log := newLog(os.Stdout)
	if *sideBySide != "" {
		log.onSideBySide = func() { _ = os.WriteFile(*sideBySide, nil, 0o644) }
	}
	readErr := log.read(io.TeeReader(stdout, out))
	waitErr := cmd.Wait()
	log.sideBySide()
	problems := log.finish()
	for _, p := range problems {
		fmt.Fprintln(os.Stdout, "testlog:", p)
	}
	fmt.Fprintf(os.Stdout, "testlog: the JSON report is %s; the slowest tests: testlog slowest %s\n", *report, *report)
	var exit *exec.ExitError
	switch {
	case errors.As(waitErr, &exit):
		return exitError(max(exit.ExitCode(), 1))
	case waitErr != nil:
		return waitErr
	case readErr != nil:
		return fmt.Errorf("reading the test output: %w", readErr)
	case len(problems) > 0:
		return exitError(1)
	}
	return nil
}

func slowestCommand(args []string) error {
	fs := flag.NewFlagSet("slowest", flag.ExitOnError)
	n := fs.Int("n", 10, "how many tests to name")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		usage()
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	tests, err := readReport(f)
	if err != nil {
		return err
	}
	printSlowest(os.Stdout, tests, *n)
	return nil
}
