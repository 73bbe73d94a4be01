package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeota/edgeota/ownerauth"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	t    testing.TB
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	ca := &testCA{t: t}
	ca.cert, ca.key = ca.sign(tmpl, nil, nil)
	ca.pool = x509.NewCertPool()
	ca.pool.AddCert(ca.cert)
	return ca
}

// sign issues tmpl, signed by parent (self-signed when nil).
func (ca *testCA) sign(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		ca.t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		ca.t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		ca.t.Fatal(err)
	}
	return cert, key
}

// issue returns a leaf certificate for the subject: a server certificate for
// 127.0.0.1 when server, else a client certificate.
func (ca *testCA) issue(subject pkix.Name, server bool) tls.Certificate {
	ca.t.Helper()
	tmpl := &x509.Certificate{Subject: subject, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	cert, key := ca.sign(tmpl, ca.cert, ca.key)
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, Leaf: cert, PrivateKey: key}
}

// clientCert is a client certificate with CN user and O groups.
func (ca *testCA) clientCert(user string, groups ...string) tls.Certificate {
	return ca.issue(pkix.Name{CommonName: user, Organization: groups}, false)
}

// writePEM writes certificate and key files in dir and returns their paths.
func writePEM(t testing.TB, dir, name string, c tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	for path, block := range map[string]*pem.Block{
		certFile: {Type: "CERTIFICATE", Bytes: c.Certificate[0]},
		keyFile:  {Type: "PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

// tlsPair is a server configuration made by TLSConfig from files, and a
// client configuration that trusts it and presents clientCerts.
func tlsPair(t testing.TB, ca *testCA, clientCA *testCA, tokensToo bool, clientCerts ...tls.Certificate) (server, client *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := writePEM(t, dir, "server", ca.issue(pkix.Name{CommonName: "ota-server"}, true))
	caFile := ""
	if clientCA != nil {
		caFile = filepath.Join(dir, "client-ca.crt")
		if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: clientCA.cert.Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	clientAuth := tls.RequireAndVerifyClientCert
	if tokensToo {
		clientAuth = tls.VerifyClientCertIfGiven
	}
	server, err := ownerauth.TLSConfig(certFile, keyFile, caFile, clientAuth)
	if err != nil {
		t.Fatalf("TLSConfig: %v", err)
	}
	return server, &tls.Config{RootCAs: ca.pool, Certificates: clientCerts, MinVersion: tls.VersionTLS12}
}
