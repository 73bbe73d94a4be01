package proc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitServingWaitsForAcceptedContent(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			_, _ = w.Write([]byte("warming up"))
			return
		}
		_, _ = w.Write([]byte("synced"))
	}))
	t.Cleanup(srv.Close)

	p := startSleeper(t)
	err := p.WaitServing(context.Background(), srv.URL, 10*time.Second, func(b []byte) bool { return string(b) == "synced" })
	if err != nil {
		t.Fatalf("WaitServing: %v", err)
	}
	if got := calls.Load(); got < 3 {
		t.Errorf("got %d probes, want at least 3: it returned before the content was accepted", got)
	}
}

func TestWaitServingNamesTheLastAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("never"))
	}))
	t.Cleanup(srv.Close)

	p := startSleeper(t)
	err := p.WaitServing(context.Background(), srv.URL, 700*time.Millisecond, func([]byte) bool { return false })
	if err == nil || !strings.Contains(err.Error(), "content not yet as awaited") {
		t.Errorf("got %v, want a timeout naming content not yet as awaited", err)
	}
}

func TestWaitReadyFailsWhenTheProcessExits(t *testing.T) {
	p := startHelper(t, "quitter", helperExit)
	err := p.WaitReady(context.Background(), "http://127.0.0.1:1/readyz", 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "quitter exited") {
		t.Errorf("got %v, want an error saying the process exited", err)
	}
}
