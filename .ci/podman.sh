# Sourced by .ci/run: installs podman and runc from Debian if missing and
# starts podman's Docker-compatible API service for the docker runtime's
# tests, with everything in a throwaway directory: its containers.conf
# (through CONTAINERS_CONF, so the machine's own files stay untouched), its
# image and container storage, its socket. Exports DOCKER_HOST and
# PERFLAB_TEST_DOCKER=1. stop_podman stops the service and removes the
# directory; a watcher does the same when the shell that sourced this
# exits, in case a later trap replaced the one set here.
start_podman() {
  local missing=()
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  command -v runc >/dev/null 2>&1 || missing+=(runc)
  if [ "${#missing[@]}" -gt 0 ]; then
    apt_install "${missing[@]}"
  fi
  PODMAN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/perflab-podman.XXXXXX")
  # crun fails on these machines (hybrid cgroups); runc with cgroupfs
  # works. The default ulimits stay within what an unprivileged daemon
  # may set.
  cat >"$PODMAN_DIR/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
EOF
  export CONTAINERS_CONF="$PODMAN_DIR/containers.conf"
  local sock="$PODMAN_DIR/podman.sock"
  # Not through podman_here: $! must be podman's own pid.
  podman --root "$PODMAN_DIR/storage" --runroot "$PODMAN_DIR/run" system service --time=0 "unix://$sock" >"$PODMAN_DIR/service.log" 2>&1 &
  PODMAN_PID=$!
  local tries=0
  until curl -fsS --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -ge 100 ] || ! kill -0 "$PODMAN_PID" 2>/dev/null; then
      echo "podman: the API service did not start; its log ($PODMAN_DIR/service.log) ends:" >&2
      tail -n 20 "$PODMAN_DIR/service.log" >&2 || true
      stop_podman
      return 1
    fi
    sleep 0.1
  done
  export DOCKER_HOST="unix://$sock"
  export PERFLAB_TEST_DOCKER=1
  # The watcher: when this shell is gone, so is the service.
  local shell_pid=$$ dir=$PODMAN_DIR pid=$PODMAN_PID
  (
    trap '' INT TERM
    while kill -0 "$shell_pid" 2>/dev/null; do sleep 2; done
    PODMAN_DIR=$dir podman_here rm -af -t 0 >/dev/null 2>&1 || true
    kill "$pid" 2>/dev/null || true
    sleep 1
    kill -9 "$pid" 2>/dev/null || true
    rm -rf "$dir"
  ) >/dev/null 2>&1 &
  PODMAN_WATCHER=$!
  # Added to the EXIT trap already set (stop_postgres), not in its place.
  local prev=""
  if [ -n "$(trap -p EXIT)" ]; then
    eval "prev=$(trap -p EXIT | sed -e 's/^trap -- //' -e 's/ EXIT$//')"
  fi
  trap "${prev:+$prev; }stop_podman" EXIT
  echo "podman API on $DOCKER_HOST ($(podman --version))"
}

# podman_here runs podman on the throwaway storage.
podman_here() {
  podman --root "$PODMAN_DIR/storage" --runroot "$PODMAN_DIR/run" "$@"
}

stop_podman() {
  if [ -n "${PODMAN_PID:-}" ]; then
    # Containers outlive the API service (conmon keeps them): any a test
    # left go first, so their storage can be removed.
    podman_here rm -af -t 0 >/dev/null 2>&1 || true
    kill "$PODMAN_PID" 2>/dev/null || true
    local i
    for i in $(seq 50); do
      kill -0 "$PODMAN_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$PODMAN_PID" 2>/dev/null || true
    PODMAN_PID=
  fi
  if [ -n "${PODMAN_WATCHER:-}" ]; then
    kill "$PODMAN_WATCHER" 2>/dev/null || true
    PODMAN_WATCHER=
  fi
  if [ -n "${PODMAN_DIR:-}" ]; then
    rm -rf "$PODMAN_DIR"
    PODMAN_DIR=
  fi
}
