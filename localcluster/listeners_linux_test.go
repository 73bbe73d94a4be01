package localcluster

import (
	"net"
	"testing"
)

func TestParseProcIP(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F":                         "127.0.0.1",
		"00000000":                         "0.0.0.0",
		"00000000000000000000000001000000": "::1",
		"0000000000000000FFFF00000100007F": "127.0.0.1",
	} {
		got, err := parseProcIP(in)
		if err != nil || !got.Equal(net.ParseIP(want)) {
			t.Errorf("parseProcIP(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	if _, err := parseProcIP("zz"); err == nil {
		t.Error("parseProcIP accepted garbage")
	}
}

func TestListeningSocketsSeesOwnListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sockets, err := listeningSockets()
	if err != nil {
		t.Fatal(err)
	}
	loopback := 0
	for _, ip := range sockets {
		if ip.IsLoopback() {
			loopback++
		}
	}
	if loopback == 0 {
		t.Errorf("no loopback listener among %d sockets, though this test listens on %s", len(sockets), l.Addr())
	}
}
