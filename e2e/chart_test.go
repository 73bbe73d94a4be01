//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edgeota/edgeota/localcluster"
)

// helmOwnership is what Helm adds to every object it installs: the
// release's annotations and the managed-by label.
const (
	helmAnnotationPrefix = "meta.helm.sh/"
	managedByLabel       = "app.kubernetes.io/managed-by"
)

// helmInstall installs charts/edgeota with its default values into
// edgeota-system, as the chart's users do, with bin/helm (make tools builds
// it) keeping its cache and configuration in the test's log dir.
func (e *env) helmInstall() {
	e.t.Helper()
	home := filepath.Join(e.logDir, "helm")
	cmd := exec.CommandContext(e.ctx(), e.h.Tools.Path("helm"), "install", "edgeota", filepath.Join(e.root, "charts", "edgeota"),
		"--namespace", systemNamespace, "--create-namespace", "--kubeconfig", e.cluster.Kubeconfig)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("helm install: %v\n%s", err, out)
	}
}

// installedObjects reads back every object deploy/ names, as the API server
// now holds them, less what the server or Helm's ownership adds (uid,
// resourceVersion, timestamps, managedFields, status, Helm's annotations and
// label), sorted: what two installs must agree on. The Namespace is left
// out: helm install --create-namespace makes it, not the chart. It also
// reports whether any object carried Helm's ownership.
func (e *env) installedObjects() (objects []map[string]any, ownedByHelm bool) {
	e.t.Helper()
	out, err := e.cluster.Kubectl(e.ctx(), "get", "-f", filepath.Join(e.root, "deploy", "edgeota.yaml"), "-o", "json")
	if err != nil {
		e.t.Fatal(err)
	}
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		e.t.Fatalf("decoding the installed objects: %v", err)
	}
	for _, o := range list.Items {
		if o["kind"] == "Namespace" {
			continue
		}
		delete(o, "status")
		meta, _ := o["metadata"].(map[string]any)
		for _, k := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"} {
			delete(meta, k)
		}
		if annotations, ok := meta["annotations"].(map[string]any); ok {
			for k := range annotations {
				if strings.HasPrefix(k, helmAnnotationPrefix) {
					ownedByHelm = true
					delete(annotations, k)
				}
			}
			if len(annotations) == 0 {
				delete(meta, "annotations")
			}
		}
		if labels, ok := meta["labels"].(map[string]any); ok {
			if labels[managedByLabel] == "Helm" {
				ownedByHelm = true
				delete(labels, managedByLabel)
			}
		}
		objects = append(objects, o)
	}
	key := func(o map[string]any) string {
		meta := o["metadata"].(map[string]any)
		ns, _ := meta["namespace"].(string)
		return o["kind"].(string) + "/" + ns + "/" + meta["name"].(string)
	}
	slices.SortFunc(objects, func(a, b map[string]any) int { return strings.Compare(key(a), key(b)) })
	return objects, ownedByHelm
}

// TestChartInstallsWhatDeployApplies: kubectl apply -k deploy/ and helm
// install of charts/edgeota with default values, each on a fresh cluster,
// install the same objects once Helm's ownership metadata is removed, and
// with either the agent's token is scoped to its node by the API server.
//
// It runs alone (e2e/README.md): it applies deploy/ (or the chart) and its
// fixed names in edgeota-system.
func TestChartInstallsWhatDeployApplies(t *testing.T) {
	node1, node2 := localcluster.NodeName(1), localcluster.NodeName(2)
	type install struct {
		objects     []map[string]any
		ownedByHelm bool
	}
	got := map[string]install{}
	for _, tc := range []struct {
		name    string
		install func(*env)
	}{
		{"kubectl apply -k deploy", func(e *env) { e.applyDeploy("deploy") }},
		{"helm install", (*env).helmInstall},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 2)
			tc.install(e)
			objects, owned := e.installedObjects()
			got[tc.name] = install{objects, owned}
			e.createDaemonSet(map[string]string{strategyAnnotation: "OTA"})
			e.expectNodeScoped(e.agentKubeconfig(node1, ""), node1, node2)
		})
	}
	kubectl, helm := got["kubectl apply -k deploy"], got["helm install"]
	if len(kubectl.objects) == 0 || kubectl.ownedByHelm || !helm.ownedByHelm {
		t.Fatalf("got %d objects from deploy/ (owned by Helm: %t) and %d from the chart (owned by Helm: %t); want some, Helm's metadata on the chart's only",
			len(kubectl.objects), kubectl.ownedByHelm, len(helm.objects), helm.ownedByHelm)
	}
	if diff := cmp.Diff(kubectl.objects, helm.objects); diff != "" {
		t.Errorf("installed objects differ (-deploy/ +chart):\n%s", diff)
	}
}
