package proc

import (
	"fmt"
	"net"
)

// FreePorts returns n distinct loopback ports that are free right now, chosen
// by the kernel, for a local cluster's components and for the binaries tests
// and benchmarks start beside it.
func FreePorts(n int) ([]string, error) {
	ports := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		_, port, _ := net.SplitHostPort(l.Addr().String())
		ports = append(ports, port)
		defer l.Close()
	}
	return ports, nil
}
