# docket's everyday commands. See README.md.

SQLC := go run github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1

.PHONY: demo test lint generate build

## demo: docket's story in under a minute: jobs, a plan, cases and waits, a task, a schedule
# Postgres: the database in DOCKET_DATABASE_URL if set, else a scratch
# database (dropped at the end) on the server in DOCKET_TEST_DATABASE_URL,
# else on a private cluster of the local server binaries (removed at the
# end). scripts/setup installs those first if missing (as root on Debian).
# DEMO_FLAGS go to docket demo, e.g. make demo DEMO_FLAGS='--orders 100'.
demo:
	@scripts/setup demo
	go run ./cmd/docket demo $(DEMO_FLAGS)

## test: run every test with -race against a real PostgreSQL (see scripts/test)
# TESTFLAGS go to go test, e.g. make test TESTFLAGS='-run TestWithTx ./db/'.
test:
	scripts/test $(TESTFLAGS)

## lint: gofmt, go vet, staticcheck, sqlc diff, tidy go.mod (docket's and bench/'s), no wall clock in sql/
lint:
	scripts/lint

## generate: regenerate internal/dbsqlc/* from sql/ (commit the result)
generate:
	$(SQLC) generate

## build: the docket command, into bin/
build:
	go build -o bin/docket ./cmd/docket
