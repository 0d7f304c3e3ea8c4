# The two commands a newcomer needs: `make run` and `make test`.
GO      ?= go
BIN     := bin/relay
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: run test build lint bench clean

run: ## everything in one process: embedded NATS, edge, worker, coordinator, fake upstream
	$(GO) run ./relay/cmd/relay dev

test: ## the whole suite, with the race detector; e2e/setup.sh first installs what e2e needs (nginx) if missing
	bash e2e/setup.sh
	$(GO) test -race -count=1 -timeout 20m ./...

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./relay/cmd/relay

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

bench:
	@echo "no benchmarks yet"

clean:
	rm -rf bin data
