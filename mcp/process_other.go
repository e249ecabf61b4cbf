//go:build !unix

package mcp

import (
	"os"
	"os/exec"
)

// Without process groups, only the server process itself is stopped.
const (
	sigterm = 0
	sigkill = 1
)

func setProcessGroup(*exec.Cmd) {}

func signalGroup(cmd *exec.Cmd, sig int) {
	if cmd.Process == nil {
		return
	}
	if sig == sigkill {
		_ = cmd.Process.Kill()
		return
	}
	_ = cmd.Process.Signal(os.Interrupt)
}
