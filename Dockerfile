# Mayfly as a container image: one static binary, run as a non-root user on
# a distroless base (no shell, no package manager). The same image runs
# `mayfly edge`, `mayfly ingest` or `mayfly all` (the k8s base in deploy/k8s
# sets the argument). Checked by deploy/check (buildkit's own parser).
#
#   docker build -t mayfly .
#   docker run --rm -e MAYFLY_REDIS_ADDRS=redis:6379 -p 8080:8080 mayfly edge

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
# go.mod replaces the client module with ./clients/go: its go.mod must be
# there for the download (the client has no dependencies of its own).
COPY clients/go/go.mod clients/go/
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/mayfly ./cmd/mayfly

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mayfly /usr/local/bin/mayfly
# Inside a container the listeners must not be loopback-only.
ENV MAYFLY_HTTP_ADDR=0.0.0.0:8080 \
    MAYFLY_SMTP_ADDR=0.0.0.0:2525 \
    MAYFLY_ADMIN_ADDR=0.0.0.0:9090
EXPOSE 8080 2525 9090
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/mayfly"]
CMD ["all"]
