package main

import (
	"math"
	"os"
	"runtime/debug"
	"testing"
)

func TestMemoryLimitDefaultsUnlessGOMEMLIMIT(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(math.MaxInt64)
	limitMemory()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set: limit %d, want it left alone", got)
	}

	os.Unsetenv("GOMEMLIMIT") // t.Setenv restores it
	limitMemory()
	if got := debug.SetMemoryLimit(-1); got != defaultMemoryLimit {
		t.Errorf("without GOMEMLIMIT: limit %d, want %d", got, defaultMemoryLimit)
	}
}
