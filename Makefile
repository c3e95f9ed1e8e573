# docket's everyday commands. See README.md.

SQLC := go run github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1

.PHONY: test lint generate build

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
