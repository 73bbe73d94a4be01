package measure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Call is one request of a client over its own connection.
type Call func(ctx context.Context) error

// Dialer opens one client's connection and returns its Call and a close.
type Dialer func() (Call, func(), error)

// Load is how hard Drive pushes.
type Load struct {
	// Clients is how many callers run at once, each on its own connection.
	Clients int
	// Duration bounds the run in time.
	Duration time.Duration
	// MaxPerClient bounds each caller's loop in count; 0 means no bound but
	// Duration.
	MaxPerClient int
}

// Result is what Drive saw of one load level against one server.
type Result struct {
	// Requests counts the answered calls; Errors the failed ones, and
	// FirstErr joins each client's first failure, to say what failed.
	Requests, Errors int
	FirstErr         error
	// RPS is answered calls per second over the run.
	RPS float64
	// P50 and P99 are the answered calls' latencies.
	P50, P99 time.Duration
}

// Drive runs load.Clients back-to-back callers, each with its own
// connection from dial, until load.Duration passes or each has made
// load.MaxPerClient calls, and reports the answered calls' rate and
// latency. Each client makes one untimed call first, so that connecting is
// not measured; a call cut off by the end of the run is not counted.
func Drive(ctx context.Context, load Load, dial Dialer) (Result, error) {
	var r Result
	calls := make([]Call, load.Clients)
	for i := range calls {
		c, closeConn, err := dial()
		if err != nil {
			return r, err
		}
		defer closeConn()
		if err := c(ctx); err != nil {
			return r, fmt.Errorf("warming up a client: %w", err)
		}
		calls[i] = c
	}
	latencies := make([][]time.Duration, load.Clients)
	failures := make([]error, load.Clients) // each client's first failure
	failed := make([]int, load.Clients)
	// A cancel rather than a deadline: gRPC would turn a deadline into its
	// own timer, which can fail a call before the context reports the end.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := time.AfterFunc(load.Duration, cancel)
	defer stop.Stop()
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			for n := 0; load.MaxPerClient == 0 || n < load.MaxPerClient; n++ {
				t := time.Now()
				err := c(runCtx)
				if runCtx.Err() != nil {
					return // cut off at the end: not an answer
				}
				if err != nil {
					if failed[i]++; failures[i] == nil {
						failures[i] = err
					}
					continue
				}
				latencies[i] = append(latencies[i], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(latencies...)
	slices.Sort(all)
	r.Requests, r.Errors, r.FirstErr = len(all), Sum(failed), errors.Join(failures...)
	if len(all) == 0 {
		if r.FirstErr != nil {
			return r, fmt.Errorf("no request was answered; %d failed, first: %w", r.Errors, r.FirstErr)
		}
		return r, errors.New("no request was answered")
	}
	r.RPS = float64(len(all)) / elapsed.Seconds()
	r.P50, r.P99 = Percentile(all, 0.50), Percentile(all, 0.99)
	return r, ctx.Err()
}

// HTTPGet GETs url over one keep-alive HTTP/1.1 connection per client,
// reading every body to the end; an answer other than 200 is a failure.
func HTTPGet(url string) Dialer {
	return func() (Call, func(), error) {
		transport := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
		client := &http.Client{Transport: transport}
		return func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: %s", url, resp.Status)
			}
			return nil
		}, transport.CloseIdleConnections, nil
	}
}
