package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

// dial returns a client of the agent, over TLS when any TLS flag is given,
// with the bearer token on every call when one is.
func (o options) dial() (edgeotav1.OTAServiceClient, func(), error) {
	creds := insecure.NewCredentials()
	if o.usesTLS() {
		cfg, err := o.tlsConfig()
		if err != nil {
			return nil, nil, err
		}
		creds = credentials.NewTLS(cfg)
	}
	dialOpts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	token := o.token
	if o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			return nil, nil, fmt.Errorf("--token-file %s is empty", o.tokenFile)
		}
	}
	if token != "" {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	conn, err := grpc.NewClient(o.server, dialOpts...)
	if err != nil {
		return nil, nil, fmt.Errorf("--server %q: %w", o.server, err)
	}
	return edgeotav1.NewOTAServiceClient(conn), func() { _ = conn.Close() }, nil
}

// usesTLS reports whether otactl connects with TLS: any TLS flag says so.
func (o options) usesTLS() bool { return o.caFile != "" || o.certFile != "" }

// local reports whether the agent's address does not cross the network: a
// loopback IP, localhost, or a Unix socket. The address is a gRPC target:
// host:port, or dns:///host:port, unix:PATH and the like.
func local(target string) bool {
	if strings.HasPrefix(target, "unix:") || strings.HasPrefix(target, "unix-abstract:") {
		return true
	}
	if _, rest, ok := strings.Cut(target, ":///"); ok {
		target = rest
	}
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return false
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	return host == "localhost"
}

// tlsConfig verifies the agent with --ca-file (the system's CAs otherwise)
// and presents --cert-file when given.
func (o options) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("--ca-file holds no PEM certificate")
		}
	}
	if o.certFile != "" {
		cert, err := tls.LoadX509KeyPair(o.certFile, o.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert-file, --key-file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// bearer sends "authorization: Bearer <token>". Without TLS, validate lets it
// go only to a local agent, or off loopback with --insecure, so gRPC's own
// refusal of credentials without transport security is not needed.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (b bearer) RequireTransportSecurity() bool { return false }
