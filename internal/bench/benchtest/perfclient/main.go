// Command perfclient measures the benchmark client itself: it runs
// bench.Run against a fakesse server whose plan it is told (every request:
// first chunk after -ttft, then -chunks chunks -gap apart), and prints the
// client's CPU time (getrusage), chunk rate, memory per in-flight request
// and its TTFT/ITL error against the server's schedule, as JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/perflab/perflab/internal/bench"
	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/metrics"
)

func cpu() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// againstServer compares each record with the server's logged write
// times. Both sides are wall-clock readings at an origin plus monotonic
// time since (CLOCK_REALTIME and CLOCK_MONOTONIC advance together unless
// the clock is stepped), so the two processes share a clock.
func againstServer(path string, out *bench.Outcome) (ttftErr, itlErr []float64, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	logs := map[string][]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		var ns []int64
		for _, x := range f[2:] {
			v, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("server log %s: %q: %w", path, line, err)
			}
			ns = append(ns, v)
		}
		logs[f[0]] = ns
	}
	start := out.Start.UnixNano()
	for _, r := range out.Records {
		w, ok := logs[r.ID]
		if !ok || len(w) < len(r.ITL)+1 {
			return nil, nil, fmt.Errorf("server log %s has no full entry for request %s", path, r.ID)
		}
		sent := start + int64(r.Sent*1e9)
		ttftErr = append(ttftErr, math.Abs(r.TTFT*1e9-float64(w[0]-sent))/1e6)
		for k, g := range r.ITL {
			itlErr = append(itlErr, math.Abs(g*1e9-float64(w[k+1]-w[k]))/1e6)
		}
	}
	return ttftErr, itlErr, nil
}

func main() {
	url := flag.String("url", "http://127.0.0.1:8000", "fakesse base URL")
	n := flag.Int("n", 1000, "requests")
	conc := flag.Int("concurrency", 1000, "max concurrency")
	chunks := flag.Int("chunks", 100, "chunks per request (sent as max_tokens)")
	ttft := flag.Duration("ttft", 0, "server's TTFT (for the error figures)")
	gap := flag.Duration("gap", 0, "server's chunk gap (for the error figures)")
	transport := flag.String("transport", bench.TransportAuto, "client transport: auto, epoll or net/http")
	memAt := flag.Duration("mem-at", 0, "when >0, sample memory this long after the start (all requests in flight)")
	serverLog := flag.String("server-log", "", "fakesse -fast -log file: judge TTFT/ITL against the server's actual write times")
	cpuprof := flag.String("cpuprofile", "", "write a CPU profile of the run here")
	flag.Parse()
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
	}

	reqs := make([]dataset.Request, *n)
	for i := range reqs {
		reqs[i] = dataset.Request{Prompt: "hello", PromptLen: 1, OutputLen: *chunks}
	}
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var mid runtime.MemStats
	var midOK bool
	var wg sync.WaitGroup
	if *memAt > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(*memAt)
			runtime.GC()
			runtime.ReadMemStats(&mid)
			midOK = true
		}()
	}
	c0, t0 := cpu(), time.Now()
	out, err := bench.Run(context.Background(), bench.Config{BaseURL: *url, Model: "fake-model", Requests: reqs,
		MaxConcurrency: *conc, RequestIDPrefix: "perf-" + strings.ReplaceAll(*transport, "/", "") + "-", Transport: *transport})
	wall, used := time.Since(t0).Seconds(), cpu()-c0
	pprof.StopCPUProfile()
	if err != nil {
		log.Fatal(err)
	}
	wg.Wait()
	total := 0
	var ttftErr, itlErr []float64
	for _, r := range out.Records {
		total += len(r.ChunkTokens)
		if *ttft > 0 || *gap > 0 {
			ttftErr = append(ttftErr, math.Abs(r.TTFT-ttft.Seconds())*1000)
			for _, g := range r.ITL {
				itlErr = append(itlErr, math.Abs(g-gap.Seconds())*1000)
			}
		}
	}
	res := map[string]any{
		"transport": *transport, "requests": len(out.Records), "completed": out.Result.Completed, "failed": out.Result.Failed,
		"chunks": total, "wall_s": wall, "client_cpu_s": used,
		"chunks_per_s": float64(total) / wall, "client_cores": used / wall,
		"client_cpu_us_per_chunk": used / float64(total) * 1e6,
	}
	if len(ttftErr) > 0 {
		res["ttft_err_ms_p50"] = bench.Percentile(ttftErr, 50)
		res["ttft_err_ms_p99"] = bench.Percentile(ttftErr, 99)
		res["itl_err_ms_p50"] = bench.Percentile(itlErr, 50)
		res["itl_err_ms_p99"] = bench.Percentile(itlErr, 99)
	}
	if midOK {
		// Heap and stacks held per in-flight request, beyond the baseline.
		d := float64(mid.HeapInuse+mid.StackInuse) - float64(base.HeapInuse+base.StackInuse)
		res["bytes_per_inflight"] = d / float64(min(*conc, *n))
		res["heap_inuse_delta"] = mid.HeapInuse - base.HeapInuse
		res["stack_inuse_delta"] = mid.StackInuse - base.StackInuse
	}
	_ = metrics.Record{}
	if *serverLog != "" {
		time.Sleep(300 * time.Millisecond) // the server logs a request after its last write
		ttftS, itlS, err := againstServer(*serverLog, out)
		if err != nil {
			log.Fatal(err)
		}
		res["ttft_err_vs_server_ms_p50"] = bench.Percentile(ttftS, 50)
		res["ttft_err_vs_server_ms_p99"] = bench.Percentile(ttftS, 99)
		res["itl_err_vs_server_ms_p50"] = bench.Percentile(itlS, 50)
		res["itl_err_vs_server_ms_p99"] = bench.Percentile(itlS, 99)
		res["itl_err_vs_server_ms_max"] = bench.Percentile(itlS, 100)
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	fmt.Println(string(b))
	os.Exit(0)
}
