package server

import (
	"context"

	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/ownerauth"
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
	audit(ctx, "Upgrade", req.GetNamespace(), req.GetName(), resp.GetQueued(), err)
	return resp, err
}

// ImagePull calls the service's ImagePull and audits it.
func (a audited) ImagePull(ctx context.Context, req *edgeotav1.ImagePullRequest) (*edgeotav1.ImagePullResponse, error) {
	resp, err := a.OTAServiceServer.ImagePull(ctx, req)
	audit(ctx, "ImagePull", req.GetNamespace(), req.GetName(), resp.GetQueued(), err)
	return resp, err
}

// maxAudited bounds the namespace and name an audit line repeats: the longest
// valid name, so a hostile 64 KiB one does not flood the log.
const maxAudited = 253

// anonymousUser names a caller without an identity, as Kubernetes does.
const anonymousUser = "system:anonymous"

// callerName is the user an identity names, anonymousUser for none.
func callerName(identity *ownerauth.Identity) string {
	if identity == nil {
		return anonymousUser
	}
	return identity.User
}

func audit(ctx context.Context, rpc, namespace, name string, queued bool, err error) {
	c := ownerauth.CallerFrom(ctx)
	var groups []string
	if c.Identity != nil {
		groups = c.Identity.Groups
	}
	klog.FromContext(ctx).Info("Audit", "user", callerName(c.Identity), "groups", groups, "rpc", rpc,
		"pod", klog.KRef(clip(namespace), clip(name)), "outcome", status.Code(err).String(), "queued", queued, "protocol", c.Protocol)
}

// auditQueued logs how a queued action ended (done, refused, expired or
// cancelled) in the audit log, with who queued it and for which revision.
func auditQueued(ctx context.Context, a queuedAction, result, message string) {
	var groups []string
	if a.Caller != nil {
		groups = a.Caller.Groups
	}
	klog.FromContext(ctx).Info("Audit", "user", a.callerName(), "groups", groups, "rpc", queuedRPC(a.Action),
		"pod", klog.KRef(a.Namespace, a.Name), "outcome", result, "queued", true, "revision", a.TargetRevision,
		"queuedAt", a.QueuedAt, "message", message, "protocol", "queue")
}

// queuedRPC names a queued action by the RPC that queued it.
func queuedRPC(action string) string {
	if action == ActionUpgrade {
		return "Upgrade"
	}
	return "ImagePull"
}

func clip(s string) string { return s[:min(len(s), maxAudited)] }
