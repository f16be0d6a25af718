# syntax=docker/dockerfile:1
# CAPTF's one image: the manager at /manager and the runner at /runner. Every Job's init
# container runs `/runner install` from this image (the manager's --runner-image) to copy the
# runner into the Job, so the manager and the runner always come from one build.
#
# Build: docker build -t ghcr.io/captf/cluster-api-provider-terraform:<tag> .
# (This repository's CI machine has no container engine; see docs/deployment.md.)

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
# Only the packages the two binaries are built from (test/deploy checks this list).
COPY api/ api/
COPY certs/ certs/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY runnerapi/ runnerapi/
COPY webhooks/ webhooks/
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o /out/manager ./cmd/manager && \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o /out/runner ./cmd/runner

# distroless/static: no shell, CA certificates included (the runner copies them into Jobs
# whose runtime image has none), runs as the numeric non-root user 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/manager /manager
COPY --from=build /out/runner /runner
USER 65532:65532
ENTRYPOINT ["/manager"]
