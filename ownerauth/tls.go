package ownerauth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLSConfig returns the agent's TLS configuration from its certificate and
// key. With clientCAFile, client certificates are verified against that CA,
// as clientAuth says: tls.RequireAndVerifyClientCert, or
// tls.VerifyClientCertIfGiven where a caller may present a bearer token
// instead. It offers h2 as well as HTTP/1.1, so gRPC and REST share the port.
func TLSConfig(certFile, keyFile, clientCAFile string, clientAuth tls.ClientAuthType) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the serving certificate: %w", err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	}
	if clientCAFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("reading the client CA: %w", err)
	}
	cfg.ClientCAs = x509.NewCertPool()
	if !cfg.ClientCAs.AppendCertsFromPEM(pem) {
		return nil, errors.New("the client CA file holds no PEM certificate")
	}
	if clientAuth != tls.RequireAndVerifyClientCert && clientAuth != tls.VerifyClientCertIfGiven {
		return nil, fmt.Errorf("client certificates checked as %v: want them verified, required or if given", clientAuth)
	}
	cfg.ClientAuth = clientAuth
	return cfg, nil
}
