package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"k8s.io/client-go/tools/cache"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

// Handler is everything behind the agent's one port: gRPC (HTTP/2 requests
// with content-type application/grpc, including the standard health service
// and server reflection), the REST gateway, and the probes /healthz (the
// process answers) and /readyz (the pod cache has synced).
type Handler struct {
	svc    *Server
	grpc   *grpc.Server
	health *health.Server
	rest   http.Handler
}

// NewHandler wires svc into a gRPC server and a REST gateway that calls it
// in-process (no loopback hop between the two protocols).
func NewHandler(ctx context.Context, svc *Server) (*Handler, error) {
	h := &Handler{svc: svc, grpc: grpc.NewServer(), health: health.NewServer()}
	edgeotav1.RegisterOTAServiceServer(h.grpc, svc)
	healthpb.RegisterHealthServer(h.grpc, h.health)
	reflection.Register(h.grpc)
	h.health.SetServingStatus(edgeotav1.OTAService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)

	gw := newGateway()
	if err := edgeotav1.RegisterOTAServiceHandlerServer(ctx, gw, svc); err != nil {
		return nil, fmt.Errorf("registering the REST gateway: %w", err)
	}
	h.rest = gw
	return h, nil
}

// ServeHTTP dispatches by protocol first, then by path.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
		h.grpc.ServeHTTP(w, r)
		return
	}
	switch r.URL.Path {
	case "/healthz":
		h.probe(w, r, true)
	case "/readyz":
		h.probe(w, r, h.svc.synced())
	default:
		negotiate(r)
		h.rest.ServeHTTP(w, r)
	}
}

func (h *Handler) probe(w http.ResponseWriter, r *http.Request, ok bool) {
	w.Header().Set("Content-Type", contentTypeText)
	switch {
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		w.Header().Set("Allow", "GET, HEAD")
		w.WriteHeader(http.StatusMethodNotAllowed)
		_, _ = fmt.Fprintln(w, "Method Not Allowed")
	case !ok:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintln(w, "the pod cache has not synced yet")
	default:
		_, _ = fmt.Fprintln(w, "ok")
	}
}

// watchReadiness marks the OTA service SERVING in the gRPC health service once
// the pod cache has synced, as /readyz does for HTTP.
func (h *Handler) watchReadiness(ctx context.Context) {
	if cache.WaitForCacheSync(ctx.Done(), h.svc.synced) {
		h.health.SetServingStatus(edgeotav1.OTAService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
}
