package server

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
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

	nodeName   string
	client     kubernetes.Interface
	lister     corelisters.PodLister
	synced     cache.InformerSynced
	apiTimeout time.Duration
}

// New returns a Server for nodeName that reads pods from podInformer (see
// NewPodInformerFactory) and acts through client. apiTimeout bounds each live
// API call; zero means DefaultAPIServerTimeout.
func New(nodeName string, client kubernetes.Interface, podInformer coreinformers.PodInformer, apiTimeout time.Duration) *Server {
	if apiTimeout <= 0 {
		apiTimeout = DefaultAPIServerTimeout
	}
	return &Server{
		nodeName:   nodeName,
		client:     client,
		lister:     podInformer.Lister(),
		synced:     podInformer.Informer().HasSynced,
		apiTimeout: apiTimeout,
	}
}

// NewPodInformerFactory returns an informer factory whose pod informer watches
// only the pods bound to nodeName (field selector spec.nodeName), and drops
// managedFields before caching: the agent never reads them and they are most
// of a pod's size.
func NewPodInformerFactory(client kubernetes.Interface, nodeName string) informers.SharedInformerFactory {
	selector := fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	return informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }),
		informers.WithTransform(dropManagedFields))
}

func dropManagedFields(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		pod.ManagedFields = nil
	}
	return obj, nil
}
