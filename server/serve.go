package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// Serve serves h on l, HTTP/1.1 and HTTP/2 alike: cleartext HTTP/2 (as
// grpc-go clients and grpcurl -plaintext connect), or HTTP/2 negotiated by
// ALPN when l is a TLS listener (see TLSConfig), until ctx is done. It then stops
// accepting, lets in-flight requests of both protocols finish for up to drain,
// and returns nil after a clean shutdown.
func Serve(ctx context.Context, l net.Listener, h *Handler, drain time.Duration) error {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:           h,
		Protocols:         protocols,
		ReadHeaderTimeout: h.limits.readHeader,
		ReadTimeout:       h.limits.read,
		WriteTimeout:      h.limits.write,
		IdleTimeout:       h.limits.idle,
		// Requests keep the caller's logger but not its cancellation: shutdown
		// drains them instead of cutting them off.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	go h.watchReadiness(ctx)
	go h.svc.upgrades.run(ctx)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	select {
	case err := <-served:
		h.grpc.Stop()
		return fmt.Errorf("serving on %s: %w", l.Addr(), err)
	case <-ctx.Done():
	}
	logger := klog.FromContext(ctx)
	logger.Info("Shutting down, draining in-flight requests", "timeout", drain)
	h.health.Shutdown()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	err := srv.Shutdown(sctx)
	h.grpc.Stop()
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("serving on %s: %w", l.Addr(), serr)
	}
	if err != nil {
		return fmt.Errorf("draining in-flight requests: %w", err)
	}
	return nil
}
