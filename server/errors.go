package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// apiError maps a failed API server call to the status the contract promises:
// a refusal (RBAC, admission) is PermissionDenied with the API server's
// reason; a pod that is gone is NotFound; a lost race (a conflict, or a pod
// replaced under a status patch) is Aborted; an API server
// out of reach or slower than timeout is Unavailable.
func apiError(action string, timeout time.Duration, err error) error {
	var apiStatus apierrors.APIStatus
	switch {
	case apierrors.IsNotFound(err):
		return status.Errorf(codes.NotFound, "%s: not found", action)
	case apierrors.IsConflict(err):
		return status.Errorf(codes.Aborted, "%s: the pod changed meanwhile, try again: %v", action, err)
	case uidMismatch(err):
		// A status patch carries the pod's UID as its precondition, and the
		// API server refuses a namesake's as an immutable field (422): the
		// pod was replaced, a lost race like a conflict, not a refusal.
		return status.Errorf(codes.Aborted, "%s: the pod changed meanwhile (it was replaced by a namesake), try again: %s", action, messageOf(err))
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsInvalid(err):
		return status.Errorf(codes.PermissionDenied, "%s: the API server refused: %s: %s", action, apierrors.ReasonForError(err), messageOf(err))
	case errors.As(err, &apiStatus) && apiStatus.Status().Code < http.StatusInternalServerError &&
		!apierrors.IsTooManyRequests(err) && !apierrors.IsTimeout(err):
		return status.Errorf(codes.Internal, "%s: %v", action, err)
	default:
		return status.Errorf(codes.Unavailable, "%s: the API server is unreachable or did not answer within %s: %v", action, timeout, err)
	}
}

func messageOf(err error) string {
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) && apiStatus.Status().Message != "" {
		return apiStatus.Status().Message
	}
	return err.Error()
}

// httpStatus is the HTTP status for a gRPC code. It follows grpc-gateway but
// for FailedPrecondition, which OpenYurt's agent answers with 403 Forbidden.
func httpStatus(c codes.Code) int {
	if c == codes.FailedPrecondition {
		return http.StatusForbidden
	}
	return runtime.HTTPStatusFromCode(c)
}
