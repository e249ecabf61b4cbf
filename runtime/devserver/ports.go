package devserver

// Port checks and picks. The Temporal services and the Web UI bind their own listeners, so a
// port can only be tested and released before they start; the window in between is short,
// and the UI, which exits the process when its port is taken, is checked right before it
// starts.

import (
	"errors"
	"fmt"
	"net"
	"strconv"
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

// freePorts returns n distinct ports that are free on ip. All n listeners are held until
// the last is open, so the kernel cannot hand out the same port twice.
func freePorts(ip string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range listeners {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return nil, fmt.Errorf("devserver: pick a free port on %s: %w", ip, err)
		}
		listeners = append(listeners, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
