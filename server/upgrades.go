package server

import (
	"cmp"
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/health"
)

// Defaults of UpgradeOptions.
const (
	// DefaultMaxWatchers bounds concurrent WatchUpgrades streams.
	DefaultMaxWatchers = 64
	// DefaultHeartbeat is how often a watch hears from a quiet agent.
	DefaultHeartbeat = 10 * time.Second
	// watchStall is how long a watcher may go without reading before it is
	// cut off.
	watchStall = 10 * time.Second
	// watchBacklog bounds the events a watcher may leave undelivered.
	watchBacklog = 256
)

// UpgradeOptions configures the owner's view (ListUpgrades, WatchUpgrades).
// Zero fields take their defaults.
type UpgradeOptions struct {
	// Deadline is how long a new pod may take to become available before its
	// upgrade counts as failed, unless the offer the upgrade was made for
	// carries the DaemonSet's (health.ProgressDeadlineAnnotation);
	// health.DefaultDeadline when zero.
	Deadline time.Duration
	// MaxWatchers bounds concurrent watches (DefaultMaxWatchers).
	MaxWatchers int
	// Heartbeat is how often a watch gets a heartbeat (DefaultHeartbeat).
	Heartbeat time.Duration
}

// upgradeView is the owner's view of the node's apps. It recomputes every app
// when the pod cache changes (a node holds at most a few hundred pods: the
// target revisions' images come with the pods, in the controller's offers),
// and when a deadline passes, and fans each change out to the watchers.
type upgradeView struct {
	srv       *Server
	rule      phaseRule
	heartbeat time.Duration
	stall     time.Duration
	backlog   int
	max       int

	// kick asks the loop to recompute.
	kick chan struct{}

	mu       sync.Mutex
	memory   map[appKey]*appMemory
	apps     map[appKey]*edgeotav1.App // as last published
	watchers map[*watcher]struct{}
	closed   bool
}

func newUpgradeView(srv *Server, opts UpgradeOptions) *upgradeView {
	v := &upgradeView{
		srv:       srv,
		rule:      phaseRule{deadline: cmp.Or(opts.Deadline, health.DefaultDeadline)},
		heartbeat: cmp.Or(opts.Heartbeat, DefaultHeartbeat),
		stall:     watchStall,
		backlog:   watchBacklog,
		max:       cmp.Or(opts.MaxWatchers, DefaultMaxWatchers),
		kick:      make(chan struct{}, 1),
		memory:    map[appKey]*appMemory{},
		apps:      map[appKey]*edgeotav1.App{},
		watchers:  map[*watcher]struct{}{},
	}
	if srv.queue != nil {
		v.rule.queued = srv.queue.Queued
	}
	return v
}

// changed asks the loop to recompute, without ever blocking the caller (the
// pod cache's event handlers among them).
func (v *upgradeView) changed() {
	select {
	case v.kick <- struct{}{}:
	default:
	}
}

// run keeps the view current until ctx is done, then ends every watch.
func (v *upgradeView) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			v.close()
			return
		case <-v.kick:
		case <-timer.C:
		}
		timer.Reset(v.refreshSafely(ctx))
	}
}

// refreshSafely is refresh, surviving a panic (logged, retried after a
// while) so that the view's loop never takes the agent down.
func (v *upgradeView) refreshSafely(ctx context.Context) (next time.Duration) {
	defer func() {
		if p := recover(); p != nil {
			klog.FromContext(ctx).Error(fmt.Errorf("panic: %v", p), "Recomputing the owner's view", "stack", string(debug.Stack()))
			next = idleRecheck
		}
	}()
	return v.refresh(ctx, v.srv.clock.Now())
}

// idleRecheck is how long the loop waits with nothing to expect; unsynced
// is how often it looks for the cache's first sync.
const (
	idleRecheck = time.Minute
	unsynced    = 100 * time.Millisecond
)

// refresh recomputes the view and publishes the changes. It returns how long
// until the clock alone may change it.
func (v *upgradeView) refresh(ctx context.Context, now time.Time) time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.refreshLocked(ctx, now)
}

func (v *upgradeView) refreshLocked(ctx context.Context, now time.Time) time.Duration {
	lister, _, ok := v.srv.podSource()
	if !ok {
		return unsynced
	}
	pods, err := lister.List(labels.Everything())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing cached pods")
		return unsynced
	}
	var mine []*corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName == v.srv.nodeName {
			mine = append(mine, p)
		}
	}
	inputs := groupApps(mine)
	next := make(map[appKey]*edgeotav1.App, len(inputs))
	recheck := idleRecheck
	soonest := func(d time.Duration) {
		if d > 0 && d < recheck {
			recheck = d
		}
	}
	for key, in := range inputs {
		mem := v.memory[key]
		if mem == nil {
			mem = &appMemory{}
			v.memory[key] = mem
		}
		st := v.rule.evaluate(in, mem, now)
		next[key] = st.app
		soonest(st.recheck)
	}
	for key, mem := range v.memory {
		if _, ok := inputs[key]; ok {
			continue
		}
		// No pod: the gap of a replacement, shown as UPGRADING (replacement
		// pending) until the deadline and FAILED after it, until a pod of the
		// app appears; or, with no upgrade under way, the app has left the
		// node.
		gap := &appInput{key: key, owner: mem.owner}
		v.rule.follow(gap, mem, nil, now)
		if !mem.ota || mem.upgrade == nil || mem.upgrade.settled {
			delete(v.memory, key)
			continue
		}
		st := v.rule.evaluate(gap, mem, now)
		next[key] = st.app
		soonest(st.recheck)
	}
	v.publishLocked(next)
	if !v.srv.synced() {
		// Served from the stored view: look again soon for the live one.
		return unsynced
	}
	return recheck
}

// podSource is where the owner's view reads the node's pods, and how fresh
// they are: the pod cache once it has synced, before that the view a previous
// run stored (see ListPods); ok is false while there is neither.
func (s *Server) podSource() (pods corelisters.PodLister, syncedAt time.Time, ok bool) {
	switch {
	case s.synced():
		return s.lister, s.lastContact(), true
	case s.stored != nil:
		return s.stored.pods, s.stored.lastContact, true
	}
	return nil, time.Time{}, false
}

// syncedAt is how fresh the view is.
func (v *upgradeView) syncedAt() *timestamppb.Timestamp {
	_, at, _ := v.srv.podSource()
	return timestamppb.New(at)
}

// publishLocked replaces the published apps with next and sends each
// difference to every watcher.
func (v *upgradeView) publishLocked(next map[appKey]*edgeotav1.App) {
	var events []*edgeotav1.WatchUpgradesResponse
	for key, app := range next {
		if old, ok := v.apps[key]; !ok || !proto.Equal(old, app) {
			events = append(events, &edgeotav1.WatchUpgradesResponse{Type: edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_UPSERT, App: app})
		}
	}
	for key, app := range v.apps {
		if _, ok := next[key]; !ok {
			events = append(events, &edgeotav1.WatchUpgradesResponse{Type: edgeotav1.UpgradeEventType_UPGRADE_EVENT_TYPE_DELETE, App: app})
		}
	}
	v.apps = next
	if len(events) == 0 {
		return
	}
	syncedAt := v.syncedAt()
	for _, e := range events {
		e.SyncedAt = syncedAt
	}
	for w := range v.watchers {
		for _, e := range events {
			if !w.offer(e) {
				v.dropLocked(w, status.Errorf(codes.ResourceExhausted,
					"watch cut off: more than %d changes were not read in time; watch again", v.backlog))
				break
			}
		}
	}
}

// snapshotLocked is every app, sorted.
func (v *upgradeView) snapshotLocked() []*edgeotav1.App {
	apps := make([]*edgeotav1.App, 0, len(v.apps))
	for _, app := range v.apps {
		apps = append(apps, app)
	}
	sortApps(apps)
	return apps
}

// ListUpgrades answers from the pod cache, or the stored view before it
// syncs, as ListPods does, with the freshness header.
func (s *Server) ListUpgrades(ctx context.Context, _ *edgeotav1.ListUpgradesRequest) (*edgeotav1.ListUpgradesResponse, error) {
	_, at, ok := s.podSource()
	if !ok {
		return nil, status.Error(codes.Unavailable, "the pod cache has not synced with the API server yet and no stored view could be read")
	}
	setSyncedAt(ctx, at)
	v := s.upgrades
	v.mu.Lock()
	defer v.mu.Unlock()
	v.refreshLocked(ctx, s.clock.Now())
	return &edgeotav1.ListUpgradesResponse{Apps: v.snapshotLocked(), SyncedAt: timestamppb.New(at)}, nil
}
