package devserver

// Port checks and picks. The Temporal services and the Web UI bind their own listeners, so a
// port can only be tested and released before they start; the window in between is short,
// and the UI, which exits the process when its port is taken, is checked right before it
// starts.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// checkFree reports whether ip:port can be bound now. A taken port wraps ErrPortInUse.
func checkFree(ip string, port int, what string) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("devserver: %s port %d on %s: %w", what, port, ip, ErrPortInUse)
		}
		return fmt.Errorf("devserver: %s port %d on %s: %w", what, port, ip, err)
	}
	return ln.Close()
}

// freePorts returns n distinct ports that are free on ip, picked at random below the
// kernel's ephemeral range. Between the pick and the services' own binds, a port of that
// range may go to any socket of the host (a connection's local end, a listener on port 0),
// and a Temporal service whose port is taken does not fail its start: it serves nothing,
// then panics. Below the range, only a process that binds a fixed port can take it. All n
// listeners are held until the last is open, so no port is picked twice.
func freePorts(ip string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range listeners {
			_ = ln.Close()
		}
	}()
	lo, hi := pickRange()
	for len(ports) < n {
		var ln net.Listener
		var err error
		for range 1000 {
			port := lo + rand.IntN(hi-lo)
			if ln, err = net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port))); err == nil {
				break
			}
		}
		if err != nil {
			return nil, fmt.Errorf("devserver: pick a free port on %s between %d and %d: %w", ip, lo, hi, err)
		}
		listeners = append(listeners, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// pickRange is the ports freePorts picks from: [lo, hi), the 16,384 ports below the
// ephemeral range (Linux's ip_local_port_range; 32768 on other systems), and above 1024.
func pickRange() (lo, hi int) {
	hi = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 2048 {
				hi = v
			}
		}
	}
	return max(1025, hi-16384), hi
}
