package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestValidateOptions(t *testing.T) {
	base := options{nodeName: "edge-1", bindAddress: "127.0.0.1", port: 10267, apiTimeout: 5 * time.Second, queuedActionTTL: time.Hour,
		upgradeDeadline: 10 * time.Minute, maxWatchers: 64}
	cases := []struct {
		name    string
		change  func(*options)
		wantErr string // "" means valid
	}{
		{name: "defaults", change: func(*options) {}},
		{name: "no node name", change: func(o *options) { o.nodeName = "" }, wantErr: "--node-name is required"},
		{name: "bind address not an IP", change: func(o *options) { o.bindAddress = "localhost" }, wantErr: "is not an IP address"},
		{name: "port out of range", change: func(o *options) { o.port = 70000 }, wantErr: "out of range"},
		{name: "non-positive API timeout", change: func(o *options) { o.apiTimeout = 0 }, wantErr: "must be positive"},
		{name: "non-positive upgrade deadline", change: func(o *options) { o.upgradeDeadline = 0 }, wantErr: "--upgrade-deadline"},
		{name: "no watchers", change: func(o *options) { o.maxWatchers = 0 }, wantErr: "--max-watchers"},
		{name: "non-positive queued action TTL", change: func(o *options) { o.queuedActionTTL = 0 }, wantErr: "--queued-action-ttl"},
		{name: "certificate without key", change: func(o *options) { o.tlsCertFile = "tls.crt" }, wantErr: "go together"},
		{name: "key without certificate", change: func(o *options) { o.tlsKeyFile = "tls.key" }, wantErr: "go together"},
		{name: "client CA without TLS", change: func(o *options) { o.clientCAFile = "ca.crt" }, wantErr: "--client-ca-file needs TLS"},
		{name: "client CA with TLS", change: func(o *options) { o.tlsCertFile, o.tlsKeyFile, o.clientCAFile = "tls.crt", "tls.key", "ca.crt" }},
		{name: "tokens over plain HTTP on loopback", change: func(o *options) { o.tokenFile = "tokens.csv" }},
		{name: "tokens over plain HTTP on IPv6 loopback", change: func(o *options) { o.tokenFile, o.bindAddress = "tokens.csv", "::1" }},
		{name: "tokens over plain HTTP off loopback", change: func(o *options) { o.tokenFile, o.bindAddress = "tokens.csv", "0.0.0.0" },
			wantErr: "only allowed on loopback"},
		{name: "tokens over TLS off loopback", change: func(o *options) {
			o.tokenFile, o.bindAddress, o.tlsCertFile, o.tlsKeyFile = "tokens.csv", "10.0.0.5", "tls.crt", "tls.key"
		}},
		{name: "off loopback without authentication (warned, allowed)", change: func(o *options) { o.bindAddress = "0.0.0.0" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.change(&o)
			err := o.validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("got %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestRejectsTokenOverPlainHTTPOffLoopback proves run refuses to start, before
// touching the API server, when tokens would cross the network in the clear.
func TestRejectsTokenOverPlainHTTPOffLoopback(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte("t,u,1,edgeota:viewers\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := options{nodeName: "edge-1", bindAddress: "0.0.0.0", port: 0, apiTimeout: time.Second, queuedActionTTL: time.Hour, tokenFile: tokens,
		kubeconfig: filepath.Join(t.TempDir(), "missing")}
	if err := run(t.Context(), o); err == nil || !strings.Contains(err.Error(), "only allowed on loopback") {
		t.Errorf("got %v, want a refusal to serve tokens over plain HTTP off loopback", err)
	}
}

// TestStateDirThatCannotBeUsedStopsTheStart: a --state-dir that cannot be
// created is a clear error at start, before the API server is contacted.
func TestStateDirThatCannotBeUsedStopsTheStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	o := options{nodeName: "edge-1", bindAddress: "127.0.0.1", port: 0, apiTimeout: time.Second, queuedActionTTL: time.Hour,
		upgradeDeadline: time.Minute, maxWatchers: 1, stateDir: filepath.Join(file, "state"), kubeconfig: filepath.Join(t.TempDir(), "missing")}
	if err := run(t.Context(), o); err == nil || !strings.Contains(err.Error(), "--state-dir") {
		t.Errorf("got %v, want an error naming --state-dir", err)
	}
}

func TestParseOwner(t *testing.T) {
	if uid, gid, err := parseOwner("65532:65533"); err != nil || uid != 65532 || gid != 65533 {
		t.Errorf("got %d, %d, %v; want 65532, 65533, nil", uid, gid, err)
	}
	for _, bad := range []string{"", "65532", "a:b", "-1:0", "1:", ":1"} {
		if _, _, err := parseOwner(bad); err == nil {
			t.Errorf("parseOwner(%q): got nil, want an error", bad)
		}
	}
}

func TestServingLoadsCredentials(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.csv"), filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(good, []byte("t,u,1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("t,u\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		o        options
		wantErr  string
		wantTLS  bool
		wantAuth bool
	}{
		{name: "nothing", o: options{}},
		{name: "tokens", o: options{tokenFile: good}, wantAuth: true},
		{name: "malformed token file", o: options{tokenFile: bad}, wantErr: "line 1"},
		{name: "missing certificate", o: options{tlsCertFile: filepath.Join(dir, "no.crt"), tlsKeyFile: filepath.Join(dir, "no.key")}, wantErr: "loading the serving certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			auth, cfg, err := tc.o.serving()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want nil", err)
			}
			if (cfg != nil) != tc.wantTLS || (auth.Tokens != nil || auth.ClientCerts) != tc.wantAuth {
				t.Errorf("got TLS %v, authentication %+v; want TLS %v, authentication %v", cfg != nil, auth, tc.wantTLS, tc.wantAuth)
			}
		})
	}
}
