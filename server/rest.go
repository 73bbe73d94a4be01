package server

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"k8s.io/klog/v2"

	"github.com/edgeota/edgeota/internal/untrusted"
)

// The two media types a REST caller can get. Content negotiation collapses
// the Accept header into one of them before grpc-gateway picks a marshaler.
const (
	mimeJSON = "application/json"
	mimeText = "text/plain"

	contentTypeText = "text/plain; charset=utf-8"
)

// wantsJSON reports whether any media range of the request's Accept header is
// application/json, parameters such as charset or q ignored. The request's
// Content-Type never decides: curl sends Accept: */* and must get the plain
// sentences OpenYurt's agent answered with.
func wantsJSON(r *http.Request) bool {
	for _, header := range r.Header.Values("Accept") {
		for _, mediaRange := range strings.Split(header, ",") {
			mediaType, _, err := mime.ParseMediaType(strings.TrimSpace(mediaRange))
			if err == nil && mediaType == mimeJSON {
				return true
			}
		}
	}
	return false
}

// negotiate rewrites the Accept header to exactly one of the media types the
// gateway has a marshaler for, so that grpc-gateway's exact-match lookup
// follows wantsJSON and never falls back to the request's Content-Type.
func negotiate(r *http.Request) {
	if wantsJSON(r) {
		r.Header.Set("Accept", mimeJSON)
	} else {
		r.Header.Set("Accept", mimeText)
	}
}

// sentence is a response whose content a person needs is one human-readable
// sentence: UpgradeResponse, ImagePullResponse, CancelActionResponse, and
// HoldResponse and ReleaseHoldResponse, whose sentence names the end and the
// pods (a queued answer's "queued": true, and a hold's "until" and "pods",
// show in JSON only; in text, the 202 and the sentence say it).
type sentence interface{ GetMessage() string }

// plainMarshaler writes sentences as newline-terminated text/plain, as
// OpenYurt's agent did; anything else (the PodList of GET /pods) stays JSON.
type plainMarshaler struct {
	listMarshaler
}

// ContentType is text/plain for sentences and the JSON marshaler's otherwise.
func (m plainMarshaler) ContentType(v any) string {
	if _, ok := v.(sentence); ok {
		return contentTypeText
	}
	return m.listMarshaler.ContentType(v)
}

// Marshal writes a sentence as one line of text and anything else as JSON.
func (m plainMarshaler) Marshal(v any) ([]byte, error) {
	if s, ok := v.(sentence); ok {
		return []byte(oneLine(s.GetMessage()) + "\n"), nil
	}
	return m.listMarshaler.Marshal(v)
}

// newGateway returns the REST side of the contract: grpc-gateway configured
// for Kubernetes-style JSON (only populated fields, Kubernetes' field names),
// plain-text sentences for callers that do not ask for JSON, FailedPrecondition
// as 403, 405 for a known path with the wrong method, path parameters that
// keep an encoded '/' inside their segment so validation can refuse it, and
// the freshness header under its own name (see SyncedAtHeader).
func newGateway() *runtime.ServeMux {
	jsonMarshaler := &runtime.JSONPb{UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true}}
	lists := listMarshaler{jsonMarshaler, &encodingMemo[[]byte]{}}
	return runtime.NewServeMux(
		runtime.WithMarshalerOption(mimeJSON, lists),
		runtime.WithMarshalerOption(mimeText, plainMarshaler{lists}),
		runtime.WithMarshalerOption(runtime.MIMEWildcard, plainMarshaler{lists}),
		runtime.WithErrorHandler(writeError),
		runtime.WithRoutingErrorHandler(writeRoutingError),
		runtime.WithUnescapingMode(runtime.UnescapingModeAllExceptReserved),
		runtime.WithDisablePathLengthFallback(),
		runtime.WithOutgoingHeaderMatcher(outgoingHeader),
		runtime.WithForwardResponseOption(acceptedWhenQueued),
	)
}

// queuedAnswer is a response that may say its request was queued:
// UpgradeResponse, ImagePullResponse, HoldResponse and ReleaseHoldResponse.
type queuedAnswer interface{ GetQueued() bool }

// acceptedWhenQueued answers a queued request with 202 Accepted: it is kept,
// not yet carried out.
func acceptedWhenQueued(_ context.Context, w http.ResponseWriter, resp proto.Message) error {
	if q, ok := resp.(queuedAnswer); ok && q.GetQueued() {
		w.WriteHeader(http.StatusAccepted)
	}
	return nil
}

// writeError answers a failed call: grpc-gateway's status JSON (code, message,
// details) for callers that asked for JSON, else the reason as one line of
// text. The HTTP status follows httpStatus, or the routing error's own.
func writeError(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	st := status.Convert(err)
	code := httpStatus(st.Code())
	var routing *runtime.HTTPStatusError
	if errors.As(err, &routing) {
		st, code = status.Convert(routing.Err), routing.HTTPStatus
	}

	var body []byte
	if r.Header.Get("Accept") == mimeJSON {
		var merr error
		if body, merr = (protojson.MarshalOptions{EmitUnpopulated: true}).Marshal(st.Proto()); merr != nil {
			klog.FromContext(ctx).Error(merr, "Encoding an error response")
			code, body = http.StatusInternalServerError, []byte(`{"code":13,"message":"failed to encode the error","details":[]}`)
		}
		w.Header().Set("Content-Type", mimeJSON)
	} else {
		body = []byte(oneLine(st.Message()) + "\n")
		w.Header().Set("Content-Type", contentTypeText)
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// writeRoutingError answers a request that matched no route: 404 for an
// unknown path, 405 for a known path with another method, 400 for a path
// grpc-gateway cannot parse.
func writeRoutingError(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, httpStatus int) {
	code := codes.NotFound
	switch httpStatus {
	case http.StatusMethodNotAllowed:
		code = codes.Unimplemented
	case http.StatusBadRequest:
		code = codes.InvalidArgument
	}
	msg := fmt.Sprintf("%s: %s %s", http.StatusText(httpStatus), r.Method, untrusted.Quote(r.URL.EscapedPath()))
	writeError(ctx, mux, m, w, r, &runtime.HTTPStatusError{HTTPStatus: httpStatus, Err: status.Error(code, msg)})
}

// oneLine folds a message onto a single line, so that a text body is always
// exactly one line whatever the API server's message held.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
