package server

import (
	"context"

	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/ownerauth"
)

// audited is the service as both protocols see it: every ImagePull, Upgrade,
// Hold and ReleaseHold, REST or gRPC, leaves one audit line saying who asked, for which
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

// Hold calls the service's Hold and audits it, with the hold's end, reason
// and pods when it was made.
func (a audited) Hold(ctx context.Context, req *edgeotav1.HoldRequest) (*edgeotav1.HoldResponse, error) {
	resp, err := a.OTAServiceServer.Hold(ctx, req)
	var made []any
	if err == nil {
		made = []any{"until", resp.GetUntil().AsTime(), "reason", req.GetReason(), "pods", resp.GetPods()}
	}
	audit(ctx, "Hold", req.GetNamespace(), req.GetName(), resp.GetQueued(), err, made...)
	return resp, err
}

// ReleaseHold calls the service's ReleaseHold and audits it, with the pods
// released when it was made.
func (a audited) ReleaseHold(ctx context.Context, req *edgeotav1.ReleaseHoldRequest) (*edgeotav1.ReleaseHoldResponse, error) {
	resp, err := a.OTAServiceServer.ReleaseHold(ctx, req)
	var made []any
	if err == nil {
		made = []any{"pods", resp.GetPods()}
	}
	audit(ctx, "ReleaseHold", req.GetNamespace(), req.GetName(), resp.GetQueued(), err, made...)
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

// audit logs one call: who, which RPC, which pod (none for every app of the
// node), how it ended, whether it was queued, and what made adds (validated
// values only: a refused request's input is not repeated).
func audit(ctx context.Context, rpc, namespace, name string, queued bool, err error, made ...any) {
	c := ownerauth.CallerFrom(ctx)
	var groups []string
	if c.Identity != nil {
		groups = c.Identity.Groups
	}
	kv := []any{"user", callerName(c.Identity), "groups", groups, "rpc", rpc,
		"pod", klog.KRef(clip(namespace), clip(name)), "outcome", status.Code(err).String(), "queued", queued, "protocol", c.Protocol}
	klog.FromContext(ctx).Info("Audit", append(kv, made...)...)
}

// auditQueued logs how a queued action ended (done, refused, expired or
// cancelled) in the audit log, with who queued it and for which revision.
func auditQueued(ctx context.Context, a queuedAction, result, message string) {
	var groups []string
	if a.Caller != nil {
		groups = a.Caller.Groups
	}
	kv := []any{"user", a.callerName(), "groups", groups, "rpc", queuedRPC[a.Action],
		"pod", klog.KRef(a.Namespace, a.Name), "outcome", result, "queued", true, "revision", a.TargetRevision,
		"queuedAt", a.QueuedAt, "message", message, "protocol", "queue"}
	if a.Hold != nil {
		kv = append(kv, "until", a.Hold.Until, "reason", a.Hold.Reason)
	}
	klog.FromContext(ctx).Info("Audit", kv...)
}

// queuedRPC names each queued action by the RPC that queued it.
var queuedRPC = map[string]string{
	ActionUpgrade: "Upgrade", ActionImagePull: "ImagePull", ActionHold: "Hold", ActionReleaseHold: "ReleaseHold",
}

func clip(s string) string { return s[:min(len(s), maxAudited)] }
