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

// ParentCgroups are the client's parent cgroups, one per hierarchy.
func ParentCgroups(c *Client) []string {
	if c.cgroup == nil {
		return nil
	}
	var dirs []string
	for _, h := range c.cgroup.hier {
		dirs = append(dirs, h.dir)
	}
	return dirs
}
