package decision

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/rollout"
	"github.com/edgeota/edgeota/window"
)

// DefaultMaxUnavailablePercent applies when max-unavailable is absent or
// zero: a rollout that may take no node down would never progress.
const DefaultMaxUnavailablePercent = 10

// DefaultMaxHold is how long a hold may delay an upgrade unless the
// DaemonSet says otherwise: a day, enough to finish a drive or a shift.
const DefaultMaxHold = 24 * time.Hour

// Settings are a DaemonSet's rollout controls, as its annotations write
// them. Counts written as percentages are resolved against the nodes
// running the DaemonSet by the methods below.
type Settings struct {
	// Strategy is the DaemonSet's strategy.
	Strategy rollout.Strategy
	// MinReadySeconds is the DaemonSet's spec.minReadySeconds.
	MinReadySeconds int32
	maxUnavailable  rollout.Scaled
	maxFailed       *rollout.Scaled // nil: the budget
	// Deadline is how long an upgraded node may stay in flight;
	// DeadlineSet says the DaemonSet sets it (the offer then tells the
	// agent, which otherwise keeps its own default).
	Deadline    time.Duration
	DeadlineSet bool
	// Paused stops deletions and new offers.
	Paused bool
	// Selector limits the nodes the rollout may touch; nil: every node.
	Selector  labels.Selector
	partition *rollout.Scaled // nil: none
	// Schedule is the maintenance windows; Windowed says whether the
	// annotation is set (a zero Schedule is always open).
	Schedule window.Schedule
	Windowed bool
	// MaxHold bounds an owner's hold; 0 ignores holds.
	MaxHold time.Duration
	// UpgradeDeadline is, for OTA, how long after a node's first offer the
	// controller carries it out; 0: never.
	UpgradeDeadline time.Duration
	// AgentProof: an agent's answer proves life (else only the Lease).
	AgentProof bool
	// PreDownload: the target's images are pulled on nodes before their
	// turn, and a node is taken only once pulled (see PullFacts).
	PreDownload bool
	// pullParallelism bounds the pulls under way; nil: ten waves' worth.
	pullParallelism *rollout.Scaled
	// PullCanary is how many nodes must have settled on the target before
	// pulls start.
	PullCanary int
	// PullTimeout bounds the wait for a node's pull; TakeOnPullTimeout says
	// whether a node whose pull timed out is taken anyway (else passed
	// over until pulled).
	PullTimeout       time.Duration
	TakeOnPullTimeout bool
	// InPlace: a node's pod moves to the target by a patch of its images
	// where only images changed (edgeota.io/update-method
	// InPlaceIfPossible, package inplace), else it is recreated.
	InPlace bool
	// Pin: each architecture's first nodes (its canaries, PinCanaries of
	// them) upgrade with the template's tags; once the first settled and
	// proved alive, the digests it runs are pinned (the rollout record's
	// meta, Meta.Pins): later nodes are patched in place to them, and a
	// node whose new pod runs another digest fails as it settles
	// (edgeota.io/pin; on by default with InPlace).
	Pin bool
	// PinCanaries is how many nodes of an architecture may be in flight
	// before its pin exists.
	PinCanaries int
}

// DefaultPinCanaries is how many canaries each architecture has unless the
// DaemonSet says otherwise: one node, the smallest first wave.
const DefaultPinCanaries = 1

// DefaultPullTimeout is how long a node's pre-download may take unless the
// DaemonSet says otherwise: half an hour, for hundreds of megabytes over a
// cellular link.
const DefaultPullTimeout = 30 * time.Minute

// pullWaves is how many waves the pulls under way cover by default: a pull
// may last many times as long as a wave.
const pullWaves = 10

// InvalidError is an annotation whose value the controller cannot use.
type InvalidError struct {
	Annotation, Value, Want string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("annotation %s: invalid value %q: %s", e.Annotation, e.Value, e.Want)
}

// ParseSettings reads a DaemonSet's controls from its annotations. An
// invalid value is an *InvalidError naming the annotation and its value.
func ParseSettings(strategy rollout.Strategy, annotations map[string]string, minReadySeconds int32) (Settings, error) {
	s := Settings{Strategy: strategy, MinReadySeconds: minReadySeconds, Deadline: health.DefaultDeadline, MaxHold: DefaultMaxHold, AgentProof: true,
		PullTimeout: DefaultPullTimeout, TakeOnPullTimeout: true, PinCanaries: DefaultPinCanaries}
	// max-unavailable: absent, "0" and "0%" are 10%.
	s.maxUnavailable = rollout.Scaled{N: DefaultMaxUnavailablePercent, Percent: true}
	if v, ok := annotations[rollout.MaxUnavailableAnnotation]; ok && strings.TrimSpace(v) != "" {
		n, err := rollout.ParseScaled(v)
		if err != nil {
			return s, &InvalidError{rollout.MaxUnavailableAnnotation, v, "want a non-negative integer or a percentage between 0% and 100%"}
		}
		if !n.IsZero() {
			s.maxUnavailable = n
		}
	}
	if v, ok := annotations[rollout.MaxFailedAnnotation]; ok {
		// Zero is refused as written ("0", "0%"); a percentage of few nodes
		// rounds up to at least 1.
		n, err := rollout.ParseScaled(v)
		if err != nil || n.IsZero() {
			return s, &InvalidError{rollout.MaxFailedAnnotation, v, "want a positive integer or a percentage between 1% and 100%"}
		}
		s.maxFailed = &n
	}
	if v, ok := annotations[rollout.ProgressDeadlineAnnotation]; ok {
		d, err := health.ParseProgressDeadline(v)
		if err != nil {
			return s, &InvalidError{rollout.ProgressDeadlineAnnotation, v, "want a positive number of seconds"}
		}
		s.Deadline, s.DeadlineSet = d, true
	}
	var err error
	if s.Paused, err = parseBool(annotations, rollout.PausedAnnotation, false); err != nil {
		return s, err
	}
	if s.AgentProof, err = parseBool(annotations, rollout.AgentProofAnnotation, true); err != nil {
		return s, err
	}
	if s.PreDownload, err = parseBool(annotations, rollout.PreDownloadAnnotation, false); err != nil {
		return s, err
	}
	if v, ok := annotations[rollout.PreDownloadParallelismAnnotation]; ok {
		n, err := rollout.ParseScaled(v)
		if err != nil || n.IsZero() {
			return s, &InvalidError{rollout.PreDownloadParallelismAnnotation, v, "want a positive integer or a percentage between 1% and 100%"}
		}
		s.pullParallelism = &n
	}
	if v, ok := annotations[rollout.PreDownloadCanaryAnnotation]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return s, &InvalidError{rollout.PreDownloadCanaryAnnotation, v, "want a non-negative number of nodes"}
		}
		s.PullCanary = n
	}
	if v, ok := annotations[rollout.PreDownloadTimeoutAnnotation]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n <= 0 {
			return s, &InvalidError{rollout.PreDownloadTimeoutAnnotation, v, "want a positive number of seconds"}
		}
		s.PullTimeout = time.Duration(n) * time.Second
	}
	if v, ok := annotations[rollout.PreDownloadOnTimeoutAnnotation]; ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "take":
			s.TakeOnPullTimeout = true
		case "skip":
			s.TakeOnPullTimeout = false
		default:
			return s, &InvalidError{rollout.PreDownloadOnTimeoutAnnotation, v, `want "take" or "skip"`}
		}
	}
	if v, ok := annotations[rollout.UpdateMethodAnnotation]; ok {
		method, err := rollout.ParseUpdateMethod(v)
		if err != nil {
			return s, &InvalidError{rollout.UpdateMethodAnnotation, v, fmt.Sprintf("want %q or %q", rollout.MethodInPlaceIfPossible, rollout.MethodRecreate)}
		}
		s.InPlace = method == rollout.MethodInPlaceIfPossible
	}
	if s.Pin, err = parseBool(annotations, rollout.PinAnnotation, s.InPlace); err != nil {
		return s, err
	}
	if v, ok := annotations[rollout.PinCanariesAnnotation]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n <= 0 {
			return s, &InvalidError{rollout.PinCanariesAnnotation, v, "want a positive number of nodes"}
		}
		s.PinCanaries = n
	}
	if v, ok := annotations[rollout.RolloutNodeSelectorAnnotation]; ok {
		sel, err := labels.Parse(v)
		if err != nil {
			return s, &InvalidError{rollout.RolloutNodeSelectorAnnotation, v, "want a label selector as kubectl takes it: " + err.Error()}
		}
		if !sel.Empty() {
			s.Selector = sel
		}
	}
	if v, ok := annotations[rollout.PartitionAnnotation]; ok {
		n, err := rollout.ParseScaled(v)
		if err != nil {
			return s, &InvalidError{rollout.PartitionAnnotation, v, "want a non-negative integer or a percentage between 0% and 100%"}
		}
		s.partition = &n
	}
	if v, ok := annotations[rollout.MaintenanceWindowAnnotation]; ok {
		sched, err := window.Parse(v)
		if err != nil {
			return s, &InvalidError{rollout.MaintenanceWindowAnnotation, v, err.Error()}
		}
		s.Schedule, s.Windowed = sched, true
	}
	if v, ok := annotations[rollout.MaxHoldAnnotation]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n < 0 {
			return s, &InvalidError{rollout.MaxHoldAnnotation, v, "want a non-negative number of seconds (0 ignores holds)"}
		}
		s.MaxHold = time.Duration(n) * time.Second
	}
	if v, ok := annotations[rollout.UpgradeDeadlineAnnotation]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n <= 0 {
			return s, &InvalidError{rollout.UpgradeDeadlineAnnotation, v, "want a positive number of seconds"}
		}
		s.UpgradeDeadline = time.Duration(n) * time.Second
	}
	return s, nil
}

func parseBool(annotations map[string]string, key string, absent bool) (bool, error) {
	v, ok := annotations[key]
	if !ok {
		return absent, nil
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return absent, &InvalidError{key, v, `want "true" or "false"`}
	}
	return b, nil
}

// IsMaxUnavailable reports whether err is about max-unavailable, which has an
// event reason of its own (OpenYurt's users look for it).
func IsMaxUnavailable(err error) bool {
	var invalid *InvalidError
	return errors.As(err, &invalid) && invalid.Annotation == rollout.MaxUnavailableAnnotation
}

// MaxUnavailable is the budget over nodes nodes: the integer, or the
// percentage rounded up.
func (s *Settings) MaxUnavailable(nodes int) int { return s.maxUnavailable.Of(nodes) }

// MaxFailed is how many failed nodes halt a rollout over nodes nodes: the
// annotation's integer or percentage rounded up, at least 1; without it, the
// budget (at least 1).
func (s *Settings) MaxFailed(nodes int) int {
	if s.maxFailed == nil {
		return max(s.MaxUnavailable(nodes), 1)
	}
	return max(s.maxFailed.Of(nodes), 1)
}

// PullParallelism is how many pulls may be under way at once over nodes
// nodes: the annotation's integer or percentage rounded up, at least 1;
// without it, pullWaves times the budget.
func (s *Settings) PullParallelism(nodes int) int {
	if s.pullParallelism == nil {
		return max(pullWaves*s.MaxUnavailable(nodes), 1)
	}
	return max(s.pullParallelism.Of(nodes), 1)
}

// Partition is how many of eligible nodes stay on the old revision, rounded
// up; -1 without a partition.
func (s *Settings) Partition(eligible int) int {
	if s.partition == nil {
		return -1
	}
	return s.partition.Of(eligible)
}

// Matches reports whether the rollout may touch a node with these labels.
func (s *Settings) Matches(labelSet map[string]string) bool {
	return s.Selector == nil || s.Selector.Matches(labels.Set(labelSet))
}

// HoldLimit is when holds stop being honoured: max-hold after the
// controller first saw the revision as the target.
func (s *Settings) HoldLimit(targetSince time.Time) time.Time { return targetSince.Add(s.MaxHold) }
