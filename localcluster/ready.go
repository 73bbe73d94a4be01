package localcluster

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// probeClient bounds each readiness probe.
var probeClient = &http.Client{Timeout: 5 * time.Second}

// WaitReady waits until GET url (a readiness probe such as ota-server's
// /readyz) answers 200 OK, within timeout. It fails at once if the process
// exits meanwhile (e.g. its port was taken), pointing at its log.
func (p *Process) WaitReady(ctx context.Context, url string, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
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
		_ = resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to be ready at %s (last: %s): %w", p.Name, url, last, err)
	}
	return nil
}
