package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The API server's audit log, for a separate, untimed run (BENCH_AUDIT=1):
// which client wrote which pods. kwokctl starts kube-apiserver with the
// audit policy that KWOK_KUBE_AUDIT_POLICY names (kwokctl reads its options
// from the environment, which the local cluster passes on), and the log
// goes to the cluster's logs/audit.log. Logging every write slows the API
// server: the run's timings are not figures.

// auditPolicy logs the metadata of every write of pods (their status and
// binding included), and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete"]
  resources:
  - group: ""
    resources: ["pods", "pods/status", "pods/binding", "pods/eviction"]
- level: None
`

// enableAudit writes the audit policy into dir and has the cluster created
// next log by it.
func enableAudit(dir string) error {
	path := filepath.Join(dir, "audit-policy.yaml")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(auditPolicy), 0o644); err != nil {
		return fmt.Errorf("writing the audit policy: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	return os.Setenv("KWOK_KUBE_AUDIT_POLICY", abs)
}

// auditLog is where the session's cluster's API server logs.
func (s *session) auditLog() string { return filepath.Join(s.cluster.WorkDir(), "logs", "audit.log") }

// auditEvent is what the bench reads of one audit log line.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource, Namespace, Subresource string
	} `json:"objectRef"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
}

// podWritesByWriter counts the writes of pods in namespace ns the audit log
// at path records as received from from to to, by writer (writerOf).
func podWritesByWriter(path, ns string, from, to time.Time) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the audit log (BENCH_AUDIT=1): %w", err)
	}
	defer f.Close()
	out := map[string]float64{}
	lines := bufio.NewScanner(f)
	lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for lines.Scan() {
		var e auditEvent
		if json.Unmarshal(lines.Bytes(), &e) != nil || e.Stage != "ResponseComplete" || e.ObjectRef.Resource != "pods" || e.ObjectRef.Namespace != ns {
			continue
		}
		if e.RequestReceived.Before(from) || e.RequestReceived.After(to) {
			continue
		}
		switch e.Verb {
		case "create", "update", "patch", "delete":
			out[writerOf(&e)]++
		}
	}
	return out, lines.Err()
}

// writerOf names who wrote: the nodes (system:node:*: the simulated agents,
// acting as their node), a kube-system controller by its service account,
// else the client by its user agent's name (kwok, ota-controller,
// kube-scheduler, ...).
func writerOf(e *auditEvent) string {
	switch u := e.User.Username; {
	case strings.HasPrefix(u, "system:node:"):
		return "nodes"
	case strings.HasPrefix(u, "system:serviceaccount:kube-system:"):
		return strings.TrimPrefix(u, "system:serviceaccount:kube-system:")
	}
	name, _, _ := strings.Cut(e.UserAgent, "/")
	if name == "" {
		return e.User.Username
	}
	return name
}
