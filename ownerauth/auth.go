// Package ownerauth authenticates and authorizes the callers of the node
// agent's own API, the owner's: bearer tokens (kube-apiserver's static token
// file) and client certificates (CN the user, O the groups), TLS, and what
// each group may call, for gRPC and REST alike. It says nothing about the
// agent's own identity toward the API server (package apiidentity).
package ownerauth

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
	"github.com/edgeota/edgeota/internal/untrusted"
)

// The groups that authorize calls once authentication is configured, named as
// Kubernetes names groups so that the same client certificates and token files
// can serve both.
const (
	// GroupViewers may list the node's pods, apps and queued actions
	// (ListPods, ListUpgrades, WatchUpgrades, ListActions, and gRPC
	// reflection).
	GroupViewers = "edgeota:viewers"
	// GroupUpgraders may also act on them (ImagePull, Upgrade, Hold and
	// ReleaseHold, queued or not, and CancelAction).
	GroupUpgraders = "edgeota:upgraders"
)

// Identity is who called: a user of the token file, or the subject of a
// verified client certificate (CN the user, O the groups, as Kubernetes does).
type Identity struct {
	User   string   `json:"user"`
	UID    string   `json:"uid,omitempty"`
	Groups []string `json:"groups,omitempty"`
	// Via says how the caller authenticated (viaToken or viaCertificate), so
	// that a queued action's caller can be checked again the same way.
	Via string `json:"via,omitempty"`
}

// The ways in, as Identity.Via names them.
const (
	viaToken       = "token"
	viaCertificate = "certificate"
)

// Authenticator tells who sent a request. The zero value authenticates no one
// and lets every caller in anonymously: the loopback-only default. Once either
// way in is configured, every call but the health checks needs an identity
// whose groups allow it.
type Authenticator struct {
	// Tokens accepts "Authorization: Bearer <token>" for the tokens of a
	// static token file (see LoadTokenFile); nil accepts none.
	Tokens *TokenFile
	// ClientCerts accepts the client certificates the TLS listener verified
	// (see TLSConfig).
	ClientCerts bool
}

func (a Authenticator) enabled() bool { return a.Tokens != nil || a.ClientCerts }

// Access is what a call needs from its caller.
type Access int

// The levels of access, each allowing what the one before allows.
const (
	// Open calls need no caller: the health checks.
	Open Access = iota
	// View calls read: a viewer or an upgrader.
	View
	// Upgrade calls act: an upgrader.
	Upgrade
)

// GRPCAccess is what a gRPC method needs: health stays open, the reads
// (listing pods, apps and queued actions, watching apps) and reflection (which only describes the
// API) need a viewer, the acting RPCs (queuing and cancelling included) an
// upgrader, and so does any method added later until it is named here.
func GRPCAccess(fullMethod string) Access {
	switch fullMethod {
	case edgeotav1.OTAService_ListPods_FullMethodName, edgeotav1.OTAService_ListActions_FullMethodName,
		edgeotav1.OTAService_ListUpgrades_FullMethodName, edgeotav1.OTAService_WatchUpgrades_FullMethodName:
		return View
	case edgeotav1.OTAService_ImagePull_FullMethodName, edgeotav1.OTAService_Upgrade_FullMethodName,
		edgeotav1.OTAService_CancelAction_FullMethodName, edgeotav1.OTAService_Hold_FullMethodName,
		edgeotav1.OTAService_ReleaseHold_FullMethodName:
		return Upgrade
	}
	switch {
	case strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/"):
		return Open
	case strings.HasPrefix(fullMethod, "/grpc.reflection."):
		return View
	default:
		return Upgrade
	}
}

// RESTAccess is what a REST request needs (the probes never get here): the
// gateway only reads with GET (GET /pods, GET /edgeota.io/v1/actions) and
// only acts with POST and DELETE (queuing and cancelling included), so the
// method decides without trusting any parsing of the path.
func RESTAccess(r *http.Request) Access {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return View
	}
	return Upgrade
}

// Caller is what the HTTP layer learned about a request's sender, kept in the
// request's context for authorization and the audit log.
type Caller struct {
	// Identity is nil for an anonymous caller.
	Identity *Identity
	// Protocol is "REST" or "gRPC".
	Protocol string
	authErr  error // credentials were presented and refused
}

type callerKey struct{}

// CallerFrom is the caller Identify put in ctx (the zero Caller if none).
func CallerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// Identify authenticates r and returns it with the caller in its context,
// for Authorize, the interceptors and the audit log.
func (a Authenticator) Identify(r *http.Request, protocol string) *http.Request {
	c := Caller{Protocol: protocol}
	if a.enabled() {
		c.Identity, c.authErr = a.authenticate(r)
	}
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
}

// authenticate returns the identity behind r's credentials, nil for none. A
// bearer token, when present, must be valid: a wrong token never falls back
// to the certificate or to anonymous.
func (a Authenticator) authenticate(r *http.Request) (*Identity, error) {
	if token, ok := bearerToken(r); ok {
		if a.Tokens == nil {
			return nil, errors.New("bearer tokens are not accepted here")
		}
		if id, ok := a.Tokens.lookup(token); ok {
			return id, nil
		}
		return nil, errors.New("invalid bearer token")
	}
	if a.ClientCerts && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		subject := r.TLS.VerifiedChains[0][0].Subject
		return &Identity{User: subject.CommonName, Groups: subject.Organization, Via: viaCertificate}, nil
	}
	return nil, nil
}

// bearerToken returns the token of an "Authorization: Bearer" header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}

// Authorize returns nil if the caller in ctx may make a call that needs
// need, else Unauthenticated (no or refused credentials) or PermissionDenied
// (an identity without the group).
func (a Authenticator) Authorize(ctx context.Context, need Access) error {
	if need == Open || !a.enabled() {
		return nil
	}
	c := CallerFrom(ctx)
	if c.authErr != nil {
		return status.Errorf(codes.Unauthenticated, "authentication failed: %v", c.authErr)
	}
	return a.allows(c.Identity, need)
}

// allows returns nil if identity (nil for an anonymous caller) may make a
// call that needs need under this configuration. It is also how a queued
// action's caller is checked again when the action runs.
func (a Authenticator) allows(identity *Identity, need Access) error {
	switch {
	case need == Open || !a.enabled():
		return nil
	case identity == nil:
		return status.Error(codes.Unauthenticated, "authentication required: present a bearer token or a client certificate")
	case slices.Contains(identity.Groups, GroupUpgraders),
		need == View && slices.Contains(identity.Groups, GroupViewers):
		return nil
	}
	group := GroupUpgraders
	if need == View {
		group = GroupViewers + " or " + GroupUpgraders
	}
	return status.Errorf(codes.PermissionDenied, "user %s is not allowed this call: it needs group %s", untrusted.Quote(identity.User), group)
}

// Reauthorize returns nil if a caller recorded earlier (nil for an anonymous
// one) may still make a call that needs need under this configuration: a
// token user with the groups the token file gives it now, a certificate's
// subject while certificates are still accepted. A queued action runs only
// if its caller passes.
func (a Authenticator) Reauthorize(recorded *Identity, need Access) error {
	if !a.enabled() || recorded == nil {
		return a.allows(recorded, need)
	}
	current := recorded
	switch recorded.Via {
	case viaToken:
		var id *Identity
		var ok bool
		if a.Tokens != nil {
			id, ok = a.Tokens.user(recorded.User, recorded.UID)
		}
		if !ok {
			return status.Errorf(codes.PermissionDenied, "user %s has no token in the agent's token file any more", untrusted.Quote(recorded.User))
		}
		current = id
	case viaCertificate:
		if !a.ClientCerts {
			return status.Errorf(codes.PermissionDenied, "user %s authenticated with a client certificate, which the agent no longer accepts", untrusted.Quote(recorded.User))
		}
	default:
		return status.Errorf(codes.PermissionDenied, "user %s authenticated in a way this agent does not know", untrusted.Quote(recorded.User))
	}
	return a.allows(current, need)
}

// UnaryInterceptor and StreamInterceptor authorize gRPC calls by method, with
// the caller that Identify put in the request's context (grpc-go's ServeHTTP
// keeps it), so refusals are proper gRPC statuses.
func (a Authenticator) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := a.Authorize(ctx, GRPCAccess(info.FullMethod)); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (a Authenticator) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := a.Authorize(ss.Context(), GRPCAccess(info.FullMethod)); err != nil {
		return err
	}
	return handler(srv, ss)
}
