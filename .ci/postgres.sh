# Sourced by .ci/run: installs PostgreSQL from Debian if missing, starts a
# throwaway cluster on loopback and exports PERFLAB_TEST_POSTGRES for the
# store tests. The cluster is stopped and removed on exit.
start_postgres() {
  if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    apt_install postgresql
  fi
  local bin
  bin=$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)")
  PG_DIR=$(mktemp -d /tmp/perflab-pg.XXXXXX)
  local port=${PERFLAB_PG_PORT:-55432}
  # Another cluster (a CI run beside this one, or one still shutting down)
  # may hold the port: take the next free one.
  local tries=0
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    port=$((port + 1)); tries=$((tries + 1))
    if [ "$tries" -ge 50 ]; then
      echo "postgres: no free port from ${PERFLAB_PG_PORT:-55432} to $port" >&2
      return 1
    fi
  done
  local runas=()
  if [ "$(id -u)" = 0 ]; then
    chown postgres "$PG_DIR"
    runas=(runuser -u postgres --)
  fi
  "${runas[@]}" "$bin/initdb" -D "$PG_DIR/data" -U postgres -A trust >/dev/null
  # A port can be free to the probe above and still refuse the bind (a
  # cluster that has just stopped, a socket still closing): seen once
  # right after an earlier run. Then the next port is tried.
  local started=
  for tries in 1 2 3 4 5; do
    if "${runas[@]}" "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w \
      -o "-h 127.0.0.1 -p $port -k $PG_DIR" start >/dev/null; then
      started=1
      break
    fi
    grep -q "could not bind" "$PG_DIR/log" 2>/dev/null || break
    echo "postgres: port $port would not bind; trying $((port + 1))" >&2
    port=$((port + 1))
  done
  if [ -z "$started" ]; then
    echo "postgres: the server did not start; its log ($PG_DIR/log) ends:" >&2
    tail -n 20 "$PG_DIR/log" >&2 || true
    rm -rf "$PG_DIR"
    return 1
  fi
  export PERFLAB_TEST_POSTGRES="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  PG_STOP=("${runas[@]}" "$bin/pg_ctl" -D "$PG_DIR/data" -m fast stop)
  trap 'stop_postgres' EXIT
  echo "postgres running on 127.0.0.1:$port"
}

stop_postgres() {
  if [ -n "${PG_DIR:-}" ]; then
    "${PG_STOP[@]}" >/dev/null 2>&1 || true
    rm -rf "$PG_DIR"
  fi
}
