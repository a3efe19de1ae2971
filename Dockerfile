# Mayfly as a container image: one static binary, run as a non-root user on
# a distroless base (no shell, no package manager). The same image runs
# `mayfly edge`, `mayfly ingest` or `mayfly all` (the k8s base in deploy/k8s
# sets the argument). Checked by deploy/check (buildkit's own parser).
#
#   make image     # docker build with VERSION and REVISION from git, tagged mayfly:<version>
#   docker build --build-arg VERSION=v2026.11.26 --build-arg REVISION=$(git rev-parse HEAD) -t mayfly:2026.11.26 .
#   docker run --rm -e MAYFLY_REDIS_ADDRS=redis:6379 -p 8080:8080 mayfly:2026.11.26 edge
#   docker run --rm mayfly:2026.11.26 version
#
# The build context has no .git (.dockerignore), so the version and revision
# come in as build args, stamped with the Makefile's two -X flags; without
# them `mayfly version` says "dev" and "unknown".

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
# The go.mod replace targets must be there before go mod download.
COPY third_party/ ./third_party/
COPY clients/go/go.mod ./clients/go/
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/mayfly ./cmd/mayfly

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mayfly /usr/local/bin/mayfly
# The same two names on the image, for docker inspect and registries.
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${REVISION}
# Inside a container the listeners must not be loopback-only. The admin
# listener (9090) is for the kubelet's probes and Prometheus: no Service
# publishes it (deploy/k8s), and on 0.0.0.0 it serves no /debug/pprof/
# (MAYFLY_ADMIN_PPROF=auto; set it to on only behind a NetworkPolicy).
ENV MAYFLY_HTTP_ADDR=0.0.0.0:8080 \
    MAYFLY_SMTP_ADDR=0.0.0.0:2525 \
    MAYFLY_ADMIN_ADDR=0.0.0.0:9090
EXPOSE 8080 2525 9090
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/mayfly"]
CMD ["all"]
