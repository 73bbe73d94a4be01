package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/podchannel"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// answerBackoff spaces the attempts at an answer that could not be written
// (the API server out of reach, slow or failing): from a second, doubling,
// to about the period of a kubelet's Lease renewal, each with up to half
// again of jitter so that the nodes of a wave cut off at once do not retry
// in step. Beyond that period the Lease would prove the node first anyway.
var answerBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.5, Cap: 8 * time.Second, Steps: 1 << 30}

// The outcomes of an attempt at an answer, as edgeota_agent_alive_answers_total
// counts them.
const (
	// answerWritten: the API server took the answer.
	answerWritten = "written"
	// answerFailed: no answer, or a passing one (unreachable, timed out, a
	// 5xx, 429, 401 while the token is renewed): tried again with backoff
	// while the challenge stands.
	answerFailed = "failed"
	// answerRefused: the API server refused the write (RBAC, NodeRestriction,
	// the node-scope admission policy): not tried again for this challenge.
	answerRefused = "refused"
	// answerGone: the pod is gone or was replaced (404, 409, or its UID
	// no longer the pod's): nothing more to answer.
	answerGone = "gone"
)

// refusedAnswerLog is logged, as an error once per pod, when the API server
// refuses an answer, with refusedAnswerMeaning: what follows, and where to
// look.
const (
	refusedAnswerLog     = "The API server refused the agent's proof-of-life answer"
	refusedAnswerMeaning = "the controller proves the node by its next Lease renewal instead, one heartbeat later; " +
		"the agent must be allowed to patch the status of its node's pods: check its RBAC (pods/status: patch, or " +
		"impersonate-on:associated-node:patch acting as its node), NodeRestriction and the node-scope admission policy; " +
		"this challenge is not tried again, and further refusals for this pod are logged at -v=2"
)

// Answerer answers the controller's proof-of-life challenges on the pods of
// a pod cache (package podchannel: the challenge, rollout.ChallengeAnnotation,
// is echoed as the answer, rollout.AnswerAnnotation, on the same pod through
// its status, acting as the identity of the pod's node's agent). It reads
// only the live pod cache, never the stored view: an answer says the node
// reaches the API server now, so it is about the pod as the API server shows
// it now, and it is never queued to disk. The pod cache's event handler only
// names the pods to look at; the workers decide and write. The agent runs
// one (see Server.AnswerChallenges), so that there is never more than one
// write in flight, for a pod or for the node: the writes share one link, a
// node has a handful of DaemonSet pods, and a node coming back from a dead
// zone sends its answers one by one.
//
// It is exported so that one process can act as the agents of many
// simulated nodes with the very rule and retries of the agent (the
// benchmark's simulated agents): one cache of every node's pods, a client
// per node, more workers.
type Answerer struct {
	lister    corelisters.PodLister
	synced    cache.InformerSynced
	clientFor func(node string) Client
	timeout   time.Duration
	workers   int
	// queue names the pods to look at: it dedupes them and hands each to
	// one worker at a time.
	queue workqueue.TypedInterface[cache.ObjectName]
	// backoff is answerBackoff; tests shorten it.
	backoff wait.Backoff
	// results is edgeota_agent_alive_answers_total.
	results *prometheus.CounterVec

	// mu guards pods: what the workers know of each pod that carried a
	// challenge. A pod is looked at by one worker at a time (the queue's
	// promise), so its answerState is that worker's while it looks.
	mu   sync.Mutex
	pods map[cache.ObjectName]*answerState
}

// AnswererOptions configures NewAnswerer.
type AnswererOptions struct {
	// Pods is the informer whose pods' challenges are answered: the agent's
	// cache of its node's pods, or one cache of many nodes' pods. Its
	// events name the pods to look at; its store is read.
	Pods cache.SharedIndexInformer
	// Synced reports whether the live cache has synced: nothing is answered
	// before (nil: Pods.HasSynced).
	Synced cache.InformerSynced
	// ClientFor returns the client that writes the answers on the pods
	// bound to the node, acting as that node's agent; nil for a node not
	// answered for (not the agent's own). A node out of reach is a client
	// whose writes fail: its answers are tried again with backoff, as over
	// a cut link.
	ClientFor func(node string) Client
	// Timeout bounds each write (zero: DefaultAPIServerTimeout).
	Timeout time.Duration
	// Workers is how many pods are looked at, and answers written, at once
	// (zero: 1, the agent's).
	Workers int
}

// answerState is where the answer to one pod's challenge stands.
type answerState struct {
	// uid is the pod's: a namesake starts afresh.
	uid types.UID
	// challenge is the challenge last seen, answered or being answered.
	challenge string
	// ended: written, refused or the pod gone: nothing more for this
	// challenge, whatever events say (the cache may show the challenge
	// unanswered for a moment after the write).
	ended bool
	// retryAt is when a failed attempt is tried again: events before it do
	// not hurry it; backoff spaces the attempts.
	retryAt time.Time
	backoff wait.Backoff
	// refusalLogged: a refusal was logged for this pod, once.
	refusalLogged bool
}

// NewAnswerer returns an Answerer whose handler on opts.Pods names each pod
// that carries a challenge, and each pod deleted; Run answers.
func NewAnswerer(opts AnswererOptions) *Answerer {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultAPIServerTimeout
	}
	if opts.Synced == nil {
		opts.Synced = opts.Pods.HasSynced
	}
	a := &Answerer{
		lister:    corelisters.NewPodLister(opts.Pods.GetIndexer()),
		synced:    opts.Synced,
		clientFor: opts.ClientFor,
		timeout:   opts.Timeout,
		workers:   max(opts.Workers, 1),
		queue:     workqueue.NewTyped[cache.ObjectName](),
		backoff:   answerBackoff,
		results:   newAnswerMetric(),
		pods:      map[cache.ObjectName]*answerState{},
	}
	challenged := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok {
			if _, has := pod.Annotations[rollout.ChallengeAnnotation]; has {
				a.queue.Add(cache.MetaObjectToName(pod))
			}
		}
	}
	// Fails only once the informer has stopped.
	_, _ = opts.Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    challenged,
		UpdateFunc: func(_, obj any) { challenged(obj) },
		// The worker forgets the pod, and drops an answer pending for it.
		DeleteFunc: func(obj any) {
			if name, err := cache.DeletionHandlingObjectToName(obj); err == nil {
				a.queue.Add(name)
			}
		},
	})
	return a
}

// newAnswerer returns the answerer of the agent srv: its node's pods, one
// worker, its client.
func newAnswerer(srv *Server, pods *PodCache) *Answerer {
	return NewAnswerer(AnswererOptions{
		Pods:   pods.informer,
		Synced: func() bool { return srv.synced() },
		ClientFor: func(node string) Client {
			if node != srv.nodeName {
				return nil
			}
			return srv.client
		},
		Timeout: srv.apiTimeout,
	})
}

// Results is edgeota_agent_alive_answers_total, to register where the
// answers are reported.
func (a *Answerer) Results() prometheus.Collector { return a.results }

// newAnswerMetric is edgeota_agent_alive_answers_total, every outcome at zero
// from the start so that a fleet's dashboards see the series.
func newAnswerMetric() *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edgeota_agent_alive_answers_total",
		Help: "Attempts at answering the controller's proof-of-life challenges on the node's pods, by result: " +
			answerWritten + " (the API server took the answer), " + answerFailed + " (unreachable or a passing error: tried again with backoff), " +
			answerRefused + " (refused: RBAC, NodeRestriction or the admission policy; not tried again), " +
			answerGone + " (the pod was gone or replaced).",
	}, []string{"result"})
	for _, r := range []string{answerWritten, answerFailed, answerRefused, answerGone} {
		v.WithLabelValues(r)
	}
	return v
}

// AnswerChallenges answers the controller's proof-of-life challenges on the
// node's pods until ctx is done (see Answerer): once the pod cache has synced,
// each challenge the cache shows unanswered (podchannel.ToAnswer) gets one
// status write echoing it, retried with backoff while it cannot be written
// and the challenge stands.
func (s *Server) AnswerChallenges(ctx context.Context) { s.answers.Run(ctx) }

// Run answers challenges until ctx is done, with the workers asked for,
// once the live cache has synced: until then only a stored view is served,
// and nothing there proves anything about now. The pods named meanwhile
// wait.
func (a *Answerer) Run(ctx context.Context) {
	stop := context.AfterFunc(ctx, a.queue.ShutDown)
	defer stop()
	if !cache.WaitForCacheSync(ctx.Done(), a.synced) {
		return
	}
	var wg sync.WaitGroup
	for range a.workers {
		wg.Go(func() {
			for {
				name, shutdown := a.queue.Get()
				if shutdown || ctx.Err() != nil {
					return
				}
				a.lookSafely(ctx, name)
				a.queue.Done(name)
			}
		})
	}
	wg.Wait()
}

// lookSafely is look, surviving a panic (logged) so that answering never
// takes the agent down.
func (a *Answerer) lookSafely(ctx context.Context, name cache.ObjectName) {
	defer func() {
		if p := recover(); p != nil {
			klog.FromContext(ctx).Error(fmt.Errorf("panic: %v", p), "Answering a proof-of-life challenge", "pod", name, "stack", string(debug.Stack()))
		}
	}()
	a.look(ctx, name)
}

// look decides about the pod as the live cache shows it, and writes its
// answer if one is due.
func (a *Answerer) look(ctx context.Context, name cache.ObjectName) {
	pod, err := a.lister.Pods(name.Namespace).Get(name.Name)
	var client Client
	if err == nil && pod.Spec.NodeName != "" {
		client = a.clientFor(pod.Spec.NodeName)
	}
	a.mu.Lock()
	if client == nil {
		// Gone (the lister's only error is NotFound), or not a node answered
		// for: an answer pending for it is dropped.
		delete(a.pods, name)
		a.mu.Unlock()
		return
	}
	st := a.pods[name]
	if st == nil || st.uid != pod.UID {
		st = &answerState{uid: pod.UID}
		a.pods[name] = st
	}
	a.mu.Unlock()
	challenge, due := podchannel.ToAnswer(pod)
	if !due {
		// None, not this pod's, malformed, or answered as the cache shows.
		return
	}
	if challenge != st.challenge {
		// A new challenge: an answer pending for the old one is dropped, and
		// the backoff starts again.
		st.challenge, st.ended, st.retryAt, st.backoff = challenge, false, time.Time{}, a.backoff
	}
	if st.ended || time.Now().Before(st.retryAt) {
		return
	}
	a.write(ctx, client, name, pod, st)
}

// write sends the answer (the pod's UID as precondition) and acts on the
// outcome.
func (a *Answerer) write(ctx context.Context, client Client, name cache.ObjectName, pod *corev1.Pod, st *answerState) {
	logger := klog.FromContext(ctx)
	actx, cancel := context.WithTimeout(ctx, a.timeout)
	_, err := podcondition.Annotate(actx, client, pod, podcondition.Annotations{rollout.AnswerAnnotation: &st.challenge}, FieldManager)
	cancel()
	if ctx.Err() != nil {
		return // shutting down: neither an outcome nor a retry
	}
	outcome := answerOutcome(err)
	a.results.WithLabelValues(outcome).Inc()
	switch outcome {
	case answerWritten:
		st.ended = true
		logger.V(2).Info("Answered a proof-of-life challenge", "pod", klog.KObj(pod), "podUID", pod.UID)
	case answerGone:
		st.ended = true
		logger.V(2).Info("Not answering a proof-of-life challenge: the pod is gone or was replaced", "pod", klog.KObj(pod), "podUID", pod.UID, "err", err)
	case answerRefused:
		st.ended = true
		if !st.refusalLogged {
			st.refusalLogged = true
			logger.Error(err, refusedAnswerLog, "pod", klog.KObj(pod), "podUID", pod.UID, "meaning", refusedAnswerMeaning)
		} else {
			logger.V(2).Info(refusedAnswerLog+" again", "pod", klog.KObj(pod), "podUID", pod.UID, "err", err)
		}
	default:
		delay := st.backoff.Step()
		st.retryAt = time.Now().Add(delay)
		time.AfterFunc(delay, func() { a.queue.Add(name) })
		logger.V(2).Info("Could not answer a proof-of-life challenge, trying again later", "pod", klog.KObj(pod), "retryIn", delay, "err", err)
	}
}

// answerOutcome classes the error of an answer's write: definite 4xx answers
// end it (gone, or refused), anything else may pass and is tried again.
func answerOutcome(err error) string {
	var apiStatus apierrors.APIStatus
	switch {
	case err == nil:
		return answerWritten
	case apierrors.IsNotFound(err), apierrors.IsConflict(err), uidMismatch(err):
		return answerGone
	case !errors.As(err, &apiStatus):
		return answerFailed
	}
	switch code := apiStatus.Status().Code; {
	case code >= http.StatusInternalServerError, code < http.StatusBadRequest,
		code == http.StatusTooManyRequests, code == http.StatusRequestTimeout,
		// A bound token expired: the kubelet renews it, and client-go reads
		// the new one.
		code == http.StatusUnauthorized:
		return answerFailed
	}
	return answerRefused
}

// uidMismatch reports the API server's refusal of a status patch whose
// metadata.uid (the precondition) is not the pod's: a namesake replaced the
// pod. A patch has no UID precondition of its own: the UID is refused as an
// immutable field (422).
func uidMismatch(err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	var apiStatus apierrors.APIStatus
	if !errors.As(err, &apiStatus) || apiStatus.Status().Details == nil {
		return false
	}
	for _, c := range apiStatus.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}
