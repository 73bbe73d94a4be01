package proc

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// FreePorts returns n distinct loopback ports that are free right now, for
// a local cluster's components and for the binaries tests and benchmarks
// start beside it; the caller binds them later.
//
// Between that check and the bind, nothing else may take a port. A port from
// the kernel's ephemeral range, free for a moment, is what the kernel gives
// the next outgoing connection (and clusters side by side make thousands),
// so the ports are chosen below that range, where only listeners bind, at
// random across it, and never twice by one process: scenarios that run side
// by side in one test process never race each other for a port, and
// processes side by side (two suites, a bench beside a suite) rarely do.
// kwokctl scans down from 32767 for the few ports it chooses itself, so the
// range stops well below it.
func FreePorts(n int) ([]string, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	low, high := portRange()
	ports := make([]string, 0, n)
	for attempts := 0; len(ports) < n; attempts++ {
		if attempts >= 100*n {
			return nil, fmt.Errorf("finding %d free loopback ports in %d-%d: only %d found", n, low, high-1, len(ports))
		}
		port := low + rand.IntN(high-low)
		if handedOut[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken
		}
		_ = l.Close()
		handedOut[port] = true
		ports = append(ports, strconv.Itoa(port))
	}
	return ports, nil
}

var (
	portsMu sync.Mutex
	// handedOut are the ports FreePorts returned in this process: never
	// again, even once free, as the server given one may not have bound it
	// yet, or may bind it again when restarted.
	handedOut = map[int]bool{}
)

// Ports below firstPort are left to well-known and registered services;
// lastPort stays below kwokctl's own scan, which starts at 32767.
const (
	firstPort = 10000
	lastPort  = 30000
)

// portRange is where FreePorts chooses, [low, high): from firstPort to
// lastPort, or to the start of the kernel's ephemeral range if that is
// lower (Linux: /proc/sys/net/ipv4/ip_local_port_range).
func portRange() (low, high int) {
	high = lastPort
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(data)); len(f) == 2 {
			if start, err := strconv.Atoi(f[0]); err == nil && start > firstPort+1000 {
				high = min(high, start)
			}
		}
	}
	return firstPort, high
}
