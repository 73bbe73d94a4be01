package controller

import "k8s.io/client-go/tools/cache"

// A Store is one of the controller's caches as its informer keeps it: the
// indexer, with the controller's indexes and client-go's key function, and
// the transform the informer applies to each object the watch delivers
// before it stores it. The bench's cache scenario fills them to measure what
// the controller holds per pod and per node; NewInformers makes the
// informers' own with the same indexes and transforms.
type Store struct {
	Indexer   cache.Indexer
	Transform cache.TransformFunc
}

// NewDaemonPodStore returns an empty store of DaemonSet pods (podRecords).
func NewDaemonPodStore() Store {
	return Store{cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, daemonPodIndexers), TransformDaemonPod}
}

// NewNodeStore returns an empty store of Nodes (nodeRecords).
func NewNodeStore() Store {
	return Store{cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, nodeIndexers), Transform}
}

// Add stores obj as the informer would: transformed, then added.
func (s Store) Add(obj any) error {
	out, err := s.Transform(obj)
	if err != nil {
		return err
	}
	return s.Indexer.Add(out)
}
