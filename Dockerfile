# perflab's own image: one static binary on a distroless base (CA
# certificates for the Hugging Face Hub, /tmp, a non-root user, no shell),
# so perflab runs in a container and in a cluster.
#
#   docker build -t perflab .          # or: podman build -t perflab .
#   docker run --rm -v "$PWD:/work" -w /work perflab lab examples/qwen3-14b-h100.yaml --dry-run
#
# The build stage keeps .git so that `perflab --version` names the commit.
# For the docker runtime from inside a container, mount the daemon's
# socket and set DOCKER_HOST (see docs/runtimes.md).
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/perflab ./cmd/perflab \
 && /out/perflab --version

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/perflab /usr/local/bin/perflab
ENTRYPOINT ["/usr/local/bin/perflab"]
CMD ["--help"]
