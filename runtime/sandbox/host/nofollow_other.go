//go:build !unix

package host

// noFollow is zero where O_NOFOLLOW does not exist; os.Root still keeps
// opens inside the root.
const noFollow = 0

// nonBlock is zero where O_NONBLOCK does not exist.
const nonBlock = 0

// dirOnly is zero where O_DIRECTORY does not exist.
const dirOnly = 0

func isNoReader(error) bool { return false }
