#!/usr/bin/env bash
# Fuzzes the parsers that take user input (specs as YAML and JSON, the
# benchmark body, imports, the JSON check, POST /labs) each for FUZZTIME
# under a memory ceiling: GOMEMLIMIT (the Go heap's soft limit) and a hard
# address-space limit (ulimit -v) on the test binary and its fuzz worker,
# with one worker so the run fits a shared machine. Prints, per target,
# whether it passed, its seconds, its new corpus entries and its peak RSS.
#
#   scripts/fuzz-bounded.sh                 # 30s a target
#   FUZZTIME=2m scripts/fuzz-bounded.sh
#   TARGETS="labspec:FuzzParseSpec report:FuzzImport" scripts/fuzz-bounded.sh
#
# The binaries are built before the limit applies (the compiler needs
# more), instrumented for coverage as go test -fuzz builds them.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-30s}
MEMLIMIT=${MEMLIMIT:-512MiB}
VLIMIT_KB=${VLIMIT_KB:-$((4 * 1024 * 1024))} # 4 GiB of address space
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# TARGETS="pkg:FuzzName ..." picks some.
targets=(${TARGETS:-
  safeyaml:FuzzCheck
  safeyaml:FuzzCheckJSON
  labspec:FuzzParseSpec
  app:FuzzParseBenchmark
  report:FuzzImport
  metrics:FuzzPythonJSONReader
  server:FuzzPostLab
})
printf '%-32s %-6s %8s %10s %10s %12s\n' target result seconds execs new-corpus max-rss-MiB
for t in "${targets[@]}"; do
  pkg=${t%%:*} fn=${t##*:}
  bin=$out/$pkg.test
  [ -x "$bin" ] || go test -c -gcflags='github.com/perflab/perflab/...=-d=libfuzzer' -o "$bin" "./internal/$pkg"
  cache=$out/cache-$fn
  start=$(date +%s)
  set +e
  # The package directory is the test's working directory, as go test
  # makes it; /usr/bin/time reports the largest RSS of the binary and its
  # worker.
  (cd "internal/$pkg" && ulimit -v "$VLIMIT_KB" && GOMEMLIMIT=$MEMLIMIT /usr/bin/time -f '%M' -o "$out/$fn.rss" \
    "$bin" -test.run '^$' -test.fuzz "^$fn\$" -test.fuzztime "$FUZZTIME" -test.parallel 1 \
    -test.fuzzcachedir "$cache" >"$out/$fn.log" 2>&1)
  rc=$?
  set -e
  secs=$(( $(date +%s) - start ))
  corpus=$( (find "$cache" -type f 2>/dev/null || true) | wc -l)
  rss=$(( $(grep -E "^[0-9]+$" "$out/$fn.rss" | tail -1 || echo 0) / 1024 ))
  res=ok
  [ $rc -eq 0 ] || { res=FAIL; tail -20 "$out/$fn.log"; }
  execs=$(grep -oE "execs: [0-9]+" "$out/$fn.log" | tail -1 | cut -d" " -f2 || true)
  printf '%-32s %-6s %8s %10s %10s %12s\n' "$t" "$res" "$secs" "${execs:-0}" "$corpus" "$rss"
done
