package localcluster

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tcpListen is the state code of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// Listeners returns, for each component of the cluster, the addresses its
// process listens on (read from /proc), so that a test can prove every
// component is on loopback.
func (c *Cluster) Listeners() (map[string][]net.IP, error) {
	sockets, err := listeningSockets()
	if err != nil {
		return nil, err
	}
	result := map[string][]net.IP{}
	for _, component := range Components {
		pid, err := c.pid(component)
		if err != nil {
			return nil, err
		}
		fds, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "fd", "*"))
		if err != nil {
			return nil, fmt.Errorf("listing the descriptors of %s: %w", component, err)
		}
		for _, fd := range fds {
			target, err := os.Readlink(fd)
			if err != nil {
				continue // closed meanwhile
			}
			inode, ok := strings.CutPrefix(target, "socket:[")
			if ip, listening := sockets[strings.TrimSuffix(inode, "]")]; ok && listening {
				result[component] = append(result[component], ip)
			}
		}
	}
	return result, nil
}

// listeningSockets maps the inode of every listening TCP socket to its IP.
func listeningSockets() (map[string]net.IP, error) {
	sockets := map[string]net.IP{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			return nil, fmt.Errorf("reading the socket table: %w", err)
		}
		scanner := bufio.NewScanner(f)
		scanner.Scan() // header
		for scanner.Scan() {
			fields := strings.Fields(scanner.Text())
			if len(fields) < 10 || fields[3] != tcpListen {
				continue
			}
			hexIP, _, _ := strings.Cut(fields[1], ":")
			ip, err := parseProcIP(hexIP)
			if err != nil {
				_ = f.Close()
				return nil, fmt.Errorf("parsing %s: %w", table, err)
			}
			sockets[fields[9]] = ip
		}
		err = scanner.Err()
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", table, err)
		}
	}
	return sockets, nil
}

// parseProcIP decodes an address of /proc/net/tcp{,6}: 32-bit words in host
// (little-endian) byte order.
func parseProcIP(s string) (net.IP, error) {
	raw, err := hex.DecodeString(s)
	if err != nil || (len(raw) != net.IPv4len && len(raw) != net.IPv6len) {
		return nil, fmt.Errorf("bad address %q", s)
	}
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	return net.IP(raw), nil
}
