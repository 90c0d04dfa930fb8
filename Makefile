# Flexsite — the two commands a newcomer needs:
#   make run    embedded control plane + operator + REST API on 127.0.0.1:8080, metrics on 127.0.0.1:8082
#   make test   unit tests and envtest suites against a real kube-apiserver + etcd

K8S_VERSION  ?= 1.37.1
ETCD_VERSION ?= 3.7.3
CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION    ?= v2.15.0
# kustomize renders the installer (v5.8.3 needs Go 1.27).
KUSTOMIZE_VERSION        ?= v5.8.2
GOVULNCHECK_VERSION      ?= v1.9.0

export GOTOOLCHAIN := local
export GOWORK := off

LOCALBIN       := $(CURDIR)/bin
CONTROLLER_GEN := $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
GOLANGCI_LINT  := $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
KUSTOMIZE      := $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)
# golangci-lint with the Kube API Linter (sigs.k8s.io/kube-api-linter) compiled in, built from
# hack/tools/kal, whose go.mod pins both (KAL has no releases: a pseudo-version).
KAL_VERSION       := $(shell sed -n 's/^[[:space:]]*sigs.k8s.io\/kube-api-linter //p' hack/tools/kal/go.mod)
GOLANGCI_LINT_KAL := $(LOCALBIN)/golangci-lint-kal-$(GOLANGCI_LINT_VERSION)-$(KAL_VERSION)
# The test modules: the suites and tools whose dependencies the manager must not carry (chromedp
# for the browser suite, ory/fosite for the OAuth provider; the generated OpenADR VEN client and
# golang.org/x/oauth2's client credentials for the VEN suite). Every Go target covers them too.
TEST_MODULE    := test/browser
VEN_MODULE     := test/ven
TEST_MODULES   := $(TEST_MODULE) $(VEN_MODULE)
OAUTH_PROVIDER := $(LOCALBIN)/flexsite-oauth-provider
K8S_ASSETS      = $(shell K8S_VERSION=$(K8S_VERSION) ETCD_VERSION=$(ETCD_VERSION) hack/ensure-k8s-binaries.sh)
IMG            ?= flexsite-manager:latest

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs, RBAC and webhook configurations from the API types and markers, and the REST API's length limits from the CRDs.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd webhook paths="./..." output:crd:artifacts:config=config/crd/bases
	go run ./hack/crdlimits
	go run ./hack/tierroles

.PHONY: chart
chart: manifests ## Copy the CRDs, RBAC, webhook and default rules of config/ into charts/flexsite; render config/argocd.
	hack/sync-chart.sh

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate DeepCopy methods, and the OpenADR door's shapes and the VEN suite's client from the Alliance's document.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."
	go generate ./internal/openadr/oadr
	go -C $(VEN_MODULE) generate ./...

.PHONY: fmt
fmt: ## go fmt (every module).
	go fmt ./...
	for m in $(TEST_MODULES); do go -C $$m fmt ./... || exit 1; done

.PHONY: vet
vet: ## go vet (every module).
	go vet ./...
	for m in $(TEST_MODULES); do go -C $$m vet ./... || exit 1; done

.PHONY: tidy
tidy: ## go mod tidy (every module).
	go mod tidy
	for m in $(TEST_MODULES); do go -C $$m mod tidy || exit 1; done

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (every module), then the Kube API Linter on the API types (lint-api).
	$(GOLANGCI_LINT) run ./...
	for m in $(TEST_MODULES); do (cd $$m && $(GOLANGCI_LINT) run ./...) || exit 1; done
	@$(MAKE) --no-print-directory lint-api

.PHONY: lint-api
lint-api: $(GOLANGCI_LINT_KAL) ## Run the Kube API Linter (KAL) on api/ (.golangci-kal.yml).
	$(GOLANGCI_LINT_KAL) run --config .golangci-kal.yml ./api/...

.PHONY: helm-lint
helm-lint: ## helm lint and helm template charts/flexsite, with default values and with each charts/flexsite/ci/*-values.yaml.
	@helm="$$(hack/ensure-helm.sh)" && set -e && for values in "" charts/flexsite/ci/*-values.yaml; do \
	  echo "--- charts/flexsite $${values:-(default values)}"; \
	  "$$helm" lint --strict charts/flexsite $${values:+-f "$$values"}; \
	  "$$helm" template flexsite charts/flexsite --namespace flexsite-system $${values:+-f "$$values"} >/dev/null; \
	done

.PHONY: vulncheck
vulncheck: ## govulncheck ./...: fail on known vulnerabilities the code reaches (database: GOVULNDB, default vuln.go.dev).
	GOVULNCHECK_VERSION=$(GOVULNCHECK_VERSION) hack/vulncheck.sh

.PHONY: k8s-binaries
k8s-binaries: ## Build (or reuse) etcd, kube-apiserver and kubectl; print their directory.
	@echo $(K8S_ASSETS)

.PHONY: test
test: oauth-provider ## Run every test of every module: unit, fuzz seeds, envtest suites (real kube-apiserver + etcd, real PostgreSQL), the chart's dry run (helm), the browser tests (Chromium), the generated OpenADR VEN.
	@assets="$(K8S_ASSETS)"; test -n "$$assets" || { echo "could not get the control-plane binaries" >&2; exit 1; }; \
	helm="$$(hack/ensure-helm.sh)" || echo "helm is not available: test/chart fails in CI and is skipped elsewhere" >&2; \
	chromium="$$(hack/ensure-chromium.sh)" || echo "Chromium is not available: test/browser fails in CI and is skipped elsewhere" >&2; \
	postgres="$$(hack/ensure-postgres.sh)" || echo "PostgreSQL is not available: the database tests fail in CI and are skipped elsewhere" >&2; \
	export KUBEBUILDER_ASSETS="$$assets" HELM="$$helm" FLEXSITE_CHROMIUM="$$chromium" FLEXSITE_POSTGRES_BIN="$$postgres" \
	  FLEXSITE_OAUTH_PROVIDER="$(OAUTH_PROVIDER)"; status=0; \
	go test ./... -timeout 30m -coverprofile cover.out $(TEST_ARGS) || status=$$?; \
	for m in $(TEST_MODULES); do \
	  echo "--- the test module $$m"; \
	  go -C $$m test ./... $(TEST_ARGS) || status=$$?; \
	done; \
	exit $$status

.PHONY: oauth-provider
oauth-provider: ## Build the test module's OAuth 2.0 provider (bin/flexsite-oauth-provider), which the device suites run.
	go -C $(TEST_MODULE) build -o $(OAUTH_PROVIDER) ./cmd/flexsite-oauth-provider

.PHONY: bench
bench: build ## Measure bin/manager against the API server's own write path: a table, bench/results.json, and the docs' figures from it (bench-docs). BENCH_QUICK=1: the smaller run (about 30 min on 2 cores).
	@assets="$(K8S_ASSETS)"; test -n "$$assets" || { echo "could not get the control-plane binaries" >&2; exit 1; }; \
	postgres="$$(hack/ensure-postgres.sh)" || { echo "could not get PostgreSQL (see above)" >&2; exit 1; }; \
	go build -o bin/flexsite-bench ./cmd/flexsite-bench && \
	FLEXSITE_POSTGRES_BIN="$$postgres" bin/flexsite-bench --bin-dir "$$assets" --manager bin/manager --out bench/results.json $(BENCH_ARGS)
	@$(MAKE) --no-print-directory bench-docs

.PHONY: bench-docs
bench-docs: ## Write bench/results.json's figures into README.md and docs/performance.md (their generated blocks; test/docs checks them).
	go run ./hack/benchdocs -results bench/results.json

##@ Build and run

.PHONY: build
build: ## Build the manager binary.
	go build -o bin/manager ./cmd/manager

.PHONY: run
run: build ## Run an embedded control plane and PostgreSQL, the operator and the REST API; print the database and metrics URLs (Ctrl-C stops all).
	@assets="$(K8S_ASSETS)"; test -n "$$assets" || { echo "could not get the control-plane binaries" >&2; exit 1; }; \
	postgres="$$(hack/ensure-postgres.sh)" || { echo "could not get PostgreSQL (see above)" >&2; exit 1; }; \
	exec bin/manager --embedded --embedded-bin-dir "$$assets" --embedded-postgres-bin "$$postgres" $(RUN_ARGS)

.PHONY: build-installer
build-installer: manifests $(KUSTOMIZE) ## Render everything a cluster needs into dist/install.yaml (IMG=... sets the image). Needs only Go.
	mkdir -p dist
	{ $(KUSTOMIZE) build config/default | sed 's#image: flexsite-manager:latest#image: $(IMG)#'; \
	  echo "---"; $(KUSTOMIZE) build config/rules; } > dist/install.yaml
	@echo "wrote dist/install.yaml ($$(grep -c '^kind:' dist/install.yaml) objects)"

.PHONY: docker-build
docker-build: ## Build the manager image (needs a Docker engine).
	docker build -t $(IMG) .

.PHONY: run-clean
run-clean: ## Forget the embedded control plane's and PostgreSQL's data (bin/embedded).
	rm -rf bin/embedded

##@ Tools

$(CONTROLLER_GEN):
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(LOCALBIN)/controller-gen $@

$(KUSTOMIZE):
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv $(LOCALBIN)/kustomize $@

$(GOLANGCI_LINT):
	GOBIN=$(LOCALBIN) GOFLAGS= go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(LOCALBIN)/golangci-lint $@

# What `golangci-lint custom` does, without its git clone of golangci-lint: build golangci-lint's
# command with the KAL module plugin linked in, from the Go module proxy.
$(GOLANGCI_LINT_KAL):
	@grep -q 'github.com/golangci/golangci-lint/v2 $(GOLANGCI_LINT_VERSION)$$' hack/tools/kal/go.mod || \
	  { echo "hack/tools/kal/go.mod must require golangci-lint $(GOLANGCI_LINT_VERSION)" >&2; exit 1; }
	cd hack/tools/kal && GOFLAGS=-buildvcs=false go build -trimpath \
	  -ldflags "-s -w -X 'main.version=$(GOLANGCI_LINT_VERSION:v%=%)-kal-$(KAL_VERSION)'" -o $@ .
