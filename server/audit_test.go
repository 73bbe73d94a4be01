package server

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/ownerauth"
)

// capture returns a logger that keeps its entries, and a function returning
// the key/value pairs of every entry with the given message.
func capture(t *testing.T, message string) (klog.Logger, func() [][]any) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	return logger, func() [][]any {
		var out [][]any
		for _, e := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
			if e.Message == message {
				out = append(out, e.ParameterKVList)
			}
		}
		return out
	}
}

// TestAuditsEveryAction proves each ImagePull and Upgrade, over either
// protocol, leaves one audit line with who asked, the pod and the outcome —
// refusals included — and that listing leaves none.
func TestAuditsEveryAction(t *testing.T) {
	logger, audits := capture(t, "Audit")
	f := newFixture(t, fixtureOptions{auth: ownerauth.Authenticator{Tokens: mustTokens(t, testTokens)}, logger: &logger},
		dsPod("p"), dsPod("q"), dsPod("other", withoutCondition("PodNeedUpgrade")))

	f.do(http.MethodPost, imagePullPath, "", "Authorization", "Bearer upgrader-token")
	f.do(http.MethodPost, "/openyurt.io/v1/namespaces/default/pods/other/upgrade", "", "Authorization", "Bearer upgrader-token")
	ctx := withToken(context.Background(), "upgrader-token")
	_, _ = f.rpc.Upgrade(ctx, &edgeotav1.UpgradeRequest{Namespace: "default", Name: "q"})
	_, _ = f.rpc.ImagePull(ctx, &edgeotav1.ImagePullRequest{Namespace: "default", Name: "ghost"})
	_, _ = f.rpc.ListPods(ctx, &edgeotav1.ListPodsRequest{})

	upgraders := []string{ownerauth.GroupViewers, ownerauth.GroupUpgraders}
	line := func(rpc, name, outcome, protocol string) []any {
		return []any{"user", "uli", "groups", upgraders, "rpc", rpc, "pod", klog.KRef("default", name), "outcome", outcome, "queued", false, "protocol", protocol}
	}
	want := [][]any{
		line("ImagePull", "p", "OK", "REST"),
		line("Upgrade", "other", "FailedPrecondition", "REST"),
		line("Upgrade", "q", "OK", "gRPC"),
		line("ImagePull", "ghost", "NotFound", "gRPC"),
	}
	if diff := cmp.Diff(want, audits()); diff != "" {
		t.Errorf("audit lines (-want +got):\n%s", diff)
	}
}

// TestAuditsAnonymousCallers names the anonymous user when no authentication
// is configured, and bounds what a hostile name puts in the log.
func TestAuditsAnonymousCallers(t *testing.T) {
	logger, audits := capture(t, "Audit")
	f := newFixture(t, fixtureOptions{logger: &logger})
	long := make([]byte, 4096)
	for i := range long {
		long[i] = 'a'
	}
	_, _ = f.rpc.Upgrade(context.Background(), &edgeotav1.UpgradeRequest{Namespace: "default", Name: string(long)})
	want := [][]any{{"user", "system:anonymous", "groups", []string(nil), "rpc", "Upgrade",
		"pod", klog.KRef("default", string(long[:maxAudited])), "outcome", "InvalidArgument", "queued", false, "protocol", "gRPC"}}
	if diff := cmp.Diff(want, audits()); diff != "" {
		t.Errorf("audit lines (-want +got):\n%s", diff)
	}
}
