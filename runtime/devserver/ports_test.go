package devserver

import (
	"net"
	"strconv"
	"testing"
)

// The ports picked for a server's services are distinct, free, and below
// the kernel's ephemeral range, where no socket bound to port 0 or
// connection's local end can take them before the services bind them.
func TestFreePortsAvoidTheEphemeralRange(t *testing.T) {
	lo, hi := pickRange()
	for range 20 {
		ports, err := freePorts("127.0.0.1", 6)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, p := range ports {
			if p < lo || p >= hi || seen[p] {
				t.Fatalf("ports %v: want 6 distinct ports in [%d, %d)", ports, lo, hi)
			}
			seen[p] = true
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				t.Fatalf("port %d picked as free: %v", p, err)
			}
			ln.Close()
		}
	}
	// A listener on port 0 gets a port of the ephemeral range, above.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if p := ln.Addr().(*net.TCPAddr).Port; p < hi {
		t.Errorf("the kernel gave port %d to a listener on port 0, below %d: the range is not what pickRange read", p, hi)
	}
}
