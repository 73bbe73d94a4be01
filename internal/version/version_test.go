package version

import (
	"runtime"
	"testing"
)

// stamp sets the -X variables for one test and restores them after it.
func stamp(t *testing.T, v, c, epoch string) {
	t.Helper()
	saved := [3]string{version, commit, sourceDateEpoch}
	version, commit, sourceDateEpoch = v, c, epoch
	t.Cleanup(func() { version, commit, sourceDateEpoch = saved[0], saved[1], saved[2] })
}

func TestStampedBuild(t *testing.T) {
	stamp(t, "v0.1.0", "c1d7825a", "1763898000")
	got := Get().String("ota-server")
	want := "ota-server v0.1.0\ncommit: c1d7825a\nbuild date: 2025-11-23T11:40:00Z\ngo: " +
		runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestUnstampedBuildSaysSo(t *testing.T) {
	stamp(t, "", "", "")
	got := Get()
	want := Info{Version: unstampedVersion, Commit: unstampedCommit, BuildDate: unstampedDate,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestInvalidEpochIsReported(t *testing.T) {
	stamp(t, "v0.1.0", "c1d7825a", "yesterday")
	if got, want := Get().BuildDate, `invalid (SOURCE_DATE_EPOCH "yesterday" is not a number of seconds)`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
