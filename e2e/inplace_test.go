//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/imageref"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// The contract of upgrades in place, spelled as users' manifests spell it.
const (
	updateMethodAnnotation = "edgeota.io/update-method"
	inPlaceLabel           = "edgeota.io/in-place"
	// inPlacePolicy is deploy/'s ValidatingAdmissionPolicy that confines
	// the controller's pod patches to images and revision labels.
	inPlacePolicy = "edgeota-ota-controller-in-place-images-only"
)

// createInPlaceDaemonSet creates the test's DaemonSet asking for upgrades in
// place, its template opted in (the label), with the annotations, changed
// by change (nil: as it is), and waits for it on every node.
func (e *env) createInPlaceDaemonSet(annotations map[string]string, change func(*appsv1.DaemonSet)) {
	e.t.Helper()
	all := maps.Clone(annotations)
	all[updateMethodAnnotation] = "InPlaceIfPossible"
	e.createDaemonSetWith(all, func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Labels[inPlaceLabel] = "true"
		if change != nil {
			change(ds)
		}
	})
}

// patchTemplate applies a strategic merge patch to the DaemonSet's pod
// template.
func (e *env) patchTemplate(template string) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":%s}}`, template)
	if _, err := e.cluster.Client.AppsV1().DaemonSets(e.ns).Patch(e.ctx(), dsName, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("patching the template of DaemonSet %s with %s: %v", dsName, template, err)
	}
}

// livePods returns the DaemonSet's live pods by node, failing the test on
// an error.
func (e *env) livePods() map[string]*corev1.Pod {
	e.t.Helper()
	pods, err := e.podsByNode(e.ctx())
	if err != nil {
		e.t.Fatal(err)
	}
	return pods
}

// waitRevisionComplete waits until the rollout of a revision other than
// previous (its hash) is complete on every node, and returns its status.
func (e *env) waitRevisionComplete(what, previous string) rollout.Status {
	e.t.Helper()
	return e.waitRolloutStatus(what, func(s *rollout.Status) bool { return s.Hash != previous && s.Complete() })
}

// expectUpgradedInPlace checks that every node of before runs the same pod
// after, upgraded in place to image: a new container ID, running and Ready,
// the kubelet having observed the pod's generation, one more restart.
func (e *env) expectUpgradedInPlace(before, after map[string]*corev1.Pod, image string) {
	e.t.Helper()
	for node, old := range before {
		p := after[node]
		switch {
		case p == nil:
			e.t.Errorf("node %s: no pod, want %s upgraded in place", node, old.Name)
		case p.UID != old.UID:
			e.t.Errorf("node %s: got pod %s (%s), want the same pod %s (%s): upgraded in place, not recreated", node, p.Name, p.UID, old.Name, old.UID)
		case !runsImage(p, image):
			e.t.Errorf("node %s: got image %s, want %s (or pinned to its digest)", node, imageOf(p), image)
		case p.Status.ObservedGeneration < p.Generation || p.Generation <= old.Generation:
			e.t.Errorf("node %s: got generation %d observed %d (before %d), want a new generation, observed", node, p.Generation, p.Status.ObservedGeneration, old.Generation)
		case len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].ContainerID == old.Status.ContainerStatuses[0].ContainerID:
			e.t.Errorf("node %s: got containers %+v, want a new container ID (was %s)", node, p.Status.ContainerStatuses, old.Status.ContainerStatuses[0].ContainerID)
		case !p.Status.ContainerStatuses[0].Ready || p.Status.ContainerStatuses[0].State.Running == nil:
			e.t.Errorf("node %s: got container %+v, want it running and Ready", node, p.Status.ContainerStatuses[0])
		case p.Status.ContainerStatuses[0].RestartCount != old.Status.ContainerStatuses[0].RestartCount+1:
			e.t.Errorf("node %s: got restart count %d, want %d", node, p.Status.ContainerStatuses[0].RestartCount, old.Status.ContainerStatuses[0].RestartCount+1)
		}
	}
}

// runsImage reports whether the pod's spec names image: its tag as the
// template writes it (a canary, or pinning off), or, pinned, its
// repository at the digest the local cluster's registry serves the tag by
// (edgeota.io/pin, on by default in place).
func runsImage(p *corev1.Pod, image string) bool {
	return imageOf(p) == image || imageOf(p) == imageref.Pinned(image, digestOf(localcluster.ImageID(image)))
}

// waitUpdatedNumberScheduled waits until the native DaemonSet controller
// counts n pods updated to the DaemonSet's template: it reads the revision
// labels an upgrade in place patches (its IsPodUpdated).
func (e *env) waitUpdatedNumberScheduled(n int32) {
	e.t.Helper()
	eventually(e.t, fmt.Sprintf("updatedNumberScheduled %d", n), func(ctx context.Context) (bool, string, error) {
		ds, err := e.cluster.Client.AppsV1().DaemonSets(e.ns).Get(ctx, dsName, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return ds.Status.UpdatedNumberScheduled == n && ds.Status.ObservedGeneration == ds.Generation,
			fmt.Sprintf("updatedNumberScheduled %d, observed generation %d of %d", ds.Status.UpdatedNumberScheduled, ds.Status.ObservedGeneration, ds.Generation), nil
	})
}

// TestInPlaceRollingUpdate is AdvancedRollingUpdate in place, with deploy/'s
// RBAC and admission policy in force and the controller on its own token:
// an image change upgrades every node in place (the same pods, new
// containers, the native controller counting them updated), a tag of the
// same digest too; an env change and `kubectl rollout restart` recreate,
// with the reason in the rollout status and an event; and the API server
// refuses the controller's identity every patch out of its scope.
//
// It runs alone (e2e/README.md): it applies deploy/ (or the chart) and its
// fixed names in edgeota-system.
func TestInPlaceRollingUpdate(t *testing.T) {
	const nodes = 3
	e := newEnv(t, nodes)
	if _, err := e.cluster.Kubectl(e.ctx(), "apply", "--server-side", "-k", filepath.Join(e.root, "deploy")); err != nil {
		t.Fatalf("applying deploy/: %v", err)
	}
	token, err := e.cluster.Token(e.ctx(), systemNamespace, controllerAccount, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := e.writeKubeconfig(controllerAccount, "", token)
	e.startControllerWith(harness.ControllerOptions{Kubeconfig: kubeconfig, LeaseNamespace: systemNamespace, Verbosity: 2})
	e.createInPlaceDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "2"}, nil)
	first := e.waitRolloutStatus("the first revision rolled out", func(s *rollout.Status) bool { return s.Complete() })

	before := e.livePods()
	e.setImage(newImage)
	upgraded := e.waitRevisionComplete("the image change rolled out in place", first.Hash)
	if upgraded.UpdateMethod != rollout.MethodInPlaceIfPossible || upgraded.Recreate != nil {
		t.Errorf("got method %q, recreate %+v; want InPlaceIfPossible and none recreated", upgraded.UpdateMethod, upgraded.Recreate)
	}
	after := e.livePods()
	e.expectUpgradedInPlace(before, after, newImage)
	e.waitUpdatedNumberScheduled(nodes)
	if n := len(e.waitEventsOf(rollout.ReasonUpdatedInPlace, nodes)); n != nodes {
		t.Errorf("got %d %s events, want %d", n, rollout.ReasonUpdatedInPlace, nodes)
	}
	if n := len(e.eventsOf(rollout.ReasonDeletedPod)); n != 0 {
		t.Errorf("got %d %s events, want none", n, rollout.ReasonDeletedPod)
	}

	t.Run("a tag of the same digest completes", func(t *testing.T) {
		retag := newImage + localcluster.RetagSuffix
		e.setImage(retag)
		e.waitRevisionComplete("the same digest under another tag rolled out in place", upgraded.Hash)
		again := e.livePods()
		e.expectUpgradedInPlace(after, again, retag)
		for node, p := range again {
			if got, was := p.Status.ContainerStatuses[0].ImageID, after[node].Status.ContainerStatuses[0].ImageID; got != was || got != localcluster.ImageID(retag) {
				t.Errorf("node %s: got imageID %s (was %s), want the same digest, %s", node, got, was, localcluster.ImageID(retag))
			}
		}
	})

	recreated := func(t *testing.T, what, template, reason string) {
		t.Helper()
		prev, err := e.rolloutStatus(e.ctx())
		if err != nil || prev == nil {
			t.Fatalf("reading the rollout status: %v", err)
		}
		old := e.livePods()
		e.patchTemplate(template)
		// The status shows the reason while nodes wait to be recreated (a
		// wave or two here), the event for good.
		e.waitRevisionComplete(what+" rolled out", prev.Hash)
		for node, p := range e.livePods() {
			if p.UID == old[node].UID {
				t.Errorf("node %s: got the same pod %s, want it recreated", node, p.Name)
			}
		}
		eventually(t, "an "+rollout.ReasonInPlaceNotPossible+" event naming "+reason, func(context.Context) (bool, string, error) {
			events := e.eventsOf(rollout.ReasonInPlaceNotPossible)
			return slices.ContainsFunc(events, func(ev corev1.Event) bool { return strings.Contains(ev.Message, reason) }), fmt.Sprint(eventMessages(events)), nil
		})
	}
	t.Run("an env change recreates", func(t *testing.T) {
		recreated(t, "an env change", `{"spec":{"containers":[{"name":"nginx","env":[{"name":"MODE","value":"edge"}]}]}}`, "container nginx: its env changed")
	})
	t.Run("kubectl rollout restart recreates", func(t *testing.T) {
		recreated(t, "a restart", fmt.Sprintf(`{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}`, time.Now().Format(time.RFC3339)),
			"the pod template's annotations changed")
	})

	t.Run("out-of-scope patches refused", func(t *testing.T) {
		client := clientFor(t, kubeconfig)
		pod := e.livePods()[localcluster.NodeName(1)]
		var stray []*corev1.Pod
		for _, ns := range []string{e.ns, "kube-system"} {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: ns, Labels: map[string]string{inPlaceLabel: "true"}},
				Spec: corev1.PodSpec{NodeName: localcluster.NodeName(1), Containers: []corev1.Container{{Name: "nginx", Image: oldImage}}}}
			if ns == e.ns {
				delete(p.Labels, inPlaceLabel) // not opted in, and no DaemonSet's
			}
			created, err := e.cluster.Client.CoreV1().Pods(ns).Create(e.ctx(), p, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			stray = append(stray, created)
		}
		refused := []struct {
			name  string
			pod   *corev1.Pod
			patch string
		}{
			{"another repository", pod, `{"spec":{"containers":[{"name":"nginx","image":"attacker/miner:1.19.5"}]}}`},
			{"a label", pod, `{"metadata":{"labels":{"owned":"yes"}}}`},
			{"the opt-in label removed", pod, `{"metadata":{"labels":{"edgeota.io/in-place":null}}}`},
			{"an annotation", pod, `{"metadata":{"annotations":{"owned":"yes"}}}`},
			{"the spec beyond images", pod, `{"spec":{"activeDeadlineSeconds":60}}`},
			{"a pod not opted in", stray[0], `{"spec":{"containers":[{"name":"nginx","image":"nginx:1.19.6"}]}}`},
			{"a pod in kube-system", stray[1], `{"spec":{"containers":[{"name":"nginx","image":"nginx:1.19.6"}]}}`},
		}
		for _, r := range refused {
			_, err := client.CoreV1().Pods(r.pod.Namespace).Patch(e.ctx(), r.pod.Name, types.StrategicMergePatchType, []byte(r.patch), metav1.PatchOptions{})
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), inPlacePolicy) {
				t.Errorf("%s: patching with the controller's token got %v, want Forbidden by %s", r.name, err, inPlacePolicy)
			}
		}
		allowed := `{"spec":{"containers":[{"name":"nginx","image":"nginx:1.19.6"}]},"metadata":{"labels":{"controller-revision-hash":"x"}}}`
		if _, err := client.CoreV1().Pods(e.ns).Patch(e.ctx(), pod.Name, types.StrategicMergePatchType, []byte(allowed), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("a new version of the same image and the revision label: got %v, want allowed", err)
		}
	})
}

// TestInPlaceCrashLoopHaltsAndRollsBack: a version that crash-loops, taken
// in place, fails its nodes and halts the rollout at max-failed; the
// rollback patches them back in place, the same pods all along.
func TestInPlaceCrashLoopHaltsAndRollsBack(t *testing.T) {
	t.Parallel()
	const nodes, budget = 4, 2
	e := newEnv(t, nodes)
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.createInPlaceDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: fmt.Sprint(budget)}, nil)
	first := e.waitRolloutStatus("the first revision rolled out", func(s *rollout.Status) bool { return s.Complete() })
	start := e.livePods()

	e.setImage(localcluster.CrashLoopImages[0])
	halted := e.waitRolloutStatus("the crash-looping version halted", func(s *rollout.Status) bool { return s.Hash != first.Hash && s.Halted })
	if halted.Failed.Count != budget {
		t.Errorf("got %d failed nodes, want %d (max-failed)", halted.Failed.Count, budget)
	}
	for _, node := range halted.Failed.Nodes {
		if why := halted.Failed.Reasons[node]; !strings.Contains(why, "CrashLoopBackOff") {
			t.Errorf("node %s failed for %q, want CrashLoopBackOff", node, why)
		}
	}
	e.expectStaysHalted(halted.Failed.Nodes, 3*time.Second)

	e.setImage(oldImage)
	e.waitRevisionComplete("the rollback rolled out", halted.Hash)
	for node, p := range e.livePods() {
		if p.UID != start[node].UID || !runsImage(p, oldImage) || !podcondition.IsTrue(&p.Status, corev1.PodReady) {
			t.Errorf("node %s: got pod %s (%s) on %s, want the same pod %s back on %s, Ready", node, p.Name, p.UID, imageOf(p), start[node].Name, oldImage)
		}
	}
}

// TestInPlaceCutOffMidPull: a node cut off while it pulls the image its pod
// was patched to (the kubelet killed the old container first, and cannot
// report) keeps its pod object, and counts as failed, as the brake says a
// node that drops off after its upgrade does; once back, its pull
// finishes and its new container starts, the same pod, and it stays failed.
//
// It runs alone (e2e/README.md): it models image pulls, whose simulator acts
// on every pod of its cluster.
func TestInPlaceCutOffMidPull(t *testing.T) {
	const nodes = 2
	cut := localcluster.NodeName(1)
	e := newEnvWith(t, harness.ClusterOptions{Nodes: nodes, NodeHeartbeat: nodeHeartbeat,
		ImagePulls: &localcluster.ImagePulls{Delay: 10 * time.Second, Preloaded: []string{oldImage}}})
	e.startController(e.cluster.Kubeconfig, "-v=2")
	e.createInPlaceDaemonSet(map[string]string{strategyAnnotation: "AdvancedRollingUpdate", maxUnavailableAnnotation: "1"}, nil)
	first := e.waitRolloutStatus("the first revision rolled out", func(s *rollout.Status) bool { return s.Complete() })
	before := e.livePods()

	e.setImage(newImage)
	eventually(t, "the patched pod on "+cut+" killed and pulling", func(ctx context.Context) (bool, string, error) {
		pods, err := e.podsByNode(ctx)
		if err != nil {
			return false, "", err
		}
		p := pods[cut]
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return false, "no pod", nil
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return imageOf(p) == newImage && w != nil && w.Reason == "ContainerCreating", fmt.Sprintf("%s: %+v", imageOf(p), p.Status.ContainerStatuses[0].State), nil
	})
	if err := e.cluster.CutOff(e.ctx(), cut); err != nil {
		t.Fatal(err)
	}
	halted := e.waitRolloutStatus("the cut-off node failed, the rollout halted", func(s *rollout.Status) bool { return s.Hash != first.Hash && s.Halted })
	if !slices.Equal(halted.Failed.Nodes, []string{cut}) || !strings.Contains(halted.Failed.Reasons[cut], "NotReady after the upgrade") {
		t.Errorf("got failed %+v, want %s NotReady after the upgrade", halted.Failed, cut)
	}
	pods := e.livePods()
	if p := pods[cut]; p == nil || p.UID != before[cut].UID {
		t.Errorf("got pod %v on %s, want its pod object kept (%s)", p, cut, before[cut].UID)
	}
	if imageOf(pods[localcluster.NodeName(2)]) != oldImage {
		t.Errorf("got %s on %s, want it untouched once halted", imageOf(pods[localcluster.NodeName(2)]), localcluster.NodeName(2))
	}
	consistently(t, "nothing of the upgrade on the cut-off node", 12*time.Second, func(ctx context.Context) (bool, string, error) {
		pods, err := e.podsByNode(ctx)
		if err != nil {
			return false, "", err
		}
		st := pods[cut].Status.ContainerStatuses[0]
		return st.State.Running == nil, fmt.Sprintf("%+v", st.State), nil
	})

	if err := e.cluster.Reconnect(e.ctx(), cut); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod on "+cut+" running its new container once back", func(ctx context.Context) (bool, string, error) {
		pods, err := e.podsByNode(ctx)
		if err != nil {
			return false, "", err
		}
		st := pods[cut].Status.ContainerStatuses[0]
		return st.State.Running != nil && st.Ready && st.ContainerID != before[cut].Status.ContainerStatuses[0].ContainerID, fmt.Sprintf("%+v", st), nil
	})
	if p := e.livePods()[cut]; p.UID != before[cut].UID {
		t.Errorf("got pod %s on %s, want the same pod", p.UID, cut)
	}
	if s := e.waitRolloutStatus("the status after the return", func(s *rollout.Status) bool { return true }); s.Failed.Count != 1 {
		t.Errorf("got %d failed, want %s to stay failed", s.Failed.Count, cut)
	}
}

// otactlResult is how an otactl run ended: its output and exit code (-1: it
// could not run, err says why).
type otactlResult struct {
	out  string
	code int
	err  error
}

// otactlAsync runs otactl against the agent in the background.
func (e *env) otactlAsync(a agent, args ...string) <-chan otactlResult {
	done := make(chan otactlResult, 1)
	ctx, cancel := context.WithTimeout(e.t.Context(), 5*time.Minute)
	go func() {
		defer cancel()
		cmd := exec.CommandContext(ctx, e.cluster.Tools.Path("otactl"), append([]string{"--server", a.addr}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
			done <- otactlResult{out: out.String()}
		case errors.As(err, &exit):
			done <- otactlResult{out: out.String(), code: exit.ExitCode()}
		default:
			done <- otactlResult{out: out.String(), code: -1, err: err}
		}
	}()
	return done
}

// TestInPlaceOTA: the owner's Upgrade of an in-place OTA DaemonSet is
// carried out by the controller (the agent writes the request: its 200
// means requested); while the patched pod pulls its new image the owner's
// view says UPGRADING and otactl --wait waits, returning once the new
// container runs; OpenYurt's delete-based upgrade on another node
// recreates its pod as before; the controller carries out the last offer
// in place at its deadline; and an env change is offered for recreation,
// the reason shown.
//
// It runs alone (e2e/README.md): it models image pulls, whose simulator acts
// on every pod of its cluster.
func TestInPlaceOTA(t *testing.T) {
	const nodes = 3
	e := newEnvWith(t, harness.ClusterOptions{Nodes: nodes, NodeHeartbeat: nodeHeartbeat,
		ImagePulls: &localcluster.ImagePulls{Delay: 5 * time.Second, Preloaded: []string{oldImage}}})
	owner, yurthub, late := localcluster.NodeName(1), localcluster.NodeName(2), localcluster.NodeName(3)
	e.startController(e.cluster.Kubeconfig, "-v=2")
	a := e.startAgent(owner, e.cluster.Kubeconfig)
	e.createInPlaceDaemonSet(map[string]string{strategyAnnotation: "OTA", maxUnavailableAnnotation: "3", rollout.UpgradeDeadlineAnnotation: "15"}, nil)
	e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionFalse, allNodes(nodes)...)
	first := e.waitRolloutStatus("the first revision", func(s *rollout.Status) bool { return s.Complete() })
	before := e.livePods()

	e.setImage(newImage)
	offered := e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, allNodes(nodes)...)
	for node, p := range offered {
		var offer struct {
			InPlace bool `json:"inPlace"`
		}
		if err := json.Unmarshal([]byte(p.Annotations[rollout.OfferAnnotation]), &offer); err != nil || !offer.InPlace {
			t.Errorf("node %s: got offer %s, want it to say in place", node, p.Annotations[rollout.OfferAnnotation])
		}
	}

	// The owner, through otactl: the agent writes the request, the
	// controller patches, the kubelet kills the old container and pulls.
	res := e.otactlAsync(a, "upgrade", e.ns+"/"+dsName, "--wait", "--timeout", "2m")
	eventually(t, "the owner's pod patched, pulling its new image", func(ctx context.Context) (bool, string, error) {
		p := e.livePods()[owner]
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return false, "no pod", nil
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return imageOf(p) == newImage && w != nil && w.Reason == "ContainerCreating", fmt.Sprintf("%s: %+v", imageOf(p), p.Status.ContainerStatuses[0].State), nil
	})
	select {
	case r := <-res:
		t.Fatalf("otactl upgrade --wait returned while the new image was being pulled: exit %d:\n%s", r.code, r.out)
	default:
	}
	list, err := e.grpcClient(a).ListUpgrades(e.ctx(), &edgeotav1.ListUpgradesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if app := findApp(list.GetApps()); app.GetPhase() != edgeotav1.UpgradePhase_UPGRADE_PHASE_UPGRADING {
		t.Errorf("ListUpgrades while pulling: got %v, want UPGRADING", app)
	}
	r := <-res
	if r.code != 0 || !strings.Contains(r.out, "Start updating pod") || !strings.Contains(r.out, "UPGRADED") {
		t.Fatalf("otactl upgrade --wait: got exit %d (%v):\n%s\nwant 0, the request's answer, then UPGRADED", r.code, r.err, r.out)
	}
	p := e.livePods()[owner]
	st := p.Status.ContainerStatuses[0]
	if p.UID != before[owner].UID || p.Status.ObservedGeneration < p.Generation || st.State.Running == nil || !st.Ready ||
		st.ContainerID == before[owner].Status.ContainerStatuses[0].ContainerID {
		t.Errorf("when otactl returned: got pod %s (%s), observed %d of %d, container %+v; want the same pod, observed, a new container running and Ready",
			p.Name, p.UID, p.Status.ObservedGeneration, p.Generation, st)
	}

	// OpenYurt's yurthub (or an older agent) deletes the pod: recreated.
	old := before[yurthub]
	if err := e.cluster.Client.CoreV1().Pods(e.ns).Delete(e.ctx(), old.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &old.UID}}); err != nil {
		t.Fatal(err)
	}

	// The last offer, carried out by the controller at its deadline, in
	// place.
	done := e.waitRevisionComplete("every node upgraded", first.Hash)
	after := e.livePods()
	if after[yurthub].UID == old.UID || imageOf(after[yurthub]) != newImage {
		t.Errorf("node %s: got pod %s (%s) on %s, want a new pod on %s", yurthub, after[yurthub].Name, after[yurthub].UID, imageOf(after[yurthub]), newImage)
	}
	e.expectUpgradedInPlace(map[string]*corev1.Pod{owner: before[owner], late: before[late]}, after, newImage)
	e.waitUpdatedNumberScheduled(nodes)

	// An env change recreates: offered as such, the reason shown.
	e.patchTemplate(`{"spec":{"containers":[{"name":"nginx","env":[{"name":"MODE","value":"edge"}]}]}}`)
	e.waitRolloutStatus("the env change offered for recreation", func(s *rollout.Status) bool {
		if s.Hash == done.Hash || s.Recreate == nil || s.Recreate.Count != nodes {
			return false
		}
		for why := range s.Recreate.Reasons {
			if strings.Contains(why, "env changed") {
				return true
			}
		}
		return false
	})
	for node, p := range e.waitCondition(podcondition.NeedUpgrade, corev1.ConditionTrue, allNodes(nodes)...) {
		if strings.Contains(p.Annotations[rollout.OfferAnnotation], `"inPlace":true`) {
			t.Errorf("node %s: got offer %s, want it not in place", node, p.Annotations[rollout.OfferAnnotation])
		}
	}
}
