package tokenizer

import "syscall"

// threadCPU returns the CPU time the calling OS thread has used, in seconds,
// so a benchmark on a shared machine can report throughput per CPU-second
// rather than per wall-second.
func threadCPU() (float64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0, false
	}
	sec := func(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
	return sec(ru.Utime) + sec(ru.Stime), true
}
