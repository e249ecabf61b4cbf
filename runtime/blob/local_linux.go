package blob

import "syscall"

// localFS reports whether dir is on a local file system, whose stat of a
// path is never stale: those below, by the magic number statfs(2) gives.
func localFS(dir string) bool {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return false
	}
	switch uint32(st.Type) {
	case 0xEF53, // ext2, ext3, ext4
		0x58465342, // xfs
		0x9123683E, // btrfs
		0x01021994, // tmpfs
		0x2FC12FC1, // zfs
		0xF2F52010: // f2fs
		return true
	}
	return false
}
