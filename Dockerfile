# The manager image: controllers, webhooks and the REST API in one static binary, and the
# platform team's flexsite-admin beside it (a register import runs from the image in a pod:
# docs/platform.md, "The meter register").
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
COPY webhook/ webhook/
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w" -o /manager ./cmd/manager
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w" -o /flexsite-admin ./cmd/flexsite-admin

FROM gcr.io/distroless/static:nonroot
COPY --from=build /manager /manager
COPY --from=build /flexsite-admin /flexsite-admin
USER 65532:65532
ENTRYPOINT ["/manager"]
