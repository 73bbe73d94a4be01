package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/edgeota/edgeota/apiidentity"
	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

// TestAgentServesBeforeItsIdentityIsSettled: an agent started in a dead
// zone, its identity not settled, serves the stored view, answers live
// requests as an unreachable API server (503, or 202 queued), and says so in
// /readyz and /metrics; once settled, it acts as that identity and the
// queued upgrade runs.
func TestAgentServesBeforeItsIdentityIsSettled(t *testing.T) {
	t.Parallel()
	dir := openStateDir(t)
	first := newFixture(t, fixtureOptions{stateDir: dir}, dsPod("p"))
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	identity := NewAPIIdentity()
	f := newFixture(t, fixtureOptions{stateDir: dir, identity: identity}, dsPod("p"))

	if ready := f.do(http.MethodGet, "/readyz", ""); ready.status != http.StatusOK ||
		!strings.Contains(ready.body, "stored view") || !strings.Contains(ready.body, "identity not settled yet") {
		t.Errorf("got /readyz %d %q, want 200 serving the stored view, the identity not settled", ready.status, ready.body)
	}
	if metrics := f.do(http.MethodGet, metricsPath, ""); !strings.Contains(metrics.body, `edgeota_agent_identity{mode="unsettled"} 1`) {
		t.Errorf("got /metrics %q, want mode unsettled", metrics.body)
	}
	_, err := f.rpc.Upgrade(context.Background(), &edgeotav1.UpgradeRequest{Namespace: "default", Name: "p"})
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "identity is not settled") {
		t.Errorf("Upgrade before the identity is settled: got %v %q, want Unavailable saying why", st.Code(), st.Message())
	}
	queued := f.do(http.MethodPost, upgradePath+"?queue_if_offline=true", "")
	if queued.status != http.StatusAccepted {
		t.Fatalf("queued upgrade: got %d %q, want 202", queued.status, queued.body)
	}
	if n := len(f.writes()); n != 0 {
		t.Fatalf("got %d writes before the identity is settled, want none", n)
	}

	identity.Settle(apiidentity.Settled{Mode: apiidentity.Node, User: apiidentity.NodeUser(testNode)}, typedClient{f.client})
	if o := f.outcome(ActionUpgrade); o.GetResult() != edgeotav1.ActionResult_ACTION_RESULT_DONE {
		t.Errorf("got outcome %v, want the queued upgrade done once the identity is settled", o)
	}
	if ready := f.do(http.MethodGet, "/readyz", ""); !strings.Contains(ready.body, "acting as system:node:"+testNode+" (--identity=node") {
		t.Errorf("got /readyz %q, want it acting as the node", ready.body)
	}
	metrics := f.do(http.MethodGet, metricsPath, "")
	for _, want := range []string{`edgeota_agent_identity{mode="node"} 1`, `edgeota_agent_identity{mode="serviceaccount"} 0`, `edgeota_agent_identity{mode="unsettled"} 0`} {
		if !strings.Contains(metrics.body, want) {
			t.Errorf("got /metrics %q, want %s", metrics.body, want)
		}
	}
}

func TestIdentityDescribesTheServiceAccount(t *testing.T) {
	for _, tc := range []struct {
		settled apiidentity.Settled
		want    string
	}{
		{apiidentity.Settled{Mode: apiidentity.ServiceAccount}, "acting as the service account (--identity=serviceaccount: reads are not node-scoped)"},
		{apiidentity.Settled{Mode: apiidentity.ServiceAccount, User: "system:serviceaccount:e:s", FellBack: "refused"},
			"acting as the service account system:serviceaccount:e:s (--identity=auto fell back: reads are not node-scoped)"},
	} {
		i := NewAPIIdentity()
		i.Settle(tc.settled, nil)
		if got := i.describe(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
