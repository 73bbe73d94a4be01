package server

import (
	"context"
	"net/textproto"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// SyncedAtHeader carries the time of the pod cache's last successful contact
// with the API server, RFC 3339 in UTC, on every ListPods answer: the gRPC
// response header x-edgeota-synced-at and the HTTP header
// X-Edgeota-Synced-At. The body stays a plain PodList, so a caller that cares
// how stale a cut-off node's answer is reads the header.
const SyncedAtHeader = "x-edgeota-synced-at"

// setSyncedAt sends SyncedAtHeader with the answer of the call in ctx. A call
// without a transport (a direct method call) has no header to set.
func setSyncedAt(ctx context.Context, at time.Time) {
	_ = grpc.SetHeader(ctx, syncedAtMD(at))
}

// syncedAtMD is SyncedAtHeader as gRPC metadata.
func syncedAtMD(at time.Time) metadata.MD {
	return metadata.Pairs(SyncedAtHeader, formatSyncedAt(at))
}

// formatSyncedAt is SyncedAtHeader's value for at.
func formatSyncedAt(at time.Time) string { return at.UTC().Format(time.RFC3339Nano) }

// outgoingHeader maps gRPC response headers to HTTP headers for the REST
// gateway: SyncedAtHeader becomes X-Edgeota-Synced-At, anything else keeps
// grpc-gateway's Grpc-Metadata- prefix.
func outgoingHeader(key string) (string, bool) {
	if key == SyncedAtHeader {
		return textproto.CanonicalMIMEHeaderKey(key), true
	}
	return runtime.MetadataHeaderPrefix + key, true
}
