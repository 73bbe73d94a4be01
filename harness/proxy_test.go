package harness

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer answers each line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// roundTrip sends a line through a new connection and reads the answer,
// within a short deadline.
func roundTrip(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("wrong answer " + line)
	}
	return nil
}

func TestProxyCutAndRestore(t *testing.T) {
	p, err := StartProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	if err := roundTrip(p.Addr()); err != nil {
		t.Fatalf("before the cut: %v", err)
	}
	open, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := open.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(open).ReadString('\n'); err != nil {
		t.Fatal(err)
	}

	p.Cut()
	if err := roundTrip(p.Addr()); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("while cut, a new connection should hang unanswered, got %v", err)
	}
	_ = open.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := open.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the cut should drop an open connection, got %v", err)
	}

	p.Restore()
	if err := roundTrip(p.Addr()); err != nil {
		t.Errorf("after restoring: %v", err)
	}
}
