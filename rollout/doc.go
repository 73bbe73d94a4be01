// Package rollout is edgeota's public surface of a rollout: the annotation
// keys an operator writes on a DaemonSet (and that OpenYurt's and ACK Edge's
// manifests already use), the keys edgeota writes on Nodes and pods, the
// update strategy they name, the rollout status the controller publishes,
// the reasons of the events it records, and the one integer-or-percentage
// rule its settings share.
//
// It decides nothing and reaches no API server: the controller, the node
// agent, the kubectl plugin, the bench and the docs share it, so that each
// key and each reason is spelt in one place, and a tool that only reads a
// rollout (the plugin) links none of the controller. What a rollout does
// with these settings is package decision's; how they get to the cluster is
// package controller's.
//
// The doc comment of each key and of each reason is its row in the manual's
// reference tables (docs/reference/annotations.md and events.md, which
// hack/docgen writes from this package): it says, for operators, what a key
// takes and its default, what an event means.
package rollout
