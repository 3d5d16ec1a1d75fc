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
  local runas=()
  if [ "$(id -u)" = 0 ]; then
    chown postgres "$PG_DIR"
    runas=(runuser -u postgres --)
  fi
  "${runas[@]}" "$bin/initdb" -D "$PG_DIR/data" -U postgres -A trust >/dev/null
  "${runas[@]}" "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w \
    -o "-h 127.0.0.1 -p $port -k $PG_DIR" start >/dev/null
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
