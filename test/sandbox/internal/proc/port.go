package proc

import (
	"fmt"
	"net"
)

// FreePort asks the kernel for a free TCP port on the loopback interface, for a child to listen
// on. Another process may take it before the child binds it; the caller retries then.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
