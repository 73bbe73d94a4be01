package server

import (
	"sync/atomic"
	"time"

	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
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
// calls the API server only to act (Upgrade, ImagePull).
type Server struct {
	edgeotav1.UnimplementedOTAServiceServer

	nodeName    string
	client      Client
	lister      corelisters.PodLister
	synced      cache.InformerSynced
	lastContact func() time.Time
	generation  func() uint64
	apiTimeout  time.Duration

	// lastList is the most recent ListPods answer, reused while the cache's
	// generation stays the same.
	lastList atomic.Pointer[podList]

	// upgrades is the owner's view (ListUpgrades, WatchUpgrades), kept
	// current by Serve.
	upgrades *upgradeView
}

// New returns a Server for nodeName that reads pods from pods (see
// NewPodCache) and acts through client. apiTimeout bounds each live API call;
// zero means DefaultAPIServerTimeout.
func New(nodeName string, client Client, pods *PodCache, apiTimeout time.Duration) *Server {
	if apiTimeout <= 0 {
		apiTimeout = DefaultAPIServerTimeout
	}
	s := &Server{
		nodeName:    nodeName,
		client:      client,
		lister:      corelisters.NewPodLister(pods.informer.GetIndexer()),
		synced:      pods.HasSynced,
		lastContact: pods.contact.last,
		generation:  pods.generation.Load,
		apiTimeout:  apiTimeout,
	}
	s.upgrades = newUpgradeView(s, UpgradeOptions{})
	pods.onChange(s.upgrades.changed)
	return s
}

// SetUpgradeOptions configures the owner's view; call it before Serve.
func (s *Server) SetUpgradeOptions(opts UpgradeOptions) { s.upgrades.configure(opts) }
