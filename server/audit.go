package server

import (
	"context"

	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

// audited is the service as both protocols see it: every ImagePull and
// Upgrade, REST or gRPC, leaves one audit line saying who asked, for which
// pod, and how it ended. Wrapping the service (rather than intercepting each
// protocol) makes one place see both, since the gateway calls it in-process.
type audited struct {
	edgeotav1.OTAServiceServer
}

// Upgrade calls the service's Upgrade and audits it.
func (a audited) Upgrade(ctx context.Context, req *edgeotav1.UpgradeRequest) (*edgeotav1.UpgradeResponse, error) {
	resp, err := a.OTAServiceServer.Upgrade(ctx, req)
	audit(ctx, "Upgrade", req.GetNamespace(), req.GetName(), err)
	return resp, err
}

// ImagePull calls the service's ImagePull and audits it.
func (a audited) ImagePull(ctx context.Context, req *edgeotav1.ImagePullRequest) (*edgeotav1.ImagePullResponse, error) {
	resp, err := a.OTAServiceServer.ImagePull(ctx, req)
	audit(ctx, "ImagePull", req.GetNamespace(), req.GetName(), err)
	return resp, err
}

// maxAudited bounds the namespace and name an audit line repeats: the longest
// valid name, so a hostile 64 KiB one does not flood the log.
const maxAudited = 253

func audit(ctx context.Context, rpc, namespace, name string, err error) {
	c := callerFrom(ctx)
	user, groups := "system:anonymous", []string(nil)
	if c.identity != nil {
		user, groups = c.identity.User, c.identity.Groups
	}
	klog.FromContext(ctx).Info("Audit", "user", user, "groups", groups, "rpc", rpc,
		"pod", klog.KRef(clip(namespace), clip(name)), "outcome", status.Code(err).String(), "protocol", c.protocol)
}

func clip(s string) string { return s[:min(len(s), maxAudited)] }
