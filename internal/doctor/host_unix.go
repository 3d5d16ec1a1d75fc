//go:build linux || darwin

package doctor

import "golang.org/x/sys/unix"

// diskSpace is the total and free (to an unprivileged user) bytes of the
// file system holding path.
func diskSpace(path string) (total, free uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	bs := uint64(st.Bsize)
	return uint64(st.Blocks) * bs, uint64(st.Bavail) * bs, nil
}

// processMemlock is this process's soft RLIMIT_MEMLOCK.
func processMemlock() (uint64, bool, error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err != nil {
		return 0, false, err
	}
	return uint64(rl.Cur), uint64(rl.Cur) == uint64(unix.RLIM_INFINITY), nil
}
