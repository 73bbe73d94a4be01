package leaderelection

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/edgeota/edgeota/internal/kube/kubetest"
)

const (
	ns            = "edgeota-system"
	leaseName     = "ota-controller"
	leaseDuration = 15 * time.Second
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// fixture is a fake clientset and electors on it, each on the fixture's
// fake clock unless given their own.
type fixture struct {
	t      *testing.T
	client *fake.Clientset
	clock  *clocktesting.FakeClock
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	return &fixture{t: t, client: fake.NewClientset(objs...), clock: clocktesting.NewFakeClock(t0)}
}

// elector is a replica named identity, with client-go's customary timings
// unless timings are given (lease, renew, retry).
func (f *fixture) elector(identity string, timings ...time.Duration) *Elector {
	f.t.Helper()
	cfg := Config{Leases: kubetest.Wrap(f.client).CoordinationV1().Leases(ns), Name: leaseName, Identity: identity,
		LeaseDuration: leaseDuration, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	if len(timings) == 3 {
		cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = timings[0], timings[1], timings[2]
	}
	e, err := New(cfg)
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	if len(timings) != 3 {
		e.clock = f.clock
	}
	return e
}

// try has e take or renew the Lease once.
func (f *fixture) try(e *Elector) bool {
	_, ctx := ktesting.NewTestContext(f.t)
	return e.tryAcquireOrRenew(ctx, ktesting.NewLogger(f.t, ktesting.NewConfig()))
}

// lease is the Lease as the API holds it.
func (f *fixture) lease() *coordinationv1.Lease {
	f.t.Helper()
	l, err := f.client.CoordinationV1().Leases(ns).Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("reading the Lease: %v", err)
	}
	return l
}

// holder is the Lease's holder and transitions.
func (f *fixture) holder() (string, int32) {
	l := f.lease()
	return ptr.Deref(l.Spec.HolderIdentity, ""), ptr.Deref(l.Spec.LeaseTransitions, 0)
}

// heldBy is a Lease held by identity, renewed at renewed.
func heldBy(identity string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: ns, ResourceVersion: "1"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(identity), LeaseDurationSeconds: ptr.To(int32(15)),
			AcquireTime: &metav1.MicroTime{Time: renewed}, RenewTime: &metav1.MicroTime{Time: renewed}, LeaseTransitions: ptr.To(int32(3))},
	}
}

// renewAs has the Lease's holder renew it at renewed, as another replica.
func (f *fixture) renewAs(renewed time.Time) {
	f.t.Helper()
	l := f.lease()
	l.Spec.RenewTime = &metav1.MicroTime{Time: renewed}
	if _, err := f.client.CoordinationV1().Leases(ns).Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// TestTheFirstReplicaCreatesTheLease: with no Lease, the first try creates
// it, held by the replica, with the lease duration in whole seconds.
func TestTheFirstReplicaCreatesTheLease(t *testing.T) {
	f := newFixture(t)
	if !f.try(f.elector("a")) {
		t.Fatalf("got the Lease not acquired, want it created")
	}
	l := f.lease()
	if got := ptr.Deref(l.Spec.HolderIdentity, ""); got != "a" {
		t.Errorf("got holder %q, want a", got)
	}
	if got := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); got != 15 {
		t.Errorf("got leaseDurationSeconds %d, want 15", got)
	}
	if got := ptr.Deref(l.Spec.LeaseTransitions, -1); got != 0 {
		t.Errorf("got leaseTransitions %d, want 0", got)
	}
}

// TestAStandbyWaitsTheLeaseDurationOnItsOwnClock: a Lease held by another
// is taken only once this replica has seen it unchanged for its whole
// duration, counted on its own clock; the takeover counts a transition.
func TestAStandbyWaitsTheLeaseDurationOnItsOwnClock(t *testing.T) {
	f := newFixture(t, heldBy("a", t0))
	b := f.elector("b")
	if f.try(b) {
		t.Fatalf("got the Lease taken at first sight, want it left to a")
	}
	f.clock.Step(leaseDuration - time.Second)
	if f.try(b) {
		t.Fatalf("got the Lease taken a second before its duration, want it left to a")
	}
	f.clock.Step(2 * time.Second)
	if !f.try(b) {
		t.Fatalf("got the Lease left to a after its duration unchanged, want it taken")
	}
	if holder, transitions := f.holder(); holder != "b" || transitions != 4 {
		t.Errorf("got holder %q with %d transitions, want b with 4", holder, transitions)
	}
}

// TestWrongClocksNeverHandTheLeaseOver: a holder whose clock is far
// behind (its renewTime an hour old) keeps the Lease while it renews, and a
// holder whose clock is far ahead loses it once it stops: renewTime is
// never compared with this replica's clock.
func TestWrongClocksNeverHandTheLeaseOver(t *testing.T) {
	behind := t0.Add(-time.Hour)
	f := newFixture(t, heldBy("a", behind))
	b := f.elector("b")
	for i := range 20 {
		if f.try(b) {
			t.Fatalf("try %d: got the Lease taken from a holder renewing on a clock an hour behind, want it left", i)
		}
		f.clock.Step(2 * time.Second)
		f.renewAs(behind.Add(time.Duration(i+1) * 2 * time.Second))
	}

	ahead := newFixture(t, heldBy("a", t0.Add(time.Hour)))
	c := ahead.elector("c")
	if ahead.try(c) {
		t.Fatalf("got the Lease taken at first sight, want it left to a")
	}
	ahead.clock.Step(leaseDuration + time.Second)
	if !ahead.try(c) {
		t.Errorf("got the Lease kept by a holder that stopped renewing (its renewTime an hour ahead), want it taken after its duration")
	}
}

// TestTheLeaderRenewsKeepingItsAcquireTime: renewals move renewTime only.
func TestTheLeaderRenewsKeepingItsAcquireTime(t *testing.T) {
	f := newFixture(t)
	a := f.elector("a")
	f.try(a)
	f.clock.Step(2 * time.Second)
	if !f.try(a) {
		t.Fatalf("got the renewal refused, want it made")
	}
	l := f.lease()
	if got, want := l.Spec.RenewTime.Time, t0.Add(2*time.Second); !got.Equal(want) {
		t.Errorf("got renewTime %v, want %v", got, want)
	}
	if got := l.Spec.AcquireTime.Time; !got.Equal(t0) {
		t.Errorf("got acquireTime %v, want %v: a renewal keeps it", got, t0)
	}
	if got := ptr.Deref(l.Spec.LeaseTransitions, -1); got != 0 {
		t.Errorf("got %d transitions, want 0", got)
	}
}

// TestALostRaceTakesNothing: an update refused with a conflict (another
// replica wrote first) leaves the Lease to the other.
func TestALostRaceTakesNothing(t *testing.T) {
	f := newFixture(t, heldBy("a", t0))
	b := f.elector("b")
	f.try(b)
	f.clock.Step(leaseDuration + time.Second)
	f.client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, leaseName, errors.New("the object has been modified"))
	})
	if f.try(b) {
		t.Errorf("got the Lease taken despite a conflict, want it not")
	}
	if err := b.Check(0); err != nil {
		t.Errorf("got a standby unhealthy (%v), want healthy", err)
	}
}

// TestCheckFailsAWedgedLeader: the leader is unhealthy once it has not
// renewed for the lease duration plus the tolerance, healthy before.
func TestCheckFailsAWedgedLeader(t *testing.T) {
	f := newFixture(t)
	a := f.elector("a")
	f.try(a)
	f.clock.Step(leaseDuration + 20*time.Second)
	if err := a.Check(20 * time.Second); err != nil {
		t.Errorf("got %v at exactly the tolerance, want healthy", err)
	}
	f.clock.Step(time.Second)
	if err := a.Check(20 * time.Second); err == nil || !strings.Contains(err.Error(), "has not renewed") {
		t.Errorf("got %v, want the leader unhealthy", err)
	}
}

// TestNewRefusesTimingsThatCannotHold: client-go's rules.
func TestNewRefusesTimingsThatCannotHold(t *testing.T) {
	leases := kubetest.Wrap(fake.NewClientset()).CoordinationV1().Leases(ns)
	for _, tt := range []struct {
		name         string
		cfg          Config
		errSubstring string
	}{
		{"renew deadline as long as the lease", Config{Leases: leases, Name: "l", Identity: "a", LeaseDuration: 10 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: time.Second}, "longer than the renew deadline"},
		{"retries as long as the renew deadline", Config{Leases: leases, Name: "l", Identity: "a", LeaseDuration: 15 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 2 * time.Second}, "retry periods"},
		{"no identity", Config{Leases: leases, Name: "l", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}, "identity"},
		{"zero retry", Config{Leases: leases, Name: "l", Identity: "a", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second}, "above zero"},
		{"no Lease", Config{Identity: "a", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}, "not set"},
	} {
		if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.errSubstring) {
			t.Errorf("%s: got %v, want an error saying %q", tt.name, err, tt.errSubstring)
		}
	}
}

// Run's tests use real time, at timings a loaded machine keeps (the lease
// 3 s, retries every 100 ms), and a generous deadline for each answer.
var short = []time.Duration{3 * time.Second, 2 * time.Second, 100 * time.Millisecond}

// answer waits for ch, failing after a minute.
func answer[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("no %s after a minute", what)
		panic("unreachable")
	}
}

// TestRunLeadsThenReleasesOnlyAfterTheWorkReturned: the leader's work runs
// until ctx ends; the Lease is given up (holder emptied) only once the work
// has returned, and a standby then takes it at its next try.
func TestRunLeadsThenReleasesOnlyAfterTheWorkReturned(t *testing.T) {
	f := newFixture(t)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	leading, finishing, finish := make(chan struct{}), make(chan struct{}), make(chan struct{})
	ran := make(chan error, 1)
	go func() {
		ran <- f.elector("a", short...).Run(ctx, func(ctx context.Context) error {
			close(leading)
			<-ctx.Done()
			close(finishing)
			<-finish // the last deletions, still under way
			return nil
		})
	}()
	answer(t, leading, "leadership")
	cancel()
	answer(t, finishing, "end of the work's context")
	if holder, _ := f.holder(); holder != "a" {
		t.Errorf("got holder %q while the work still runs, want a: a successor must not start yet", holder)
	}
	close(finish)
	if err := answer(t, ran, "return from Run"); err != nil {
		t.Errorf("got %v, want nil once ctx ended", err)
	}
	if holder, _ := f.holder(); holder != "" {
		t.Errorf("got holder %q after Run returned, want the Lease given up", holder)
	}
	b := f.elector("b", short...)
	if !f.try(b) {
		t.Errorf("got a released Lease refused to a standby, want it taken at once")
	}
}

// TestRunStopsTheWorkWhenRenewalsFail: when the Lease cannot be renewed
// within the renew deadline, the work's context ends and Run says the
// Lease was lost, without writing it again.
func TestRunStopsTheWorkWhenRenewalsFail(t *testing.T) {
	f := newFixture(t)
	// The API server goes away once the replica leads. Reactors are set
	// before anything runs: the fake clientset does not guard its reactor
	// chain against calls under way.
	var away atomic.Bool
	f.client.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if !away.Load() {
			return false, nil, nil
		}
		return true, nil, apierrors.NewServiceUnavailable("the API server is away")
	})
	_, ctx := ktesting.NewTestContext(t)
	leading := make(chan struct{})
	ran := make(chan error, 1)
	go func() {
		ran <- f.elector("a", short...).Run(ctx, func(ctx context.Context) error {
			close(leading)
			<-ctx.Done()
			return nil
		})
	}()
	answer(t, leading, "leadership")
	away.Store(true)
	if err := answer(t, ran, "return from Run"); !errors.Is(err, ErrLost) {
		t.Errorf("got %v, want ErrLost", err)
	}
}

// TestRunEndsWhenTheWorkReturns: work that returns while still wanted ends
// the leadership (the Lease given up for a healthy replica) with its error,
// instead of a leader that holds the Lease and does nothing.
func TestRunEndsWhenTheWorkReturns(t *testing.T) {
	f := newFixture(t)
	_, ctx := ktesting.NewTestContext(t)
	failed := errors.New("the caches never synced")
	ran := make(chan error, 1)
	go func() {
		ran <- f.elector("a", short...).Run(ctx, func(context.Context) error { return failed })
	}()
	if err := answer(t, ran, "return from Run"); !errors.Is(err, failed) {
		t.Errorf("got %v, want the work's error", err)
	}
	if holder, _ := f.holder(); holder != "" {
		t.Errorf("got holder %q, want the Lease given up", holder)
	}
}
