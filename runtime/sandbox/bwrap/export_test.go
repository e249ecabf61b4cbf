package bwrap

import "path/filepath"

// SessionCgroup is the pids cgroup of the session whose workspace
// directory is name; "" when the client uses none.
func SessionCgroup(c *Client, name string) string {
	if c.cgroup == nil {
		return ""
	}
	return filepath.Join(c.cgroup.dir, name)
}
