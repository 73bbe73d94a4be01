package harness

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Proxy is a TCP proxy on loopback between a client and a target (the API
// server), which can cut the client off as a broken network would: Cut drops
// every open connection and holds new ones open without an answer until
// Restore, so that the client sees both failures and hangs.
type Proxy struct {
	target   string
	listener net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{} // client and target sides alike
	wg    sync.WaitGroup
}

// StartProxy listens on a free loopback port and forwards to target.
func StartProxy(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting a proxy to %s: %w", target, err)
	}
	p := &Proxy{target: target, listener: l, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's host:port, for the client's kubeconfig.
func (p *Proxy) Addr() string {
	return p.listener.Addr().String()
}

// Cut drops all connections and leaves new ones unanswered.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.closeAllLocked()
}

// Restore lets connections through again; those held while cut are dropped,
// so that the client reconnects.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	p.closeAllLocked()
}

// Close stops the proxy and drops all connections.
func (p *Proxy) Close() error {
	err := p.listener.Close()
	p.mu.Lock()
	p.closeAllLocked()
	p.mu.Unlock()
	p.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("closing the proxy to %s: %w", p.target, err)
	}
	return nil
}

func (p *Proxy) closeAllLocked() {
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// holdIfCut registers a new client connection to be held without an answer
// (until Restore or Close drops it) if the proxy is cut; it reports whether
// it did.
func (p *Proxy) holdIfCut(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// trackUnlessCut registers a forwarded connection, so that Cut drops it,
// unless the proxy was cut meanwhile; it reports whether it did.
func (p *Proxy) trackUnlessCut(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) accept() {
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return // closed
		}
		if p.holdIfCut(client) {
			continue // held without an answer until Restore or Close
		}
		p.wg.Go(func() { p.forward(client) })
	}
}

func (p *Proxy) forward(client net.Conn) {
	target, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.trackUnlessCut(client) || !p.trackUnlessCut(target) {
		_ = client.Close()
		_ = target.Close()
		return
	}
	var copies sync.WaitGroup
	copies.Go(func() { pipe(target, client) })
	copies.Go(func() { pipe(client, target) })
	copies.Wait()
}

// pipe copies until either side fails, then closes both so that the other
// direction ends too.
func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}
