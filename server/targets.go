package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/health"
	"github.com/edgeota/edgeota/statedir"
)

// RevisionReader reads one ControllerRevision by name: the only read of
// anything but the node's pods the agent makes, once per new target revision.
type RevisionReader interface {
	GetControllerRevision(ctx context.Context, namespace, name string) (*appsv1.ControllerRevision, error)
}

// NewRevisionReader returns a RevisionReader over apps/v1, JSON only, with
// only the apps/v1 types registered (see NewClient for why not client-go's
// clientset).
func NewRevisionReader(config *rest.Config) (RevisionReader, error) {
	scheme := runtime.NewScheme()
	if err := appsv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering apps/v1: %w", err)
	}
	c := rest.CopyConfig(config)
	c.GroupVersion = &appsv1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return restRevisions{rc}, nil
}

type restRevisions struct{ rest rest.Interface }

func (r restRevisions) GetControllerRevision(ctx context.Context, namespace, name string) (*appsv1.ControllerRevision, error) {
	cr := &appsv1.ControllerRevision{}
	err := r.rest.Get().Namespace(namespace).Resource("controllerrevisions").Name(name).Do(ctx).Into(cr)
	return cr, err
}

// revisionName is the name the DaemonSet controller gives the
// ControllerRevision of hash (k8s.io/kubernetes/pkg/controller/history's
// ControllerRevisionName): the DaemonSet's name, cut to 223 characters, a
// dash and the hash.
func revisionName(daemonSet, hash string) string {
	if len(daemonSet) > 223 {
		daemonSet = daemonSet[:223]
	}
	return daemonSet + "-" + hash
}

// targetKey names a target revision of one app.
type targetKey struct {
	Namespace string    `json:"namespace"`
	DaemonSet string    `json:"daemonSet"`
	Owner     types.UID `json:"owner"`
	Revision  string    `json:"revision"`
}

// targetInfo is what the agent knows of a target revision: its images, and
// the DaemonSet's progress deadline (zero: none set) when it was snapshotted.
type targetInfo struct {
	revision string
	images   map[string]string
	deadline time.Duration
}

// storedTarget is a resolved target as kept in the state directory.
type storedTarget struct {
	Key      targetKey         `json:"key"`
	Images   map[string]string `json:"images"`
	Deadline time.Duration     `json:"deadline,omitempty"`
}

// The state file of resolved targets and its format.
const (
	targetsFile    = "targets.json"
	targetsKind    = "TargetImages"
	targetsVersion = 1
)

// targets resolves the images of each app's target revision: at most one
// read in flight per revision, started after a random delay (so that a fleet
// offered a new version does not read at once), retried with backoff only
// while the API server fails, and kept — in memory and in the state directory
// — while the revision is offered, so that they are shown in a dead zone and
// after a restart without another read.
type targets struct {
	reader  RevisionReader
	dir     *statedir.Dir // nil: memory only
	jitter  time.Duration
	timeout time.Duration
	// changed is called when a target is resolved.
	changed func()

	mu      sync.Mutex
	ctx     context.Context // set by start; nil: reads wait for it
	known   map[targetKey]storedTarget
	pending map[targetKey]bool
}

// maxBackoff bounds the wait between failed reads of one revision.
const maxBackoff = 5 * time.Minute

func newTargets(reader RevisionReader, dir *statedir.Dir, jitter, timeout time.Duration, changed func()) *targets {
	return &targets{reader: reader, dir: dir, jitter: jitter, timeout: timeout, changed: changed,
		known: map[targetKey]storedTarget{}, pending: map[targetKey]bool{}}
}

// load reads the targets kept in the state directory. A missing, corrupt or
// unknown-version file is logged and ignored: the targets are read again.
func (t *targets) load(logger klog.Logger) {
	if t.dir == nil {
		return
	}
	var stored []storedTarget
	if err := t.dir.ReadJSON(targetsFile, targetsKind, targetsVersion, &stored); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			logger.Info("Ignoring the stored target images", "err", err)
		}
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range stored {
		t.known[s.Key] = s
	}
}

// start lets reads begin; they end with ctx.
func (t *targets) start(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ctx = ctx
}

// lookup returns what is known of the target, and schedules its read if
// nothing is and none is under way.
func (t *targets) lookup(key targetKey) targetInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.known[key]; ok {
		return targetInfo{revision: key.Revision, images: s.Images, deadline: s.Deadline}
	}
	if t.reader != nil && t.ctx != nil && !t.pending[key] {
		t.pending[key] = true
		go t.resolve(t.ctx, key)
	}
	return targetInfo{}
}

// retain forgets the targets no app is offered any more, on disk too.
func (t *targets) retain(offered map[targetKey]bool, logger klog.Logger) {
	t.mu.Lock()
	defer t.mu.Unlock()
	dropped := false
	for key := range t.known {
		if !offered[key] {
			delete(t.known, key)
			dropped = true
		}
	}
	if dropped {
		t.persistLocked(logger)
	}
}

// resolve reads the target's ControllerRevision after a random delay, and
// again with backoff while the API server fails. A revision that is not
// found, is refused or names another owner is not read again (until the
// agent restarts): the API server's answer would not change.
func (t *targets) resolve(ctx context.Context, key targetKey) {
	logger := klog.FromContext(ctx).WithValues("daemonSet", klog.KRef(key.Namespace, key.DaemonSet), "revision", key.Revision)
	delay := time.Duration(0)
	if t.jitter > 0 {
		delay = rand.N(t.jitter)
	}
	backoff := time.Second
	for {
		select {
		case <-ctx.Done():
			t.mu.Lock()
			delete(t.pending, key)
			t.mu.Unlock()
			return
		case <-time.After(delay):
		}
		info, err := t.read(ctx, key)
		if err == nil {
			t.mu.Lock()
			t.known[key] = info
			t.persistLocked(logger)
			delete(t.pending, key)
			t.mu.Unlock()
			logger.V(2).Info("Resolved the target images", "images", info.Images)
			t.changed()
			return
		}
		if errors.Is(err, errFinal) || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			// Left pending: not read again.
			logger.Info("Cannot resolve the target images", "err", err)
			return
		}
		logger.V(2).Info("Reading the target revision failed, will retry", "err", err, "after", backoff)
		delay = backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, maxBackoff)
	}
}

// errFinal marks a revision that was read but cannot serve.
var errFinal = errors.New("unusable revision")

// read makes the one API read of a target revision and checks that it is the
// app's.
func (t *targets) read(ctx context.Context, key targetKey) (storedTarget, error) {
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	cr, err := t.reader.GetControllerRevision(rctx, key.Namespace, revisionName(key.DaemonSet, key.Revision))
	if err != nil {
		return storedTarget{}, err
	}
	if owner := metav1.GetControllerOfNoCopy(cr); owner == nil || owner.UID != key.Owner || cr.Labels[revisionLabel] != key.Revision {
		return storedTarget{}, fmt.Errorf("%w: ControllerRevision %s is not revision %s of DaemonSet %s", errFinal,
			klog.KObj(cr), key.Revision, klog.KRef(key.Namespace, key.DaemonSet))
	}
	images, err := revisionImages(cr)
	if err != nil {
		return storedTarget{}, fmt.Errorf("%w: ControllerRevision %s: %v", errFinal, klog.KObj(cr), err)
	}
	s := storedTarget{Key: key, Images: images}
	if v, ok := cr.Annotations[health.ProgressDeadlineAnnotation]; ok {
		if d, err := health.ParseProgressDeadline(v); err == nil {
			s.Deadline = d
		} else {
			klog.FromContext(ctx).Info("Ignoring the DaemonSet's progress deadline", "err", err)
		}
	}
	return s, nil
}

// revisionImages decodes the pod template a DaemonSet's ControllerRevision
// holds (a patch of spec.template) into its images by container name.
func revisionImages(cr *appsv1.ControllerRevision) (map[string]string, error) {
	var data struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if len(cr.Data.Raw) == 0 {
		return nil, errors.New("no data")
	}
	if err := json.Unmarshal(cr.Data.Raw, &data); err != nil {
		return nil, fmt.Errorf("decoding its pod template: %w", err)
	}
	images := imagesOf(&data.Spec.Template.Spec)
	if len(images) == 0 {
		return nil, errors.New("its pod template has no containers")
	}
	return images, nil
}

// persistLocked writes the known targets to the state directory; a failure
// is logged (they are read again after a restart). Called with t.mu held;
// writes happen once per resolved or forgotten revision.
func (t *targets) persistLocked(logger klog.Logger) {
	if t.dir == nil {
		return
	}
	stored := make([]storedTarget, 0, len(t.known))
	for _, s := range t.known {
		stored = append(stored, s)
	}
	if err := t.dir.WriteJSON(targetsFile, targetsKind, targetsVersion, stored); err != nil {
		logger.Error(err, "Keeping the target images in the state directory")
	}
}
