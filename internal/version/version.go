// Package version says which build of edgeota a binary is, so that an
// operator can tell what runs where (`--version` on every binary, through
// internal/command). The values are stamped at build time by the Makefile
// with -ldflags -X (see VERSION_LDFLAGS there): the VERSION file, the git
// commit, and the commit time (SOURCE_DATE_EPOCH), never the wall clock, so
// that two builds of one commit are byte for byte the same. A binary built
// without the Makefile, or from a tree outside git, says so.
package version

import (
	"fmt"
	"runtime"
	"strconv"
	"time"
)

// Set with -ldflags "-X github.com/edgeota/edgeota/internal/version.NAME=VALUE";
// empty when the build did not stamp them.
var (
	// version is the VERSION file's content, e.g. v0.1.0.
	version string
	// commit is the full git commit hash, with "-dirty" when the tree had
	// uncommitted changes.
	commit string
	// sourceDateEpoch is the commit time in seconds since 1970 (the
	// reproducible-builds SOURCE_DATE_EPOCH).
	sourceDateEpoch string
)

// What Get reports for a value the build did not stamp.
const (
	unstampedVersion = "unknown (not built with make)"
	unstampedCommit  = "unknown (not built from a git checkout)"
	unstampedDate    = "unknown (not built from a git checkout)"
)

// Info describes one build.
type Info struct {
	// Version is the release, from the VERSION file.
	Version string
	// Commit is the git commit the binary was built from.
	Commit string
	// BuildDate is the commit time in RFC 3339, UTC: reproducible, unlike
	// the moment of the build.
	BuildDate string
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
	// Platform is GOOS/GOARCH.
	Platform string
}

// Get returns this binary's build information.
func Get() Info {
	return Info{
		Version:   or(version, unstampedVersion),
		Commit:    or(commit, unstampedCommit),
		BuildDate: buildDate(sourceDateEpoch),
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// String renders i as --version prints it for the binary called name.
func (i Info) String(name string) string {
	return fmt.Sprintf("%s %s\ncommit: %s\nbuild date: %s\ngo: %s %s\n",
		name, i.Version, i.Commit, i.BuildDate, i.GoVersion, i.Platform)
}

// buildDate renders a SOURCE_DATE_EPOCH as RFC 3339 UTC.
func buildDate(epoch string) string {
	if epoch == "" {
		return unstampedDate
	}
	seconds, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return fmt.Sprintf("invalid (SOURCE_DATE_EPOCH %q is not a number of seconds)", epoch)
	}
	return time.Unix(seconds, 0).UTC().Format(time.RFC3339)
}

func or(value, fallback string) string {
	if value == "" {
		return fallback
	}
	return value
}
