package pgtest

import (
	"context"
	"sync"
)

// scratchDBs are the databases Scratch made, dropped when the server closes.
var scratchDBs struct {
	mu    sync.Mutex
	names []string
}

// Scratch creates a database that belongs to no single test — for Example
// functions and TestMain, which have no testing.T — and returns its URL.
// With migrated it is a copy of the docket template, else an empty database.
// [Main] drops it when the tests end, so call Scratch only in a package whose
// TestMain calls [Main]. It returns the error on which [NewDB] would fail a
// test.
func Scratch(ctx context.Context, migrated bool) (string, error) {
	return defaultSuite.Scratch(ctx, migrated)
}

// scratch is Scratch of suite s on server srv.
func (s *Suite) scratch(ctx context.Context, srv *server, migrated bool) (string, error) {
	source := "template0"
	if migrated {
		var err error
		if source, err = srv.template(ctx, s); err != nil {
			return "", err
		}
	}
	name, err := s.createDB(ctx, srv, source)
	if err != nil {
		return "", err
	}
	scratchDBs.mu.Lock()
	scratchDBs.names = append(scratchDBs.names, name)
	scratchDBs.mu.Unlock()
	return srv.URL(name)
}

// dropScratch drops every database Scratch made on s, returning the first
// error.
func (s *server) dropScratch(ctx context.Context) error {
	scratchDBs.mu.Lock()
	names := scratchDBs.names
	scratchDBs.names = nil
	scratchDBs.mu.Unlock()
	var first error
	for _, name := range names {
		if err := s.DropDatabase(ctx, name); err != nil && first == nil {
			first = err
		}
	}
	return first
}
