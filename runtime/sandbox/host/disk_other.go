//go:build !linux

package host

import (
	"errors"
	"fmt"
	"os"
)

var errNoLoopMounts = fmt.Errorf("bounded workspaces need Linux's loop devices: %w", errors.ErrUnsupported)

type prepared struct{}

func (*prepared) attach(string) error { return errNoLoopMounts }
func (*prepared) release()            {}
func (*prepared) ready()              {}

func makeImage(string, int64) error          { return errNoLoopMounts }
func cloneFile(string, string) error         { return errNoLoopMounts }
func prepareImage(string) (*prepared, error) { return nil, errNoLoopMounts }
func mountImage(string, string) error        { return errNoLoopMounts }
func detachMount(string) (func(), error)     { return nil, errNoLoopMounts }
func isMountPoint(dir string) (bool, error)  { _, err := os.Lstat(dir); return false, err }
func processAlive(int) bool                  { return true }
func imageInUse(string) bool                 { return false }
