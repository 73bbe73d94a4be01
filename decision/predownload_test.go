package decision

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeota/edgeota/rollout"
)

func pulled(d Decision) []string {
	var nodes []string
	for _, t := range d.Pull {
		nodes = append(nodes, t.Node)
	}
	return nodes
}

// startPulls does what the controller does with a decision's pulls: a Job
// each, pending from now.
func (w *world) startPulls(d Decision) {
	for _, t := range d.Pull {
		w.pulls[t.Node] = Pull{State: PullPending, Since: w.now, ByController: true}
		w.dirty[t.Node] = true
	}
}

func (w *world) setPull(node string, p Pull) {
	w.pulls[node] = p
	w.dirty[node] = true
}

// TestPreDownloadGatesEachNode: with pre-download, the lookahead pulls on the
// nodes whose turn comes next, up to the parallelism, NotReady ones left
// out; a node is taken only once its images are on it.
func TestPreDownloadGatesEachNode(t *testing.T) {
	w := newWorld(t, 6, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1", rollout.PreDownloadAnnotation: "true",
		rollout.PreDownloadParallelismAnnotation: "3"})
	w.setNode("node-1", func(n *Node) { n.Ready, n.ReadyStatus = false, "Unknown" })
	d := w.decide()
	if len(d.Take) != 0 {
		t.Fatalf("got %v deleted, want none before any pull", deleted(d))
	}
	if got := pulled(d); !slices.Equal(got, []string{"node-0", "node-2", "node-3"}) {
		t.Fatalf("got pulls started on %v, want the next three Ready nodes [node-0 node-2 node-3]", got)
	}
	w.startPulls(d)
	if d := w.decide(); len(d.Pull) != 0 || len(d.Take) != 0 {
		t.Fatalf("pulls under way: got pulls %v and deletions %v, want none (parallelism 3)", pulled(d), deleted(d))
	}
	w.setPull("node-2", Pull{State: PullDone})
	d = w.decide()
	if got := deleted(d); !slices.Equal(got, []string{"node-2"}) {
		t.Errorf("node-2 pulled: got %v deleted, want [node-2]: node-0 still pulls", got)
	}
	if got := pulled(d); !slices.Equal(got, []string{"node-4"}) {
		t.Errorf("got pulls %v, want node-4 in node-2's place", got)
	}
	if s := d.Status.Pulls; s == nil || s.InFlight != 2 || s.Done != 1 || s.Waiting != 0 {
		t.Errorf("got pulls status %+v, want 2 in flight, node-2 done, none waiting (the budget is used)", s)
	}
}

// TestBadTagHaltsWithNoPodLost: a pull that fails for good fails its node
// before any pod is touched: it counts toward max-failed and holds no
// budget; max-failed of them halt the rollout with every node still running
// its old pod.
func TestBadTagHaltsWithNoPodLost(t *testing.T) {
	w := newWorld(t, 4, aru, map[string]string{rollout.MaxUnavailableAnnotation: "2", rollout.MaxFailedAnnotation: "2",
		rollout.PreDownloadAnnotation: "true"})
	w.startPulls(w.decide())
	for _, n := range []string{"node-0", "node-1"} {
		w.setPull(n, Pull{State: PullFailed, Why: "image nginx:nope: ErrImagePull: manifest unknown", ByController: true})
	}
	d := w.decide()
	if !d.Status.Halted || d.Status.Failed.Count != 2 || len(d.Take) != 0 {
		t.Fatalf("got halted %v, %d failed, %v deleted; want halted, 2, none", d.Status.Halted, d.Status.Failed.Count, deleted(d))
	}
	if d.Unavailable != 0 {
		t.Errorf("got %d unavailable, want 0: no pod was lost", d.Unavailable)
	}
	if why := d.Status.Failed.Reasons["node-0"]; !strings.Contains(why, "no pod lost") || !strings.Contains(why, "nginx:nope") {
		t.Errorf("got reason %q, want it to say no pod was lost, naming the image", why)
	}
	if e, _ := w.ledger.Entry("node-0"); !e.NoPodLost {
		t.Errorf("got entry %+v, want a failure before harm", e)
	}
	if n := w.refresh(); len(n) != 0 {
		t.Errorf("got notices %+v again, want the failure noticed once", n)
	}
}

// TestPreDownloadCanaryFirst: with a canary, nothing is pulled, nor gated,
// until that many nodes settled on the target.
func TestPreDownloadCanaryFirst(t *testing.T) {
	w := newWorld(t, 4, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1", rollout.PreDownloadAnnotation: "true",
		rollout.PreDownloadCanaryAnnotation: "1"})
	d := w.decide()
	if got := deleted(d); !slices.Equal(got, []string{"node-0"}) || len(d.Pull) != 0 {
		t.Fatalf("before the canary: got %v deleted and pulls %v, want node-0 taken as without pre-download, no pull", got, pulled(d))
	}
	w.deliverDeletions()
	w.replace("node-0", true)
	w.heartbeat("node-0", w.now.Add(2*time.Second))
	d = w.decide()
	if len(d.Take) != 0 || len(d.Pull) == 0 {
		t.Errorf("after the canary: got %v deleted and pulls %v, want pulls first", deleted(d), pulled(d))
	}
}

// TestPullTimeout: a pull that outlasts its timeout is taken anyway (the
// default) or passed over (skip).
func TestPullTimeout(t *testing.T) {
	for _, onTimeout := range []string{"take", "skip"} {
		t.Run(onTimeout, func(t *testing.T) {
			w := newWorld(t, 2, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1", rollout.PreDownloadAnnotation: "true",
				rollout.PreDownloadTimeoutAnnotation: "60", rollout.PreDownloadOnTimeoutAnnotation: onTimeout})
			d := w.decide()
			w.startPulls(d)
			if d := w.decide(); !d.Wake.Equal(t0.Add(time.Minute)) {
				t.Fatalf("got wake at %s, want the pulls' timeout %s", d.Wake, t0.Add(time.Minute))
			}
			w.now = t0.Add(time.Minute)
			got := deleted(w.decide())
			if onTimeout == "take" && !slices.Equal(got, []string{"node-0"}) || onTimeout == "skip" && len(got) != 0 {
				t.Errorf("at the timeout: got %v deleted, want %s", got, onTimeout)
			}
		})
	}
}

// TestOTAPreDownloadsOfferedNodes: for OTA, every offered node pulls, so the
// owner's upgrade starts with the images there; held-back nodes do not.
func TestOTAPreDownloadsOfferedNodes(t *testing.T) {
	w := newWorld(t, 3, ota, map[string]string{rollout.PartitionAnnotation: "1", rollout.PreDownloadAnnotation: "true"})
	w.decide() // offers node-0 and node-1
	d := w.decide()
	if got := pulled(d); !slices.Equal(got, []string{"node-0", "node-1"}) {
		t.Errorf("got pulls %v, want the offered nodes [node-0 node-1]", got)
	}
}

// TestPullJobsLeftHoldTheParallelism: a pull that finished, done or failed,
// holds its place in the parallelism while its Job is still there, so that
// the next Job is created only once it is deleted: never more Jobs at once
// than the parallelism allows (the controller deletes a finished Job in the
// sync that reads its result, and creates the next one in the sync after).
func TestPullJobsLeftHoldTheParallelism(t *testing.T) {
	w := newWorld(t, 4, aru, map[string]string{rollout.MaxUnavailableAnnotation: "1", rollout.MaxFailedAnnotation: "2",
		rollout.PreDownloadAnnotation: "true", rollout.PreDownloadParallelismAnnotation: "1"})
	d := w.decide()
	if got := pulled(d); !slices.Equal(got, []string{"node-0"}) {
		t.Fatalf("got pulls %v, want [node-0]", got)
	}
	w.startPulls(d)

	// Done, its Job not deleted yet: taken, and no Job started beside it.
	w.setPull("node-0", Pull{State: PullDone, ByController: true, Job: true})
	d = w.decide()
	if got := deleted(d); !slices.Equal(got, []string{"node-0"}) || len(d.Pull) != 0 {
		t.Fatalf("node-0 pulled, its Job still there: got %v deleted and pulls %v, want [node-0] and none", got, pulled(d))
	}
	w.deliverDeletions()
	w.setPull("node-0", Pull{})
	d = w.decide()
	if got := pulled(d); !slices.Equal(got, []string{"node-1"}) {
		t.Fatalf("node-0's Job gone: got pulls %v, want [node-1]", got)
	}
	w.startPulls(d)

	// Failed for good, its Job not deleted yet: failed, and no Job started
	// beside it until the Job goes.
	w.setPull("node-1", Pull{State: PullFailed, Why: "image nginx:nope: ErrImagePull: manifest unknown", ByController: true, Job: true})
	if d := w.decide(); len(d.Pull) != 0 {
		t.Fatalf("node-1 failed, its Job still there: got pulls %v, want none", pulled(d))
	}
	if s, _ := w.r.State("node-1"); s != StatePullFailed {
		t.Fatalf("got node-1 %v, want its pull failed", s)
	}
	w.setPull("node-1", Pull{})
	if got := pulled(w.decide()); !slices.Equal(got, []string{"node-2"}) {
		t.Errorf("node-1's Job gone: got pulls %v, want [node-2]", got)
	}
}
