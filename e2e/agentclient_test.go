//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

// httpClient bounds every REST call to the agent: an answer, not a hang.
var httpClient = &http.Client{Timeout: 30 * time.Second}

// post calls the agent's REST action ("imagepull" or "upgrade") on the pod
// and returns the status code and body. The path is spelled out on purpose,
// as OpenYurt's clients and curl scripts spell it: a black-box check of the
// contract, not of the generated gateway.
func (a agent) post(ctx context.Context, namespace, pod, action string) (int, string, error) {
	url := fmt.Sprintf("http://%s/openyurt.io/v1/namespaces/%s/pods/%s/%s", a.addr, namespace, pod, action)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return 0, "", err
	}
	return do(req)
}

// listPods calls the agent's GET /pods and decodes the v1 PodList.
func (a agent) listPods(ctx context.Context) (*corev1.PodList, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.addr+"/pods", nil)
	if err != nil {
		return nil, err
	}
	code, body, err := do(req)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /pods: %d %s", code, body)
	}
	var list corev1.PodList
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		return nil, fmt.Errorf("GET /pods: decoding a v1 PodList: %w", err)
	}
	return &list, nil
}

func do(req *http.Request) (int, string, error) {
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// grpcClient connects to the agent's gRPC service (plaintext, as grpcurl
// -plaintext does), closed when the test ends.
func (e *env) grpcClient(a agent) edgeotav1.OTAServiceClient {
	e.t.Helper()
	return edgeotav1.NewOTAServiceClient(e.grpcConn(a))
}

// grpcConn is a plaintext gRPC connection to the agent, for any of its
// services, closed when the test ends.
func (e *env) grpcConn(a agent) *grpc.ClientConn {
	e.t.Helper()
	conn, err := grpc.NewClient(a.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = conn.Close() })
	return conn
}
