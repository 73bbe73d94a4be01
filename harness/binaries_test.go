package harness

import (
	"slices"
	"testing"
)

func TestControllerArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts ControllerOptions
		want []string
	}{
		{"alone, nothing served", ControllerOptions{},
			[]string{"--kubeconfig", "kc", "--record-namespace", SystemNamespace, "--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--leader-elect=false"}},
		{"replica with metrics and limits", ControllerOptions{LeaseNamespace: "ns", MetricsAddr: "127.0.0.1:9", KubeAPIQPS: 2.5, KubeAPIBurst: 7, Verbosity: 4, Flags: []string{"--workers", "2"}},
			[]string{"--kubeconfig", "kc", "--record-namespace", SystemNamespace, "--metrics-bind-address", "127.0.0.1:9", "--health-probe-bind-address", "0",
				"--leader-elect=true", "--leader-elect-namespace", "ns", "--kube-api-qps", "2.5", "--kube-api-burst", "7", "-v=4", "--workers", "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.opts.args("kc"); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAgentArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts AgentOptions
		want []string
	}{
		{"with a state directory", AgentOptions{Node: "n1", Kubeconfig: "kc", Port: "9", StateDir: "s", Flags: []string{"-v=2"}},
			[]string{"--kubeconfig", "kc", "--node-name", "n1", "--bind-address", "127.0.0.1", "--port", "9", "--state-dir", "s", "--identity", "serviceaccount", "-v=2"}},
		{"stateless", AgentOptions{Node: "n1", Kubeconfig: "kc", Port: "9", StateDir: "s", Stateless: true},
			[]string{"--kubeconfig", "kc", "--node-name", "n1", "--bind-address", "127.0.0.1", "--port", "9", "--state-dir", "", "--identity", "serviceaccount"}},
		{"as its node", AgentOptions{Node: "n1", Kubeconfig: "kc", Port: "9", StateDir: "s", Identity: "node"},
			[]string{"--kubeconfig", "kc", "--node-name", "n1", "--bind-address", "127.0.0.1", "--port", "9", "--state-dir", "s", "--identity", "node"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.opts.args(); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
