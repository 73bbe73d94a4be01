// Package leaderelection elects one replica of the controller to act,
// through a coordination/v1 Lease, as client-go's leaderelection package
// does with its LeaseLock: the same record in the Lease, the same timings,
// and the same rule that a Lease has expired only when this replica has
// seen it unchanged for its whole duration, on its own clock. The holder's
// renewTime is never compared with this replica's clock, so clocks that
// disagree never hand the Lease over early.
//
// It exists because client-go's package links client-go's scheme of every
// API group (package kube says why that matters), and it differs in one
// place: a leader gives the Lease up only after its work has returned, so a
// successor never starts while the last deletions of its predecessor are
// still under way.
package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/edgeota/edgeota/internal/kube"
)

// JitterFactor spreads the standbys' retries, as client-go's.
const JitterFactor = 1.2

// ErrLost is Run's error when the Lease could not be renewed within the
// renew deadline: this replica must stop acting, since another may now.
var ErrLost = errors.New("lost the leadership: the Lease was not renewed within the renew deadline")

// Config is what an Elector campaigns for, and how.
type Config struct {
	// Leases are the Leases of the Lease's namespace.
	Leases kube.Leases
	// Name is the Lease's name.
	Name string
	// Identity is this replica's, unique among the replicas.
	Identity string
	// LeaseDuration is how long a standby waits, having seen the Lease
	// unchanged, before it takes the Lease.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it
	// stops acting.
	RenewDeadline time.Duration
	// RetryPeriod is the wait between two tries.
	RetryPeriod time.Duration
	// OnNewLeader, if set, is told each leader this replica observes.
	OnNewLeader func(identity string)
}

// Elector campaigns for one Lease (Run) and tells whether its leader is
// healthy (Check).
type Elector struct {
	cfg   Config
	clock clock.Clock

	mu sync.Mutex
	// lease is the Lease as last read or written: the resourceVersion an
	// update is made at, so that two replicas never both write it.
	lease *coordinationv1.Lease
	// observed is the Lease's spec as last seen changed, and observedAt
	// when, on this replica's clock.
	observed   coordinationv1.LeaseSpec
	observedAt time.Time
	// leader is the holder last reported to OnNewLeader.
	leader string
}

// New checks cfg's timings as client-go does: the renew deadline within the
// lease duration, the retries within the renew deadline.
func New(cfg Config) (*Elector, error) {
	switch {
	case cfg.Leases == nil || cfg.Name == "":
		return nil, errors.New("the Lease to elect through is not set")
	case cfg.Identity == "":
		return nil, errors.New("the replica's identity is empty")
	case cfg.RetryPeriod <= 0 || cfg.RenewDeadline <= 0 || cfg.LeaseDuration <= 0:
		return nil, errors.New("the lease duration, renew deadline and retry period must be above zero")
	case cfg.LeaseDuration <= cfg.RenewDeadline:
		return nil, fmt.Errorf("the lease duration (%s) must be longer than the renew deadline (%s)", cfg.LeaseDuration, cfg.RenewDeadline)
	case cfg.RenewDeadline <= time.Duration(JitterFactor*float64(cfg.RetryPeriod)):
		return nil, fmt.Errorf("the renew deadline (%s) must be longer than %g retry periods (%s)", cfg.RenewDeadline, JitterFactor, cfg.RetryPeriod)
	}
	return &Elector{cfg: cfg, clock: clock.RealClock{}}, nil
}

// Run campaigns until ctx ends. Once this replica holds the Lease, lead
// runs with a context that ends when ctx does or the Lease could not be
// renewed within the renew deadline. When lead has returned, Run gives the
// Lease up (unless it was lost) and returns:
//   - nil if ctx ended, whether this replica led or not, and lead returned
//     nil;
//   - lead's error if it returned one;
//   - ErrLost if the Lease was lost;
//   - an error if lead returned nil while ctx had not ended.
func (e *Elector) Run(ctx context.Context, lead func(context.Context) error) error {
	logger := klog.FromContext(ctx).WithValues("lease", e.cfg.Name, "identity", e.cfg.Identity)
	if !e.acquire(ctx, logger) {
		return nil
	}
	logger.Info("Started leading")
	leadCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- lead(leadCtx)
		cancel() // work that returns stops the renewals too
	}()
	lost := e.renew(leadCtx, logger)
	cancel()
	err := <-done
	if lost {
		logger.Info("Stopped leading: the Lease was not renewed in time")
		return errors.Join(ErrLost, err)
	}
	e.release(logger)
	logger.Info("Stopped leading")
	if err == nil && ctx.Err() == nil {
		return errors.New("stopped leading: the work returned while it was still wanted")
	}
	return err
}

// acquire tries every RetryPeriod (jittered) until it holds the Lease,
// false if ctx ended first.
func (e *Elector) acquire(ctx context.Context, logger klog.Logger) bool {
	logger.Info("Campaigning for the Lease")
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	acquired := false
	wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
		if acquired = e.tryAcquireOrRenew(ctx, logger); acquired {
			stop()
			return
		}
		logger.V(4).Info("The Lease is held elsewhere; retrying")
	}, e.cfg.RetryPeriod, JitterFactor, true)
	return acquired
}

// renew renews the Lease every RetryPeriod until ctx ends (false) or a
// renewal has not succeeded within RenewDeadline (true: lost).
func (e *Elector) renew(ctx context.Context, logger klog.Logger) (lost bool) {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-e.clock.After(e.cfg.RetryPeriod):
		}
		deadline, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
		err := wait.PollUntilContextCancel(deadline, e.cfg.RetryPeriod, true, func(ctx context.Context) (bool, error) {
			return e.tryAcquireOrRenew(ctx, logger), nil
		})
		cancel()
		if err != nil {
			return ctx.Err() == nil
		}
	}
}

// tryAcquireOrRenew takes or renews the Lease once: true if this replica
// holds it now. It writes only at the resourceVersion last read, so a
// replica that raced another loses with a conflict.
func (e *Elector) tryAcquireOrRenew(ctx context.Context, logger klog.Logger) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	want := coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(e.cfg.Identity),
		LeaseDurationSeconds: ptr.To(int32(e.cfg.LeaseDuration / time.Second)),
		AcquireTime:          &metav1.MicroTime{Time: now},
		RenewTime:            &metav1.MicroTime{Time: now},
		LeaseTransitions:     ptr.To(int32(0)),
	}
	// The leader renews at the resourceVersion it last wrote, without a
	// read, while its Lease is valid by its own observation.
	if e.lease != nil && e.leadingLocked() && e.validLocked(now) {
		want.AcquireTime, want.LeaseTransitions = e.observed.AcquireTime, e.observed.LeaseTransitions
		if e.updateLocked(ctx, want) == nil {
			return true
		}
	}
	lease, err := e.cfg.Leases.Get(ctx, e.cfg.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// No Lease yet: the first to create it holds it.
		created, err := e.cfg.Leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: e.cfg.Name}, Spec: want}, metav1.CreateOptions{})
		if err != nil {
			logger.V(2).Info("Could not create the Lease", "err", err)
			return false
		}
		e.observeLocked(created, now)
		return true
	case err != nil:
		logger.Error(err, "Reading the Lease")
		return false
	}
	e.lease = lease
	if !apiequality.Semantic.DeepEqual(lease.Spec, e.observed) || e.observedAt.IsZero() {
		e.observeLocked(lease, now)
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holder != "" && holder != e.cfg.Identity && e.validLocked(now) {
		return false // another's, and not seen unchanged for its duration
	}
	if holder == e.cfg.Identity {
		want.AcquireTime, want.LeaseTransitions = lease.Spec.AcquireTime, lease.Spec.LeaseTransitions
	} else {
		want.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
	}
	if err := e.updateLocked(ctx, want); err != nil {
		logger.V(2).Info("Could not update the Lease", "err", err)
		return false
	}
	return true
}

// updateLocked writes spec at the resourceVersion last read or written.
func (e *Elector) updateLocked(ctx context.Context, spec coordinationv1.LeaseSpec) error {
	lease := e.lease.DeepCopy()
	lease.Spec = spec
	updated, err := e.cfg.Leases.Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	e.observeLocked(updated, e.clock.Now())
	return nil
}

// observeLocked records a Lease as seen changed at now: one this replica
// read with a spec it had not seen, or wrote.
func (e *Elector) observeLocked(lease *coordinationv1.Lease, now time.Time) {
	e.lease, e.observed, e.observedAt = lease, *lease.Spec.DeepCopy(), now
	e.reportLeaderLocked()
}

// reportLeaderLocked tells OnNewLeader a holder it has not been told.
func (e *Elector) reportLeaderLocked() {
	holder := ptr.Deref(e.observed.HolderIdentity, "")
	if holder == e.leader {
		return
	}
	e.leader = holder
	if e.cfg.OnNewLeader != nil && holder != "" {
		e.cfg.OnNewLeader(holder)
	}
}

// leadingLocked reports whether the Lease as last observed is this
// replica's.
func (e *Elector) leadingLocked() bool {
	return ptr.Deref(e.observed.HolderIdentity, "") == e.cfg.Identity
}

// validLocked reports whether the Lease as last observed is still valid at
// now: observed changed less than its duration ago, on this replica's
// clock.
func (e *Elector) validLocked(now time.Time) bool {
	d := time.Duration(ptr.Deref(e.observed.LeaseDurationSeconds, 0)) * time.Second
	return e.observedAt.Add(d).After(now)
}

// release gives the Lease up, so that a standby takes it at its next try
// instead of after the lease duration: the holder emptied and a duration
// of one second, as client-go's ReleaseOnCancel writes it.
func (e *Elector) release(logger klog.Logger) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lease == nil || !e.leadingLocked() {
		return
	}
	now := e.clock.Now()
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.RenewDeadline)
	defer cancel()
	err := e.updateLocked(ctx, coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(""),
		LeaseDurationSeconds: ptr.To(int32(1)),
		AcquireTime:          &metav1.MicroTime{Time: now},
		RenewTime:            &metav1.MicroTime{Time: now},
		LeaseTransitions:     e.observed.LeaseTransitions,
	})
	if err != nil {
		logger.Error(err, "Giving the Lease up; a standby takes it once it expires")
	}
}

// Check is the leader's liveness for /healthz: an error once this replica
// leads but has not renewed for the lease duration plus tolerance (a
// wedged leader, for the kubelet to restart), as client-go's
// HealthzAdaptor. A standby is always healthy.
func (e *Elector) Check(tolerance time.Duration) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.leadingLocked() {
		return nil
	}
	if since := e.clock.Since(e.observedAt); since > e.cfg.LeaseDuration+tolerance {
		return fmt.Errorf("the leader has not renewed Lease %s for %s", e.cfg.Name, since.Round(time.Second))
	}
	return nil
}

// Healthz is Check as an http handler's check, for an Elector that may not
// exist (no leader election): always healthy then.
func Healthz(e *Elector, tolerance time.Duration) func(*http.Request) error {
	return func(*http.Request) error {
		if e == nil {
			return nil
		}
		return e.Check(tolerance)
	}
}
