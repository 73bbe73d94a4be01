package localcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Heartbeat is how the simulated nodes show they are alive, chosen per
// cluster (Options.NodeLeases, Options.NodeHeartbeat) and changed at run
// time by SetHeartbeat. The zero value is the default: status heartbeats
// every 10-15 s and no node Leases.
//
// With Leases the nodes heartbeat as kubelets do with their defaults: a
// Lease in kube-node-lease, 40 s long, renewed every 10 s (plus up to 4%
// jitter) by kwok-controller, and the Node status written every 5 minutes.
// A cut-off node (CutOffLabel) stops both: kwok-controller then manages the
// nodes that are not cut off only, so it forgets a node as soon as the label
// is set, neither renewing its Lease nor writing its status nor running its
// pods, and the node lifecycle controller finds the Lease expired after its
// grace period (40 s) and reports the node Ready=Unknown, taints it
// unreachable and marks its pods not Ready, as for a real node gone silent.
// Reconnected, the node is managed again: its Lease is renewed, the
// node-initialize stage reports it Ready and pod-ready-again reports its
// running pods Ready again. kwok-controller takes the nodes up one by one,
// spread over a renewal interval (joinLeases), so that their Leases renew in
// phases spread over the interval as kubelets started at different times
// do, not all in the same second.
//
// Without Leases the Node status is the only heartbeat, every Interval; a
// cut-off node's status stops and the node-cut-off stage reports it
// Ready=Unknown within a second (the node lifecycle controller then leaves
// its pods Ready).
type Heartbeat struct {
	// Leases makes the nodes heartbeat as kubelets do (see Heartbeat).
	Leases bool
	// Interval is how often nodes without Leases write their status: every
	// Interval to 1.5 × Interval. Zero means every 10-15 s. With Leases it
	// must be zero: the status is then written every 5 minutes.
	Interval time.Duration
}

// Node Lease figures of a kubelet with its defaults, which kwok-controller
// applies: a Lease of nodeLeaseDuration renewed every quarter of it, with
// up to leaseRenewJitter of the interval added.
const (
	nodeLeaseDuration = 40 * time.Second
	leaseRenewJitter  = 0.04
)

// leaseRenewInterval is how often kwok-controller renews a node Lease.
const leaseRenewInterval = nodeLeaseDuration / 4

// nodeMonitorGracePeriod is how long the node lifecycle controller waits for
// a heartbeat before it reports a node Ready=Unknown (kwokctl's
// --heartbeat-factor 1, as a kubelet's cluster runs). With Leases a cut-off
// node is reported so only after it.
const nodeMonitorGracePeriod = 40 * time.Second

// Node status delays of the node-heartbeat stage, in milliseconds: the
// default interval's bounds, and those with Leases (a kubelet's
// nodeStatusReportFrequency, 5 minutes, plus up to 10 s so that nodes
// created together spread out).
const (
	defaultStatusMillis, defaultStatusMaxMillis = 10000, 15000
	leaseStatusMillis, leaseStatusMaxMillis     = 300000, 310000
)

// Validate refuses a heartbeat that says two things.
func (h Heartbeat) Validate() error {
	if h.Leases && h.Interval != 0 {
		return fmt.Errorf("node heartbeat: a status interval (%s) with Leases, whose status is written every 5 minutes", h.Interval)
	}
	if h.Interval < 0 {
		return fmt.Errorf("node heartbeat: a negative status interval %s", h.Interval)
	}
	return nil
}

// Period is the longest time between two heartbeats of a node that is not
// cut off: what a proof of life waits at most.
func (h Heartbeat) Period() time.Duration {
	switch {
	case h.Leases:
		return leaseRenewInterval + time.Duration(leaseRenewJitter*float64(leaseRenewInterval))
	case h.Interval > 0:
		return h.Interval * 3 / 2
	}
	return defaultStatusMaxMillis * time.Millisecond
}

// String says how the nodes heartbeat, for reports and logs.
func (h Heartbeat) String() string {
	if h.Leases {
		return fmt.Sprintf("node Leases renewed every %s (%s long), status every %s, as kubelets", leaseRenewInterval, nodeLeaseDuration, leaseStatusMillis*time.Millisecond)
	}
	minimum, maximum := h.statusDelay()
	return fmt.Sprintf("node status every %s–%s, no Leases", minimum, maximum)
}

// statusDelay is the node-heartbeat stage's delay: the least and the most
// time between two status writes of a node.
func (h Heartbeat) statusDelay() (minimum, maximum time.Duration) {
	switch {
	case h.Leases:
		return leaseStatusMillis * time.Millisecond, leaseStatusMaxMillis * time.Millisecond
	case h.Interval > 0:
		return h.Interval, h.Interval * 3 / 2
	}
	return defaultStatusMillis * time.Millisecond, defaultStatusMaxMillis * time.Millisecond
}

// kwokFlags are kwok-controller's flags for the heartbeat: Leases or none,
// and which nodes it manages. With Leases it manages only the nodes that are
// not cut off (nor joining yet), so that it stops renewing a cut-off node's
// Lease: it renews the Lease of every node it manages, whatever the node's
// labels say, but forgets a node that leaves its label selector (the API
// server's watch reports such a node deleted). Without Leases it manages
// every node, and the node-cut-off stage silences a cut-off one.
func (h Heartbeat) kwokFlags() []flag {
	if h.Leases {
		return []flag{
			{"node-lease-duration-seconds", fmt.Sprint(int(nodeLeaseDuration.Seconds())), true},
			{"manage-all-nodes", "false", true},
			{"manage-nodes-with-label-selector", CutOffLabel + "!=true," + joiningLabel + "!=true", false},
		}
	}
	return []flag{{"node-lease-duration-seconds", "0", true}, {"manage-all-nodes", "true", true}}
}

// flag is a command-line flag of kwok-controller, --name=value.
type flag struct {
	name, value string
	// kwokctlWrites says that kwokctl writes the flag itself, with a value
	// of its own.
	kwokctlWrites bool
}

// kwokFlagNames are the flags kwokFlags sets in either mode.
var kwokFlagNames = []string{"node-lease-duration-seconds", "manage-all-nodes", "manage-nodes-with-label-selector"}

// componentsPatch is the kwokctl configuration's componentsPatches entry
// that gives kwok-controller the heartbeat's flags, in place of those
// kwokctl writes itself (--manage-all-nodes=true, and a Lease duration from
// its --heartbeat-factor).
func (h Heartbeat) componentsPatch() string {
	var b strings.Builder
	b.WriteString("componentsPatches:\n- name: kwok-controller\n  extraArgs:\n")
	for _, f := range h.kwokFlags() {
		// Override replaces kwokctl's own flag; kwokctl warns when there is
		// none to replace.
		fmt.Fprintf(&b, "  - key: %s\n    value: %q\n    override: %t\n", f.name, f.value, f.kwokctlWrites)
	}
	return b.String()
}

// withKwokFlags is kwok-controller's command line argv (as kwokctl writes
// it: every flag --name=value) with the heartbeat's flags in place of those
// it had for either mode, for a restart in the other mode.
func withKwokFlags(argv []string, h Heartbeat) []string {
	out := slices.DeleteFunc(slices.Clone(argv), func(arg string) bool {
		name, _, _ := strings.Cut(arg, "=")
		return strings.HasPrefix(name, "--") && slices.Contains(kwokFlagNames, name[2:])
	})
	for _, f := range h.kwokFlags() {
		out = append(out, "--"+f.name+"="+f.value)
	}
	return out
}

// joiningLabel, set to "true" on a node, keeps kwok-controller from taking it
// up with Leases until joinLeases removes it.
const joiningLabel = "localcluster.edgeota.io/joining"

// joinParallelism bounds the label patches in flight when every node is
// labelled joining at once.
const joinParallelism = 16

// joinLeases lets kwok-controller take the nodes up with Leases one by one,
// removing their joiningLabel evenly over a renewal interval (or longer, if
// the patches take longer): kwok-controller renews a Lease every interval
// from when it took its node up, so nodes taken up together would renew
// together, the whole fleet in the same second every 10 s, where kubelets
// started at different times renew in phases spread over the interval.
func (c *Cluster) joinLeases(ctx context.Context, names []string) error {
	start := time.Now()
	for i, name := range names {
		at := start.Add(leaseRenewInterval * time.Duration(i) / time.Duration(len(names)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(at)):
		}
		if err := c.SetNodeLabel(ctx, name, joiningLabel, nil); err != nil {
			return err
		}
	}
	return nil
}
