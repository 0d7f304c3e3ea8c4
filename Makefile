# The two commands a newcomer needs: `make run` and `make test`.
GO      ?= go
BIN     := bin/relay
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: run test test-loaded build image lint bench bench-cluster bench-quick bench-resilience clean

run: ## everything in one process: embedded NATS, edge, worker, coordinator, fake upstream
	$(GO) run ./relay/cmd/relay dev

# The end-to-end tests and the tests of configs/ are modules of their own
# (their tools stay out of the product's go.mod). e2e, the longest, runs
# beside the others, which run one package at a time: two at once in all.
test: ## the whole suite, with the race detector; e2e/setup.sh first installs what e2e needs (nginx) if missing
	bash e2e/setup.sh
	@bash -c '$(GO) -C e2e test -race -count=1 -timeout 20m ./... & e2e=$$!; \
		$(GO) test -race -count=1 -timeout 20m -p 1 ./... && $(GO) -C configs test -race -count=1 ./...; rest=$$?; \
		wait $$e2e; e2e=$$?; exit $$((rest || e2e))'

test-loaded: ## `make test` beside two busy loops (LOADERS=n for more), as on a machine loaded by other work; the loops stop whatever the outcome (e2e/loaded.sh)
	bash e2e/loaded.sh $(MAKE) test

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./relay/cmd/relay

image: ## the container image as an OCI archive, bin/relay-image.tar, without a Docker daemon (relay/ociimage); `docker load -i` or `podman load -i` it
	$(GO) run ./relay/cmd/relay-image --out bin/relay-image.tar --version $(VERSION) \
		--revision $$(git rev-parse HEAD 2>/dev/null) --created $$(git log -1 --format=%ct 2>/dev/null || echo 0)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) -C e2e vet ./...
	$(GO) -C configs vet ./...

bench: ## the benchmark: one table, about 9 minutes on 2 cores (e2e/BENCHMARKS.md)
	$(GO) -C e2e run ./bench

bench-cluster: ## the same figures on a cluster of three nats-servers, every stream on three replicas (the replicated layout)
	$(GO) -C e2e run ./bench --cluster

bench-quick: ## the same figures with small counts, under a minute; CI runs it so it keeps working
	$(GO) -C e2e run ./bench --quick

bench-resilience: ## the relay beside a direct openai-go client in weather, a 429 storm and an outage (e2e/BENCHMARKS.md, "Resilience"), about 2 minutes
	bash -o pipefail -c "$(GO) -C e2e test -count=1 -run 'TestProcessNeverWorseThanDirect|TestOutageIsAQueue' -v . | grep -E '^(---|ok|FAIL)|: (weather|429 storm|10 s outage)|requests; breaker opened'"

.PHONY: cluster
cluster: ## a local cluster of separate processes: 3 nats-servers (JetStream, R3), 2 edges, 3 workers, the coordinator, the fake upstream; Ctrl-C stops it (configs/cluster/)
	GO=$(GO) bash configs/cluster/run.sh

clean:
	rm -rf bin data
