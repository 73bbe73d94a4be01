package main

import (
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/bench/measure"
	"github.com/edgeota/edgeota/controller"
	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/internal/kube"
	recordstore "github.com/edgeota/edgeota/record"
)

// recordScenario: what the rollout record costs etcd at fleet sizes no KWOK
// cluster here reaches (2,000, 20,000 and 100,000 nodes, four DaemonSets
// each), measured against a real API server and etcd of its own
// (session.startRecordAPI: no nodes, no other component), driven by
// synthetic ledgers: a child process (recordCommand) replays each
// DaemonSet's rollout into a decision.Ledger as the controller's decision
// writes it, and writes it through package record's store as the
// controller does (the write before the deletions, the background write
// after them, the urgent one of an owner's upgrade, merges in the
// background), with the controller's own client and the informer of the
// records the controller runs. Three write schedules:
//   - waves: AdvancedRollingUpdate, max-unavailable 10 %: nodes taken as the
//     budget frees, their entries written ahead, each settling at its first
//     Lease renewal after its new pod is Ready;
//   - single: the same, one node at a time (max-unavailable 1), each turn
//     paced by its proof of life;
//   - ota: OTA, the partition raised by a fifth of the fleet every 30
//     minutes, each owner upgrading at a random moment within 4 hours of its
//     offer.
//
// Time is simulated: each DaemonSet's clock (the ledger's times, the store's
// pacing) moves from one event to the next, and the API server takes the
// writes as fast as it can. What a compaction window of etcd holds is the
// bytes written within 5 minutes of that clock: the same writes in the same
// order as a controller would make them in real time. What is measured is
// bytes, counts and the read back; the API server's speed here is not a
// figure.
var recordScenario = scenario{name: "record", clusterFree: true, onlyWhenNamed: true, run: runRecordScenario}

const (
	// recordCommand runs this binary as the record scenario's child.
	recordCommand = "record"
	// recordDaemonSets is how many DaemonSets roll out at once, each over
	// every node, as the at-rest scenario's four.
	recordDaemonSets = 4
	// recordPerNodeTarget is issue 46's bound: the bytes etcd stores for a
	// rollout's record, per node and rollout.
	recordPerNodeTarget = 2000
	// recordPad is how much bigger an in-flight entry of the padded runs is:
	// the headroom kept for the fields in-place upgrades add (a pod
	// generation, a few container IDs, a patch time).
	recordPad = 300
	// etcdDefaultQuota is etcd's default backend quota, which a full etcd
	// refuses every write past (the whole cluster stops).
	etcdDefaultQuota = 2 << 30
	// compactionWindow is how often kube-apiserver compacts etcd's history
	// by default (--etcd-compaction-interval).
	compactionWindow = 5 * time.Minute
)

// recordSchedules are the write schedules, in the order they run.
var recordSchedules = []string{"waves", "single", "ota"}

// recordRun is one schedule at one size, as the child measured it.
type recordRun struct {
	Nodes      int    `json:"nodes"`
	DaemonSets int    `json:"daemonSets"`
	Schedule   string `json:"schedule"`
	Padded     bool   `json:"padded"`
	// Writes are the record ConfigMaps the writes created, Merges those the
	// merges created, Deletes those deleted (merges' sources); Rewrites the
	// times a store took its own writes for someone else's (0 expected).
	Writes, Merges, Deletes, Rewrites int
	// DataBytes is the ConfigMaps' data (the compressed entries), StoredBytes
	// each object as etcd stores it, summed over every create; KeyBytes the
	// etcd keys of the deletions (a deletion stores its key alone).
	DataBytes, StoredBytes, KeyBytes int64
	// LargestWrite is the largest single object stored.
	LargestWrite int
	// Window is the most stored in one 5-minute window of the rollouts'
	// clock, every DaemonSet together, with its writes and deletions.
	Window                      int64
	WindowWrites, WindowDeletes int
	// Simulated is how long the rollouts took on their clock, Real how long
	// the API server took to take their writes.
	Simulated, Real time.Duration
	// EtcdPutBytes is etcd's own count of the keys and values put during the
	// run (etcd_debugging_mvcc_total_put_size_in_bytes: the API server's
	// own writes included), EtcdPuts and EtcdDeletes its counts.
	EtcdPutBytes, EtcdPuts, EtcdDeletes float64
	// EtcdDB is etcd's database size at the end, EtcdDBInUse what of it is
	// in use.
	EtcdDB, EtcdDBInUse float64
	// ConfigMaps are the records' ConfigMaps at the end, every DaemonSet
	// together; InformerHeap the heap a fresh informer of them holds.
	ConfigMaps   int
	InformerHeap int64
	// Loads are how long each DaemonSet's record took to Load at the end;
	// Exact whether each read back exactly what its ledger held.
	Loads []time.Duration
	Exact bool
}

// perNode is the bytes etcd stored per node and rollout.
func (r recordRun) perNode() float64 {
	return float64(r.StoredBytes) / float64(r.Nodes*r.DaemonSets)
}

func runRecordScenario(ctx context.Context, s *session, _ *findings) (table, error) {
	api, err := s.startRecordAPI(ctx)
	if err != nil {
		return table{}, err
	}
	defer func() { _ = s.stopRecordAPI(api) }()
	sizes := slices.Sorted(slices.Values(s.p.recordNodes))
	out, err := s.runSelf(ctx, recordCommand, "-server", api.server, "-token", api.token, "-etcd", api.etcd,
		"-nodes", joinInts(sizes), "-padded", joinInts(s.p.recordPadded))
	if err != nil {
		return table{}, err
	}
	var runs []recordRun
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var r recordRun
		if err := dec.Decode(&r); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return table{}, fmt.Errorf("reading the record child's figures: %w", err)
		}
		runs = append(runs, r)
	}
	return recordTable(runs), nil
}

// recordTable is the scenario's report: one row per size and schedule.
func recordTable(runs []recordRun) table {
	t := table{title: fmt.Sprintf("Rollout record in etcd: %d DaemonSets per node, synthetic rollouts on a real API server", recordDaemonSets)}
	for _, r := range runs {
		name := fmt.Sprintf("%s nodes, %s", thousands(r.Nodes), r.Schedule)
		if r.Padded {
			name += fmt.Sprintf(", in-flight entries %d B larger", recordPad)
		}
		loads := slices.Clone(r.Loads)
		slices.Sort(loads)
		exact := "read back exactly"
		if !r.Exact {
			exact = "**read back differs**"
		}
		t.rows = append(t.rows,
			row{name + ": stored per node and rollout (data alone)", fmt.Sprintf("%.0f B (%.0f B)", r.perNode(), float64(r.DataBytes)/float64(r.Nodes*r.DaemonSets)),
				"", "", fmt.Sprintf("≤ %d B", recordPerNodeTarget), verdict(r.perNode() <= recordPerNodeTarget && r.Exact)},
			row{name + ": writes, merges, deletions; largest single write", fmt.Sprintf("%s, %s, %s; %s", thousands(r.Writes), thousands(r.Merges),
				thousands(r.Deletes), kib(int64(r.LargestWrite))), "", "", "", ""},
			row{name + ": most stored in one 5-minute window (writes, deletions)", fmt.Sprintf("%s (%s, %s)", mib(r.Window), thousands(r.WindowWrites), thousands(r.WindowDeletes)),
				"etcd's default quota 2 GiB", fmt.Sprintf("%.4f×", float64(r.Window)/etcdDefaultQuota), "", ""},
			row{name + ": at the end, ConfigMaps; a fresh informer's heap; Load of one DaemonSet's record, median (slowest)",
				fmt.Sprintf("%s; %s; %s (%s), %s", thousands(r.ConfigMaps), kib(r.InformerHeap), millis(loads[len(loads)/2]), millis(loads[len(loads)-1]), exact), "", "", "", ""},
			row{name + ": etcd's own count of what was put, keys included (puts, deletions); its database at the end (in use)",
				fmt.Sprintf("%s (%s, %s); %s (%s)", mib(int64(r.EtcdPutBytes)), thousands(int(r.EtcdPuts)), thousands(int(r.EtcdDeletes)),
					mib(int64(r.EtcdDB)), mib(int64(r.EtcdDBInUse))), mib(r.StoredBytes) + " stored by the stores", "", "", ""},
			row{name + ": the rollouts' clock; the API server's", fmt.Sprintf("%s; %s", r.Simulated.Round(time.Minute), r.Real.Round(time.Second)),
				"", "", "", ""},
		)
		if r.Rewrites > 0 {
			t.rows = append(t.rows, row{name + ": own writes taken for someone else's", strconv.Itoa(r.Rewrites), "", "", "0", verdict(false)})
		}
	}
	t.notes = []string{
		"every figure is the record's alone: a throwaway etcd (quota 4 GiB, no fsync: bytes and counts are the figures, not latency) and kube-apiserver with no other client; four DaemonSets roll out at once over every node, each record through its own record.Store and one informer of the records' metadata, as the controller's",
		"stored: each ConfigMap created, serialised as the API server stores it (protobuf, metadata and managedFields included), as edgeota_controller_record_stored_bytes_total counts it; data alone: edgeota_controller_record_bytes_written_total. A deletion stores its key alone (not counted in stored; etcd's counts are)",
		"a 5-minute window of the rollouts' clock is what etcd holds between two of kube-apiserver's compactions (--etcd-compaction-interval, 5 minutes): compaction frees those pages for reuse, the database file shrinks only with a defrag",
		"schedules: waves (max-unavailable 10 %, each node settling at its Lease's renewal 1–13 s after its deletion), single (one node at a time, the same turn), ota (a fifth of the fleet offered every 30 minutes, each owner upgrading within 4 hours); the clock skips from event to event",
		"Load: one DaemonSet's record read from the API server and replayed, as a controller starting or building a rollout; read back exactly: every entry and the meta equal to the ledger's",
	}
	return t
}

// thousands formats n with commas.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func joinInts(ns []int) string {
	return strings.Join(pick(ns, strconv.Itoa), ",")
}

// runRecordChild is the record scenario's child: every size and schedule,
// one JSON line of figures each on standard output.
func runRecordChild(args []string) error {
	fs := flag.NewFlagSet(recordCommand, flag.ContinueOnError)
	server := fs.String("server", "", "the API server's URL")
	token := fs.String("token", "", "a bearer token of the API server")
	etcd := fs.String("etcd", "", "etcd's client URL, for its metrics")
	nodes := fs.String("nodes", "", "the fleet sizes, comma separated")
	padded := fs.String("padded", "", "the fleet sizes also measured with larger in-flight entries")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sizes, err := parseInts(*nodes)
	if err != nil {
		return fmt.Errorf("-nodes: %w", err)
	}
	pads, err := parseInts(*padded)
	if err != nil {
		return fmt.Errorf("-padded: %w", err)
	}
	config := &rest.Config{Host: *server, BearerToken: *token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: -1}
	client, err := kube.NewForConfig(config)
	if err != nil {
		return err
	}
	admin, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: recordNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", recordNamespace, err)
	}
	bench := &recordBench{client: client, admin: admin, etcd: *etcd}
	for _, n := range sizes {
		for _, padded := range []bool{false, true} {
			if padded && !slices.Contains(pads, n) {
				continue
			}
			for _, schedule := range recordSchedules {
				fmt.Fprintf(os.Stderr, "record: %d nodes, %s, padded %v\n", n, schedule, padded)
				r, err := bench.run(ctx, n, schedule, padded)
				if err != nil {
					return fmt.Errorf("%d nodes, %s: %w", n, schedule, err)
				}
				if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 10 {
			return nil, fmt.Errorf("%q: want integers of at least 10", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// recordNamespace is where the record scenario's records live, as the
// controller's default.
const recordNamespace = "edgeota-system"

// recordBench is the child's API server.
type recordBench struct {
	client kube.Interface
	admin  kubernetes.Interface
	etcd   string
}

// run replays one schedule at one size over recordDaemonSets DaemonSets at
// once and measures what their records cost.
func (b *recordBench) run(ctx context.Context, n int, schedule string, padded bool) (recordRun, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	before, err := b.etcdMetrics(ctx)
	if err != nil {
		return recordRun{}, err
	}
	inf := recordstore.NewInformer(b.client, recordNamespace)
	runs := make([]*dsReplay, recordDaemonSets)
	for i := range runs {
		runs[i] = newReplay(b.client, inf.GetIndexer(), i, n, schedule, padded)
	}
	var rewrites atomic.Int64
	observe := func(obj any, deleted bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		cm, ok := obj.(*recordstore.Cached)
		if !ok {
			return
		}
		for _, d := range runs {
			if _, again := d.store.Observe(cm, deleted); again {
				rewrites.Add(1)
			}
			if deleted && cm.Labels[recordstore.Label] == string(d.uid) {
				d.deleted(cm.Name)
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { observe(obj, false) },
		UpdateFunc: func(_, obj any) { observe(obj, false) },
		DeleteFunc: func(obj any) { observe(obj, true) },
	}); err != nil {
		return recordRun{}, err
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return recordRun{}, errors.New("the records' informer did not sync")
	}
	start := time.Now()
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, d := range runs {
		wg.Go(func() { errs[i] = d.replay(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return recordRun{}, err
	}
	r := recordRun{Nodes: n, DaemonSets: recordDaemonSets, Schedule: schedule, Padded: padded, Real: time.Since(start), Exact: true}
	// The deletions the stores made come back through the informer.
	time.Sleep(2 * time.Second)
	windows := map[int64]*windowFigures{}
	for _, d := range runs {
		d.mu.Lock()
		r.Writes += d.writes
		r.Merges += d.merges
		r.Deletes += d.deletes
		r.DataBytes += d.data
		r.StoredBytes += d.stored
		r.KeyBytes += d.keyBytes
		r.LargestWrite = max(r.LargestWrite, d.largest)
		r.Simulated = max(r.Simulated, d.clock().Sub(replayStart))
		for w, f := range d.windows {
			if windows[w] == nil {
				windows[w] = &windowFigures{}
			}
			windows[w].add(f)
		}
		d.mu.Unlock()
	}
	for _, f := range windows {
		if f.stored > r.Window {
			r.Window, r.WindowWrites, r.WindowDeletes = f.stored, f.writes, f.deletes
		}
	}
	r.Rewrites = int(rewrites.Load())
	after, err := b.etcdMetrics(ctx)
	if err != nil {
		return recordRun{}, err
	}
	r.EtcdPutBytes = after.Gauge("etcd_debugging_mvcc_total_put_size_in_bytes") - before.Gauge("etcd_debugging_mvcc_total_put_size_in_bytes")
	r.EtcdPuts = after.Sum("etcd_mvcc_put_total", nil) - before.Sum("etcd_mvcc_put_total", nil)
	r.EtcdDeletes = after.Sum("etcd_mvcc_delete_total", nil) - before.Sum("etcd_mvcc_delete_total", nil)
	r.EtcdDB, r.EtcdDBInUse = after.Gauge("etcd_mvcc_db_total_size_in_bytes"), after.Gauge("etcd_mvcc_db_total_size_in_use_in_bytes")
	r.ConfigMaps = len(inf.GetStore().List())
	cancel()
	if r.InformerHeap, err = b.informerHeap(); err != nil {
		return recordRun{}, err
	}
	for _, d := range runs {
		took, exact, err := d.loadBack(context.Background())
		if err != nil {
			return recordRun{}, err
		}
		r.Loads = append(r.Loads, took)
		r.Exact = r.Exact && exact
	}
	err = b.admin.CoreV1().ConfigMaps(recordNamespace).DeleteCollection(context.Background(), metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: recordstore.Label})
	return r, err
}

// informerHeap is the heap a fresh informer of the records holds once
// synced, as a controller starting up builds it.
func (b *recordBench) informerHeap() (int64, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := liveHeap()
	inf := recordstore.NewInformer(b.client, recordNamespace)
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return 0, errors.New("a fresh informer of the records did not sync")
	}
	held := int64(liveHeap()) - int64(base)
	runtime.KeepAlive(inf)
	return held, nil
}

// etcdMetrics scrapes etcd's metrics.
func (b *recordBench) etcdMetrics(ctx context.Context) (measure.Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.etcd+"/metrics", nil)
	if err != nil {
		return measure.Metrics{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return measure.Metrics{}, fmt.Errorf("scraping etcd: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return measure.Metrics{}, err
	}
	return measure.ParseMetrics(body)
}

// windowFigures are what one 5-minute window of the clock took.
type windowFigures struct {
	stored          int64
	writes, deletes int
}

func (w *windowFigures) add(o *windowFigures) {
	w.stored += o.stored
	w.writes += o.writes
	w.deletes += o.deletes
}

// replayStart is when every replay's clock starts.
var replayStart = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// dsReplay is one DaemonSet's rollout replayed into its record.
type dsReplay struct {
	uid      types.UID
	key      string
	target   decision.Target
	n        int
	schedule string
	padded   bool
	rng      *mrand.Rand
	client   kube.Interface
	store    *recordstore.Store
	rec      *recordstore.Record
	// now is the replay's clock (unix nanoseconds), read by the store and
	// by the informer's handler.
	now atomic.Int64
	// merging: the store's creates now are a merge's.
	merging bool
	// wake is when the store's paced writes are due (zero: none wait).
	wake time.Time
	// pods are each node's old pod's UID.
	pods []types.UID

	mu                      sync.Mutex
	writes, merges, deletes int
	data, stored, keyBytes  int64
	largest                 int
	windows                 map[int64]*windowFigures
}

func newReplay(client kube.Interface, indexer cache.Indexer, i, n int, schedule string, padded bool) *dsReplay {
	d := &dsReplay{uid: uuid.NewUUID(), key: fmt.Sprintf("bench/ds-%d", i), target: decision.Target{Hash: "5d4c8b9f7", Number: 2},
		n: n, schedule: schedule, padded: padded, rng: mrand.New(mrand.NewPCG(uint64(i), uint64(n))), client: client,
		windows: map[int64]*windowFigures{}, pods: make([]types.UID, n)}
	for i := range d.pods {
		d.pods[i] = uuid.NewUUID()
	}
	d.now.Store(replayStart.UnixNano())
	d.store = recordstore.NewStore(client, recordNamespace, indexer, controller.FieldManager, d.written, nil, d.clock, klog.Background())
	return d
}

func (d *dsReplay) clock() time.Time { return time.Unix(0, d.now.Load()).UTC() }

// clockWindow is the 5-minute window of the clock t falls in.
func clockWindow(t time.Time) int64 { return int64(t.Sub(replayStart) / compactionWindow) }

// written is the store's hook: one ConfigMap created.
func (d *dsReplay) written(data, stored int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.merging {
		d.merges++
	} else {
		d.writes++
	}
	d.data += int64(data)
	d.stored += int64(stored)
	d.largest = max(d.largest, stored)
	w := d.windowOf(d.clock())
	w.stored += int64(stored)
	w.writes++
}

// deleted counts a deletion of one of the record's ConfigMaps, its etcd key
// with it.
func (d *dsReplay) deleted(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deletes++
	d.keyBytes += int64(len("/registry/configmaps/" + recordNamespace + "/" + name))
	d.windowOf(d.clock()).deletes++
}

func (d *dsReplay) windowOf(t time.Time) *windowFigures {
	w := clockWindow(t)
	if d.windows[w] == nil {
		d.windows[w] = &windowFigures{}
	}
	return d.windows[w]
}

// replayNode is the name of node i.
func replayNode(i int) string { return fmt.Sprintf("edge-node-%06d", i) }

// replay runs the schedule on the record, from a record new to the
// controller to every node settled and the last merge made.
func (d *dsReplay) replay(ctx context.Context) error {
	var err error
	if d.rec, _, err = d.store.Load(ctx, d.uid, d.key, d.target, nil); err != nil {
		return err
	}
	switch d.schedule {
	case "waves":
		err = d.rolling(ctx, (d.n+9)/10)
	case "single":
		err = d.rolling(ctx, 1)
	case "ota":
		err = d.ota(ctx)
	default:
		err = fmt.Errorf("no schedule %q", d.schedule)
	}
	if err != nil {
		return err
	}
	// At rest: what waits for the pacing, then the merges it makes due.
	d.advance(d.clock().Add(controllerPace))
	if err := d.write(ctx); err != nil {
		return err
	}
	return d.compact(ctx)
}

// The simulated cluster's pace.
const (
	// controllerPace is how often the controller syncs a DaemonSet whose
	// pods change (controller.podEventBatch).
	controllerPace = 250 * time.Millisecond
	// deletionRate is the controller's deletions a second (its QPS).
	deletionRate = controller.DefaultKubeAPIQPS
	// leasePeriod is how often a kubelet renews its node's Lease: a proof of
	// life comes at the first renewal after the new pod is Ready.
	leasePeriod = 10 * time.Second
)

// turn is how long after its old pod's deletion a node proves its new pod:
// the new pod Ready 1-3 s later, then its Lease's next renewal.
func (d *dsReplay) turn() time.Duration {
	ready := time.Second + time.Duration(d.rng.Int64N(int64(2*time.Second)))
	return ready + time.Duration(d.rng.Int64N(int64(leasePeriod)))
}

// advance moves the clock to t (never back).
func (d *dsReplay) advance(t time.Time) {
	if t.After(d.clock()) {
		d.now.Store(t.UnixNano())
	}
}

// at is the record's time now, in whole seconds as the ledger keeps them.
func (d *dsReplay) at() *metav1.Time { return &metav1.Time{Time: d.clock().Truncate(time.Second)} }

// pad is the padding of an in-flight entry in the padded runs: random hex,
// as container IDs are.
func (d *dsReplay) pad() string {
	if !d.padded {
		return ""
	}
	b := make([]byte, recordPad/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// The entries, as package decision writes them (TakeAhead, Taken, the
// judge's settled and in-flight ones, an offer). Reason stands for the
// fields an in-flight entry may gain, in the padded runs.
func (d *dsReplay) ahead(i int, offered *metav1.Time) decision.Entry {
	return decision.Entry{Stage: decision.StageInFlight, Pod: d.pods[i], OfferedAt: offered, Reason: d.pad()}
}

func (d *dsReplay) taken(i int, offered *metav1.Time) decision.Entry {
	return decision.Entry{Stage: decision.StageInFlight, Pod: d.pods[i], Since: d.at(), OfferedAt: offered, Reason: d.pad()}
}

func (d *dsReplay) settled(offered *metav1.Time) decision.Entry {
	return decision.Entry{Stage: decision.StageSettled, At: d.at(), OfferedAt: offered, Proof: decision.ProofHeartbeat}
}

// write is the controller's write of the record (Store.Write), its pacing
// remembered.
func (d *dsReplay) write(ctx context.Context) error {
	wait, err := d.store.Write(ctx, d.rec)
	if wait > 0 {
		d.wake = d.clock().Add(wait)
	} else {
		d.wake = time.Time{}
	}
	return err
}

// compact is the controller's background merges (Store.Compact).
func (d *dsReplay) compact(ctx context.Context) error {
	d.mu.Lock()
	d.merging = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.merging = false
		d.mu.Unlock()
	}()
	return d.store.Compact(ctx, d.rec)
}

// writeRecord is the sync's write (controller.writeRecord): at once when
// urgent or offers wait for it, else in the background unless the decision
// deletes pods, whose own write follows them.
func (d *dsReplay) writeRecord(ctx context.Context, now, deleting bool) error {
	switch pending, urgent := d.rec.Pending(); {
	case urgent || pending && now:
		if err := d.write(ctx); err != nil {
			return err
		}
		if d.rec.CompactDue() {
			return d.compact(ctx)
		}
	case pending && !deleting:
		if err := d.write(ctx); err != nil {
			return err
		}
		return d.compact(ctx)
	}
	return nil
}

// rolling is AdvancedRollingUpdate with a budget: at each sync, the nodes
// whose proof came settle, the freed budget takes the next nodes (written
// ahead, as the decision writes the next budget's worth ahead), their
// deletions go at the controller's QPS, and the write after them carries
// their clocks.
func (d *dsReplay) rolling(ctx context.Context, budget int) error {
	settleAt := map[int]time.Time{}
	next, ahead, settled := 0, 0, 0
	for settled < d.n {
		now := d.clock()
		for i, t := range settleAt {
			if !t.After(now) {
				d.rec.Ledger.Set(replayNode(i), d.settled(nil), false)
				delete(settleAt, i)
				settled++
			}
		}
		takes := min(budget-len(settleAt), d.n-next)
		// The decision writes ahead the nodes it takes next, as many as
		// the budget and those taken now.
		for ; ahead < min(next+budget+takes, d.n); ahead++ {
			d.rec.Ledger.Set(replayNode(ahead), d.ahead(ahead, nil), false)
		}
		if err := d.writeRecord(ctx, false, takes > 0); err != nil {
			return err
		}
		if takes > 0 {
			if err := d.take(ctx, next, takes, settleAt); err != nil {
				return err
			}
			next += takes
		}
		// The next sync: the next proof, or the paced write.
		wake := time.Time{}
		for _, t := range settleAt {
			if wake.IsZero() || t.Before(wake) {
				wake = t
			}
		}
		if !d.wake.IsZero() && (wake.IsZero() || d.wake.Before(wake)) {
			wake = d.wake
		}
		if wake.IsZero() {
			break
		}
		d.advance(nextSync(now, wake))
	}
	return nil
}

// take is the controller's deleteOldPods for nodes [first, first+n): what
// is not written ahead is written first; the deletions go at the QPS; the
// write after them carries their clocks.
func (d *dsReplay) take(ctx context.Context, first, n int, settleAt map[int]time.Time) error {
	durable := true
	for i := first; i < first+n; i++ {
		durable = durable && d.rec.Durable(replayNode(i))
	}
	if !durable {
		if err := d.write(ctx); err != nil {
			return err
		}
	}
	now := d.clock()
	for i := first; i < first+n; i++ {
		d.rec.Ledger.Set(replayNode(i), d.taken(i, nil), false)
		deleted := now.Add(time.Duration(i-first) * time.Second / deletionRate)
		settleAt[i] = deleted.Add(d.turn())
	}
	d.advance(now.Add(time.Duration(n) * time.Second / deletionRate))
	if err := d.write(ctx); err != nil {
		return err
	}
	return d.compact(ctx)
}

// ota is an OTA rollout: a fifth of the fleet offered every 30 minutes
// (the partition raised step by step), each owner upgrading within 4 hours
// of its offer; an upgrade seen (its old pod terminating) is written at
// once, its proof settles it.
func (d *dsReplay) ota(ctx context.Context) error {
	const steps, stepEvery, spread = 5, 30 * time.Minute, 4 * time.Hour
	events := &otaEvents{}
	for s := range steps {
		heap.Push(events, otaEvent{at: replayStart.Add(time.Duration(s) * stepEvery), node: s, kind: otaOffer})
	}
	offeredAt := make([]*metav1.Time, d.n)
	var woken time.Time
	for events.Len() > 0 {
		now := (*events)[0].at
		d.advance(now)
		offers := false
		for events.Len() > 0 && !(*events)[0].at.After(now) {
			e := heap.Pop(events).(otaEvent)
			switch e.kind {
			case otaOffer:
				for i := e.node * d.n / steps; i < (e.node+1)*d.n/steps; i++ {
					offeredAt[i] = d.at()
					d.rec.Ledger.Set(replayNode(i), decision.Entry{Stage: decision.StageOffered, OfferedAt: offeredAt[i]}, false)
					upgrade := now.Add(time.Duration(d.rng.Int64N(int64(spread)))).Truncate(controllerPace)
					heap.Push(events, otaEvent{at: upgrade, node: i, kind: otaUpgrade})
				}
				offers = true
			case otaUpgrade:
				d.rec.Ledger.Set(replayNode(e.node), d.taken(e.node, offeredAt[e.node]), true)
				heap.Push(events, otaEvent{at: now.Add(d.turn()).Truncate(controllerPace), node: e.node, kind: otaSettle})
			case otaSettle:
				d.rec.Ledger.Set(replayNode(e.node), d.settled(offeredAt[e.node]), false)
			}
		}
		if err := d.writeRecord(ctx, offers, false); err != nil {
			return err
		}
		if !d.wake.IsZero() && !d.wake.Equal(woken) {
			// The paced write's sync.
			woken = d.wake
			heap.Push(events, otaEvent{at: nextSync(now, d.wake), kind: otaWake})
		}
	}
	return nil
}

// otaEvent is something that happens to an OTA rollout.
type otaEvent struct {
	at   time.Time
	node int
	kind int
}

// The kinds of otaEvent.
const (
	otaOffer   = iota // a step of the partition: node is its index
	otaUpgrade        // the node's owner upgrades: its old pod terminates
	otaSettle         // the node proves its new pod
	otaWake           // a paced write is due
)

// otaEvents is a heap of events by time.
type otaEvents []otaEvent

func (h otaEvents) Len() int           { return len(h) }
func (h otaEvents) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h otaEvents) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *otaEvents) Push(x any)        { *h = append(*h, x.(otaEvent)) }
func (h *otaEvents) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// nextSync is the sync that sees what happens at t, on the controller's
// batching grid after now.
func nextSync(now, t time.Time) time.Time {
	next := now.Add(controllerPace)
	if t.After(next) {
		steps := math.Ceil(float64(t.Sub(now)) / float64(controllerPace))
		next = now.Add(time.Duration(steps) * controllerPace)
	}
	return next
}

// loadBack loads the record as a restarted controller would and reports how
// long it took and whether it holds exactly what the ledger holds.
func (d *dsReplay) loadBack(ctx context.Context) (time.Duration, bool, error) {
	store := recordstore.NewStore(d.client, recordNamespace, cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		controller.FieldManager, nil, nil, d.clock, klog.Background())
	start := time.Now()
	r, _, err := store.Load(ctx, d.uid, d.key, d.target, nil)
	took := time.Since(start)
	if err != nil {
		return 0, false, err
	}
	got, want := r.Ledger.Entries(), d.rec.Ledger.Entries()
	exact := len(got) == len(want) && sameJSON(r.Ledger.Meta(), d.rec.Ledger.Meta())
	for k, e := range want {
		exact = exact && sameJSON(got[k], e)
	}
	return took, exact, nil
}

// sameJSON reports whether a and b encode alike: as the record writes them.
func sameJSON(a, b any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(x) == string(y)
}
