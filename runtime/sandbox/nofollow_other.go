//go:build !unix

package sandbox

// noFollow is zero where O_NOFOLLOW does not exist; os.Root still keeps
// opens inside the root.
const noFollow = 0
