package server

import (
	"net/http"
	"sync"
	"time"
)

// APIServerClock tells the time by the API server's clock: the Date header of
// its latest answer, advanced by the node's monotonic clock since. The node's
// wall clock can be wrong after a power cycle (no RTC battery, no NTP yet in a
// dead zone), so the time of the agent's last contact, which it keeps on disk
// and shows the owner, is taken from the API server. The zero value and a nil
// clock tell the node's time until an answer with a Date header arrives.
type APIServerClock struct {
	mu   sync.Mutex
	date time.Time // the latest Date header
	at   time.Time // the node's time when it arrived, with its monotonic reading
}

// Wrap returns rt with every response's Date header recorded, for
// rest.Config.Wrap.
func (c *APIServerClock) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil {
			c.observe(resp.Header.Get("Date"))
		}
		return resp, err
	})
}

// observe records a Date header's value; an absent or malformed one changes
// nothing.
func (c *APIServerClock) observe(date string) {
	t, err := http.ParseTime(date)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.date, c.at = t, time.Now()
}

// Now is the API server's time as last told, advanced since; the node's time
// when it has told none. It carries no monotonic reading: it is a wall time
// to store and show.
func (c *APIServerClock) Now() time.Time {
	if c == nil {
		return time.Now().Round(0)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.date.IsZero() {
		return time.Now().Round(0)
	}
	return c.date.Add(time.Since(c.at))
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
