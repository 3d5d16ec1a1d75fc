#!/usr/bin/env bash
# Builds perflab's own image and the simulated engine image with podman
# from this checkout's files only: no registry, no base image, no network.
# The repository's Dockerfile needs the golang and distroless images from
# their registries; this builds the same thing without them: perflab as one
# static binary on scratch, with what distroless's static-debian12:nonroot
# gives it (CA certificates, /tmp, the nonroot user 65532 that
# deploy/kubernetes/job.yaml's fsGroup expects). Then each image is run
# once, without a network, and must answer.
#
#   .ci/image.sh            # tags localhost/perflab:ci, localhost/perflab-sim:ci
#
# Environment: PERFLAB_IMAGE and PERFLAB_SIM_IMAGE name the tags;
# PERFLAB_BINARY, a static perflab already built, is used instead of
# building one. With
# PODMAN_DIR set (.ci/run after start_podman, or a test), podman uses the
# storage under it, so the images are where the docker runtime's tests
# look; else podman's own storage. The simulated engine image is built
# through the Docker API (`perflab sim image`): DOCKER_HOST's if set, else
# a podman API service this script starts on the same storage and stops.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
perflab_image=${PERFLAB_IMAGE:-localhost/perflab:ci}
sim_image=${PERFLAB_SIM_IMAGE:-localhost/perflab-sim:ci}
work=$(mktemp -d "${TMPDIR:-/tmp}/perflab-image.XXXXXX")
service_pid=""

cleanup() {
  if [ -n "$service_pid" ]; then
    kill "$service_pid" 2>/dev/null || true
    wait "$service_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

pod() {
  if [ -n "${PODMAN_DIR:-}" ]; then
    podman --root "$PODMAN_DIR/storage" --runroot "$PODMAN_DIR/run" "$@"
  else
    podman "$@"
  fi
}

command -v podman >/dev/null 2>&1 || { echo "image.sh: podman is not installed" >&2; exit 1; }

# perflab, static: the image has no C library.
rootfs=$work/perflab/rootfs
mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc/ssl/certs" "$rootfs/tmp" "$rootfs/home/nonroot"
chmod 1777 "$rootfs/tmp"
if [ -n "${PERFLAB_BINARY:-}" ]; then
  # CI builds perflab once, static, for every test and for these images: a
  # second build here would compile everything again in another
  # configuration (cgo off, -trimpath) on a cold cache.
  # ldd (libc-bin, on every Debian) fails on a static executable.
  if ldd "$PERFLAB_BINARY" >/dev/null 2>&1; then
    echo "image.sh: PERFLAB_BINARY=$PERFLAB_BINARY is not a static executable (the image has no C library): build it with CGO_ENABLED=0" >&2
    exit 1
  fi
  cp "$PERFLAB_BINARY" "$rootfs/usr/local/bin/perflab"
else
  (cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$rootfs/usr/local/bin/perflab" ./cmd/perflab)
fi
# The Hub over HTTPS needs the CA bundle; the host's, when it has one.
for ca in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt; do
  if [ -f "$ca" ]; then
    cp "$ca" "$rootfs/etc/ssl/certs/ca-certificates.crt"
    break
  fi
done
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
cat >"$work/perflab/Containerfile" <<'EOF'
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin HOME=/home/nonroot SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
WORKDIR /home/nonroot
ENTRYPOINT ["/usr/local/bin/perflab"]
CMD ["--help"]
EOF
pod build --pull=never --network=none -t "$perflab_image" -f "$work/perflab/Containerfile" "$work/perflab"
version=$(pod run --rm --pull=never --network=none "$perflab_image" --version)
echo "image.sh: $perflab_image runs: $version"
user=$(pod image inspect --format '{{.Config.User}}' "$perflab_image")
[ "$user" = "65532:65532" ] || { echo "image.sh: $perflab_image runs as $user, not 65532:65532" >&2; exit 1; }

# The simulated engine image, through the Docker API.
if [ -z "${DOCKER_HOST:-}" ]; then
  sock=$work/podman.sock
  # Not through pod(): $! must be podman's own pid.
  if [ -n "${PODMAN_DIR:-}" ]; then
    podman --root "$PODMAN_DIR/storage" --runroot "$PODMAN_DIR/run" system service --time=0 "unix://$sock" >"$work/service.log" 2>&1 &
  else
    podman system service --time=0 "unix://$sock" >"$work/service.log" 2>&1 &
  fi
  service_pid=$!
  tries=0
  until [ -S "$sock" ] && curl -fsS --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -ge 100 ] || ! kill -0 "$service_pid" 2>/dev/null; then
      echo "image.sh: the podman API service did not start; its log ends:" >&2
      tail -n 20 "$work/service.log" >&2 || true
      exit 1
    fi
    sleep 0.1
  done
  export DOCKER_HOST="unix://$sock"
fi
"$rootfs/usr/local/bin/perflab" sim image --tag "$sim_image" --binary "$rootfs/usr/local/bin/perflab"
pod run --rm --pull=never --network=none "$sim_image" perflab --version >/dev/null
echo "image.sh: $sim_image runs"
