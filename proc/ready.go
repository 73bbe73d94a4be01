package proc

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// probeClient bounds each readiness probe.
var probeClient = &http.Client{Timeout: 5 * time.Second}

// probeInterval is how often a readiness probe is tried.
const probeInterval = 200 * time.Millisecond

// WaitReady waits until GET url (a readiness probe such as ota-server's
// /readyz) answers 200 OK, within timeout. It fails at once if the process
// exits meanwhile (e.g. its port was taken), pointing at its log.
func (p *Process) WaitReady(ctx context.Context, url string, timeout time.Duration) error {
	return p.WaitServing(ctx, url, timeout, nil)
}

// WaitServing is WaitReady for callers that also need the answer's content:
// it waits until GET url answers 200 OK with a body that accept takes (any
// body when accept is nil), e.g. metrics that show a cache has synced.
func (p *Process) WaitServing(ctx context.Context, url string, timeout time.Duration, accept func(body []byte) bool) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, probeInterval, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.Done():
			return false, fmt.Errorf("%s exited: %w; see %s", p.Name, p.Err(), p.LogPath)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := probeClient.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		defer resp.Body.Close()
		last = resp.Status
		if resp.StatusCode != http.StatusOK {
			return false, nil
		}
		if accept == nil {
			return true, nil
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if !accept(body) {
			last = resp.Status + ", content not yet as awaited"
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to be ready at %s (last: %s): %w", p.Name, url, last, err)
	}
	return nil
}
