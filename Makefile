# docket's everyday commands. See README.md.

SQLC := go run github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1

.PHONY: demo test lint generate build

## demo: docket's story in under a minute: jobs, a plan, cases and waits, a task, a schedule
# Postgres as for make test: the database in DOCKET_DATABASE_URL if set, else a
# scratch database (dropped at the end) on the server the tests would use.
# DEMO_FLAGS go to docket demo, e.g. make demo DEMO_FLAGS='--orders 100'.
demo:
	@if [ -z "$${DOCKET_DATABASE_URL:-}$${DATABASE_URL:-}$${DOCKET_TEST_DATABASE_URL:-}" ] \
	   && command -v pg_lsclusters >/dev/null && { [ "$$(id -u)" = 0 ] || [ "$$(id -un)" = postgres ]; }; then \
	  DOCKET_TEST_DATABASE_URL=$$(scripts/pg-local) || exit 1; export DOCKET_TEST_DATABASE_URL; \
	fi; \
	go run ./cmd/docket demo $(DEMO_FLAGS)

## test: run every test with -race against a real PostgreSQL (see scripts/test)
test:
	scripts/test

## lint: gofmt, go vet, staticcheck, sqlc diff, tidy go.mod, no wall clock in sql/
lint:
	scripts/lint

## generate: regenerate internal/dbsqlc from sql/ (commit the result)
generate:
	$(SQLC) generate

## build: the docket command, into bin/
build:
	go build -o bin/docket ./cmd/docket
