package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	edgeotav1 "github.com/edgeota/edgeota/gen/go/edgeota/v1"
)

// maxRequestsPerClient bounds each client's loop in count, as the load time
// bounds it in time.
const maxRequestsPerClient = 1 << 20

// call is one request of a client over its own connection.
type call func(ctx context.Context) error

// dialer opens one client's connection and returns its call and a close.
type dialer func() (call, func(), error)

// loadResult is one load level against one server.
type loadResult struct {
	requests, errors int
	firstErr         error // the first failure, to say what failed
	rps              float64
	p50, p99         time.Duration
}

// drive runs clients back-to-back callers, each with its own connection,
// for d, and reports the answered requests' rate and latency. Each client
// makes one untimed call first, so that connecting is not measured.
func drive(ctx context.Context, clients int, d time.Duration, dial dialer) (loadResult, error) {
	var r loadResult
	calls := make([]call, clients)
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
	latencies := make([][]time.Duration, clients)
	failures := make([]error, clients) // each client's first failure
	failed := make([]int, clients)
	// A cancel rather than a deadline: gRPC would turn a deadline into its
	// own timer, which can fail a call before the context reports the end.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := time.AfterFunc(d, cancel)
	defer stop.Stop()
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			for n := 0; n < maxRequestsPerClient; n++ {
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
	r.requests, r.errors, r.firstErr = len(all), sum(failed), errors.Join(failures...)
	if len(all) == 0 {
		return r, errors.New("no request was answered")
	}
	r.rps = float64(len(all)) / elapsed.Seconds()
	r.p50, r.p99 = percentile(all, 0.50), percentile(all, 0.99)
	return r, ctx.Err()
}

// restDialer GETs url over a keep-alive HTTP/1.1 connection per client.
func restDialer(url string) dialer {
	return func() (call, func(), error) {
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

// grpcDialer calls ListPods over one grpc.ClientConn per client.
func grpcDialer(addr string) dialer {
	return func() (call, func(), error) {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, nil, fmt.Errorf("connecting to %s: %w", addr, err)
		}
		client := edgeotav1.NewOTAServiceClient(conn)
		return func(ctx context.Context) error {
			_, err := client.ListPods(ctx, &edgeotav1.ListPodsRequest{})
			return err
		}, func() { _ = conn.Close() }, nil
	}
}
