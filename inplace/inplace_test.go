package inplace

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/rollout"
)

// template is a DaemonSet pod template as the API server stores it (its
// defaults set): an app container, a native sidecar, a regular init
// container, opted in.
func template() *corev1.PodTemplateSpec {
	always := corev1.ContainerRestartPolicyAlways
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", rollout.InPlaceLabel: "true"},
			Annotations: map[string]string{"team": "edge"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{
				{Name: "setup", Image: "busybox:1.36", ImagePullPolicy: corev1.PullIfNotPresent},
				{Name: "proxy", Image: "envoy:1.30", ImagePullPolicy: corev1.PullIfNotPresent, RestartPolicy: &always},
			},
			Containers: []corev1.Container{
				{Name: "web", Image: "registry.example/web:1.0", ImagePullPolicy: corev1.PullIfNotPresent,
					Env: []corev1.EnvVar{{Name: "MODE", Value: "edge"}}},
				{Name: "metrics", Image: "registry.example/metrics:3", ImagePullPolicy: corev1.PullIfNotPresent},
			},
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			TerminationGracePeriodSeconds: new(int64(30)),
			RestartPolicy:                 corev1.RestartPolicyAlways,
		},
	}
}

func digested(t *testing.T, tpl *corev1.PodTemplateSpec) *Template {
	t.Helper()
	d, err := TemplateOf(tpl)
	if err != nil {
		t.Fatal(err)
	}
	return &d
}

// TestClassify: in place only when images changed and nothing else did;
// every other change recreates, saying what changed.
func TestClassify(t *testing.T) {
	cases := []struct {
		name   string
		change func(*corev1.PodTemplateSpec)
		images map[string]string // in place, with these images
		reason string            // recreated, the reason containing this
	}{
		{name: "one image", change: func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Image = "registry.example/web:1.1" },
			images: map[string]string{"web": "registry.example/web:1.1"}},
		{name: "two images", change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Image = "registry.example/web:1.1"
			p.Spec.Containers[1].Image = "registry.example/metrics:4"
		}, images: map[string]string{"web": "registry.example/web:1.1", "metrics": "registry.example/metrics:4"}},
		{name: "a digest for a tag", change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Image = "registry.example/web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		}, images: map[string]string{"web": "registry.example/web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}},
		{name: "a native sidecar's image", change: func(p *corev1.PodTemplateSpec) { p.Spec.InitContainers[1].Image = "envoy:1.31" },
			images: map[string]string{"proxy": "envoy:1.31"}},
		{name: "env", change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Image = "registry.example/web:1.1"
			p.Spec.Containers[0].Env[0].Value = "lab"
		}, reason: "container web: its env changed, not only its image"},
		{name: "resources", change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[1].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
		}, reason: "container metrics: its resources changed"},
		{name: "a probe", change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
		}, reason: "container web: its readinessProbe changed"},
		{name: "a port", change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
		}, reason: "its ports changed"},
		{name: "the pull policy a :latest tag defaults", change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Image = "registry.example/web:latest"
			p.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
		}, reason: "its imagePullPolicy changed"},
		{name: "a volume", change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}, reason: "the pod spec's volumes changed"},
		{name: "tolerations", change: func(p *corev1.PodTemplateSpec) { p.Spec.Tolerations = nil }, reason: "the pod spec's tolerations changed"},
		{name: "a label", change: func(p *corev1.PodTemplateSpec) { p.Labels["tier"] = "1" }, reason: "the pod template's labels changed"},
		{name: "kubectl rollout restart", change: func(p *corev1.PodTemplateSpec) {
			p.Annotations["kubectl.kubernetes.io/restartedAt"] = "2026-11-28T12:00:00Z"
		}, reason: "the pod template's annotations changed"},
		{name: "nothing at all", change: func(*corev1.PodTemplateSpec) {}, reason: "no image changed"},
		{name: "a regular init container's image", change: func(p *corev1.PodTemplateSpec) { p.Spec.InitContainers[0].Image = "busybox:1.37" },
			reason: "init container setup changed: a regular init container never runs again"},
		{name: "a sidecar turned regular", change: func(p *corev1.PodTemplateSpec) { p.Spec.InitContainers[1].RestartPolicy = nil },
			reason: "init container proxy: its restartPolicy changed"},
		{name: "a sidecar's env", change: func(p *corev1.PodTemplateSpec) {
			p.Spec.InitContainers[1].Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
		}, reason: "sidecar container proxy: its env changed"},
		{name: "a container added", change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "extra", Image: "x:1"})
		}, reason: "the containers changed from [web metrics] to [web metrics extra]"},
		{name: "containers reordered", change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0], p.Spec.Containers[1] = p.Spec.Containers[1], p.Spec.Containers[0]
		}, reason: "reordered"},
		{name: "the opt-in label removed", change: func(p *corev1.PodTemplateSpec) {
			delete(p.Labels, rollout.InPlaceLabel)
			p.Spec.Containers[0].Image = "registry.example/web:1.1"
		}, reason: "does not carry the label " + rollout.InPlaceLabel},
	}
	from := digested(t, template())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			to := template()
			tc.change(to)
			got := Classify(from, digested(t, to))
			if tc.images != nil {
				if !got.InPlace || !maps.Equal(got.Images, tc.images) || got.Reason != "" {
					t.Errorf("got %+v, want in place with images %v", got, tc.images)
				}
				return
			}
			if got.InPlace || !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("got %+v, want recreated, the reason containing %q", got, tc.reason)
			}
		})
	}
}

// TestClassifyNamesSidecars: the plan tells which changed containers are
// init containers, where the patch writes them.
func TestClassifyNamesSidecars(t *testing.T) {
	to := template()
	to.Spec.InitContainers[1].Image = "envoy:1.31"
	to.Spec.Containers[0].Image = "registry.example/web:1.1"
	got := Classify(digested(t, template()), digested(t, to))
	if !got.InPlace || !slices.Equal(got.Sidecars, []string{"proxy"}) {
		t.Errorf("got %+v, want in place with proxy among the sidecars", got)
	}
}

// TestTemplateOfIsStable: the same template digests the same, encoded
// again or not, and Full tells templates apart by their images too.
func TestTemplateOfIsStable(t *testing.T) {
	a, b := digested(t, template()), digested(t, template())
	if a.Full != b.Full || len(a.Spec) == 0 || len(a.Containers) != 2 || len(a.Init) != 2 || !a.OptedIn || !a.Init[1].Sidecar || a.Init[0].Sidecar {
		t.Fatalf("got %+v and %+v, want equal digests of two containers and two init containers, the second a sidecar", a, b)
	}
	other := template()
	other.Spec.Containers[0].Image = "registry.example/web:2"
	if c := digested(t, other); c.Full == a.Full {
		t.Errorf("got the same full digest for another image, want another")
	}
	full, err := FullDigest(template())
	if err != nil || full != a.Full {
		t.Errorf("got FullDigest %x, %v; want %x as TemplateOf", full, err, a.Full)
	}
}
