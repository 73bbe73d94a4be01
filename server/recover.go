package server

import (
	"context"
	"errors"
	"net/http"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/internal/untrusted"
)

// panicked logs a recovered panic with its stack and returns the Internal
// status the caller gets instead of a dropped connection.
func panicked(ctx context.Context, where string, p any) error {
	klog.FromContext(ctx).Error(nil, "Recovered from a panic", "in", where, "panic", p, "stack", string(debug.Stack()))
	return status.Errorf(codes.Internal, "internal error serving %s; the agent logged the details", where)
}

// recoverUnary and recoverStream turn a panic in a gRPC method into
// codes.Internal: one bad request must not take down the agent.
func recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, panicked(ctx, info.FullMethod, p)
		}
	}()
	return handler(ctx, req)
}

func recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicked(ss.Context(), info.FullMethod, p)
		}
	}()
	return handler(srv, ss)
}

// recoverHTTP, deferred by Handler.ServeHTTP, answers a panic while serving r
// with a 500 in the REST error format. http.ErrAbortHandler keeps its meaning:
// abort the response.
func recoverHTTP(w http.ResponseWriter, r *http.Request) {
	p := recover()
	if p == nil {
		return
	}
	if err, ok := p.(error); ok && errors.Is(err, http.ErrAbortHandler) {
		panic(p)
	}
	ctx := r.Context()
	writeError(ctx, nil, nil, w, r, panicked(ctx, r.Method+" "+untrusted.Quote(r.URL.EscapedPath()), p))
}
