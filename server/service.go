package server

import (
	"sync/atomic"
	"time"

	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/ownerauth"
)

// FieldManager names the agent's writes in the pods' managedFields, so that
// its condition and the controller's never contend for ownership.
const FieldManager = "edgeota-ota-server"

// DefaultAPIServerTimeout bounds each live call to the API server, so that a
// cut-off node answers 503 promptly instead of hanging its caller.
const DefaultAPIServerTimeout = 5 * time.Second

// Server implements edgeota.v1.OTAService for the pods bound to one node. It
// reads from an informer cache restricted to that node, so listing costs no
// API request and keeps working while the API server is out of reach; it
// calls the API server only to act (Upgrade, ImagePull, Hold, ReleaseHold).
type Server struct {
	edgeotav1.UnimplementedOTAServiceServer

	nodeName    string
	client      Client
	lister      corelisters.PodLister
	synced      cache.InformerSynced
	lastContact func() time.Time
	generation  func() uint64
	apiTimeout  time.Duration
	auth        ownerauth.Authenticator
	clock       *APIServerClock
	// identity is who the agent is to the API server (nil: not said, the
	// client as given).
	identity *APIIdentity
	// stored is the view a previous run kept on disk, served until the cache
	// syncs; nil if none.
	stored *storedView
	// queue holds the actions queued while the API server is unreachable;
	// nil refuses queuing (no state directory).
	queue *ActionQueue

	// lastList is the most recent ListPods answer, reused while the cache's
	// generation stays the same.
	lastList atomic.Pointer[podList]

	// upgrades is the owner's view (ListUpgrades, WatchUpgrades), kept
	// current by Serve.
	upgrades *upgradeView
	// answers answers the controller's proof-of-life challenges, once
	// AnswerChallenges runs.
	answers *Answerer
}

// Options configures New; the zero value is the agent without authentication,
// persistence or queuing.
type Options struct {
	// APITimeout bounds each live API call; zero means
	// DefaultAPIServerTimeout.
	APITimeout time.Duration
	// Auth says who may call what; NewHandler enforces it on every call, and a
	// queued action's caller must still pass it when the action runs.
	Auth ownerauth.Authenticator
	// Clock tells the API server's time (nil: the node's).
	Clock *APIServerClock
	// Identity, when set, is who the agent is to the API server, shown by
	// /readyz and /metrics; the Client passed to New is normally this very
	// APIIdentity.
	Identity *APIIdentity
	// Queue keeps actions asked for with queue_if_offline while the API
	// server is unreachable (see NewActionQueue); nil refuses them.
	Queue *ActionQueue
	// Upgrades configures the owner's view (ListUpgrades, WatchUpgrades).
	Upgrades UpgradeOptions
}

// New returns a Server for nodeName that reads pods from pods (see
// NewPodCache) and acts through client.
func New(nodeName string, client Client, pods *PodCache, opts Options) *Server {
	if opts.APITimeout <= 0 {
		opts.APITimeout = DefaultAPIServerTimeout
	}
	s := &Server{
		nodeName:    nodeName,
		client:      client,
		lister:      corelisters.NewPodLister(pods.informer.GetIndexer()),
		synced:      pods.HasSynced,
		lastContact: pods.contact.last,
		generation:  pods.generation.Load,
		apiTimeout:  opts.APITimeout,
		auth:        opts.Auth,
		clock:       opts.Clock,
		identity:    opts.Identity,
		stored:      pods.stored,
		queue:       opts.Queue,
	}
	s.upgrades = newUpgradeView(s, opts.Upgrades)
	s.answers = newAnswerer(s, pods)
	pods.onChange(s.upgrades.changed)
	if s.queue != nil {
		s.queue.onChange(s.upgrades.changed)
	}
	return s
}
