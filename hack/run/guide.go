package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/edgeota/edgeota/harness"
	"github.com/edgeota/edgeota/localcluster"
	"github.com/edgeota/edgeota/podcondition"
	"github.com/edgeota/edgeota/rollout"
)

// printGuide prints what to try, as commands to paste from the checkout root,
// using the binaries in bin/ and the cluster's own kubeconfig.
func printGuide(w io.Writer, s *session, examples []example) {
	root, cluster := s.h.Root, s.h.Cluster
	kubeconfig, _ := filepath.Rel(root, cluster.Kubeconfig)
	cacheDir, _ := filepath.Rel(root, cluster.KubectlCacheDir())
	kubectl := "bin/kubectl --kubeconfig " + kubeconfig + " --cache-dir " + cacheDir
	agent := "http://" + s.agentAddr
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }

	p("")
	p("edgeota's local cluster is up: %d edge nodes (edge-node-1..%d), ota-controller, and ota-server for %s on %s.",
		s.nodes, s.nodes, s.agentNode, s.agentAddr)
	p("From %s:", root)
	p("")
	p("# The cluster (admin kubeconfig: %s)", kubeconfig)
	p("  %s get nodes,daemonsets,pods -A -o wide", kubectl)
	p("")
	p("# The examples (annotation %s)", rollout.StrategyAnnotation)
	for _, e := range examples {
		p("  %s/%s: %s, %s=%s; its pod on %s: %s", e.namespace, e.name, e.strategy, e.container, e.image, s.agentNode, e.agentPod)
	}
	e := examples[0]
	for _, x := range examples {
		if x.strategy == string(rollout.StrategyOTA) {
			e = x
			break
		}
	}
	p("")
	p("# Change an image: every pod gets condition %s=True", podcondition.NeedUpgrade)
	p("  %s -n %s set image daemonset/%s %s=nginx:1.19.5", kubectl, e.namespace, e.name, e.container)
	p("  %s -n %s get pods -o custom-columns='NAME:.metadata.name,NODE:.spec.nodeName,IMAGE:.spec.containers[0].image,NEED-UPGRADE:.status.conditions[?(@.type==\"%s\")].status'", kubectl, e.namespace, podcondition.NeedUpgrade)
	p("")
	p("# The node agent of %s: list its pods, pre-pull, upgrade (REST)", s.agentNode)
	p("  curl -s %s/pods", agent)
	p("  curl -s -X POST %s/openyurt.io/v1/namespaces/%s/pods/%s/imagepull", agent, e.namespace, e.agentPod)
	p("  curl -s -X POST %s/openyurt.io/v1/namespaces/%s/pods/%s/upgrade", agent, e.namespace, e.agentPod)
	p("# Queue an upgrade if the API server is unreachable (202), list and cancel queued actions")
	p("  curl -s -X POST '%s/openyurt.io/v1/namespaces/%s/pods/%s/upgrade?queue_if_offline=true'", agent, e.namespace, e.agentPod)
	p("  curl -s %s/edgeota.io/v1/actions", agent)
	p("  curl -s -X DELETE %s/edgeota.io/v1/namespaces/%s/pods/%s/actions/upgrade", agent, e.namespace, e.agentPod)
	p("# ... and over gRPC (pod names change with each upgrade: list them first)")
	p("  bin/grpcurl -plaintext %s edgeota.v1.OTAService/ListPods", s.agentAddr)
	p("  bin/grpcurl -plaintext -d '{\"namespace\":\"%s\",\"name\":\"%s\"}' %s edgeota.v1.OTAService/ImagePull", e.namespace, e.agentPod, s.agentAddr)
	p("  bin/grpcurl -plaintext -d '{\"namespace\":\"%s\",\"name\":\"%s\"}' %s edgeota.v1.OTAService/Upgrade", e.namespace, e.agentPod, s.agentAddr)
	p("# The owner's hold: not now (every app of the node, or one pod), then release")
	p("  bin/otactl --server %s hold --for 2h --reason driving", s.agentAddr)
	p("  curl -s -X POST '%s/edgeota.io/v1/namespaces/%s/pods/%s/hold?duration=2h&reason=driving'", agent, e.namespace, e.agentPod)
	p("  curl -s -X DELETE %s/edgeota.io/v1/hold", agent)
	p("# The owner's view: each app's phase, current and target images; watch it, follow an upgrade")
	p("  bin/otactl --server %s list", s.agentAddr)
	p("  bin/otactl --server %s watch", s.agentAddr)
	p("  bin/otactl --server %s upgrade %s/%s --wait", s.agentAddr, e.namespace, e.name)
	p("  curl -sN %s/edgeota.io/v1/watch/upgrades", agent)
	p("")
	rolling := examples[0]
	for _, x := range examples {
		if x.strategy != string(rollout.StrategyOTA) {
			rolling = x
			break
		}
	}
	p("# Follow a rollout with the kubectl plugin (bin/kubectl-edgeota, found on PATH); give it a nightly window")
	// kubectl takes no flag before a plugin's name, and the plugin has no
	// --cache-dir: its flags follow its name.
	p("  PATH=$PWD/bin:$PATH bin/kubectl edgeota --kubeconfig %s -n %s rollout status daemonset/%s --watch", kubeconfig, rolling.namespace, rolling.name)
	p("  %s -n %s annotate daemonset/%s %s='daily 01:00-05:00'", kubectl, rolling.namespace, rolling.name, rollout.MaintenanceWindowAnnotation)
	p("")
	p("# Cut a node off (it stops reporting; Ready turns Unknown), then bring it back")
	p("  %s label node %s %s=true", kubectl, localcluster.NodeName(2), localcluster.CutOffLabel)
	p("  %s label node %s %s-", kubectl, localcluster.NodeName(2), localcluster.CutOffLabel)
	p("")
	p("# Logs")
	controllerLog, _ := filepath.Rel(root, s.h.LogPath(harness.ControllerBinary))
	agentLog, _ := filepath.Rel(root, s.h.LogPath(harness.AgentBinary))
	clusterLogs, _ := filepath.Rel(root, filepath.Join(cluster.WorkDir(), "logs"))
	p("  %s  %s  %s/", controllerLog, agentLog, clusterLogs)
	p("# The agent's state directory (its stored view of the pods, queued actions)")
	p("  %s/", agentStateDir)
	p("")
	p("Press Ctrl-C to stop everything.")
}
