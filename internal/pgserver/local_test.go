//go:build unix

package pgserver

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// startLocalOrSkip starts a private local server for t, stopped when t
// ends, or skips t if no PostgreSQL binaries are installed.
func startLocalOrSkip(t *testing.T) *localPostgres {
	t.Helper()
	l, err := startLocal(t.Context(), LocalConfig{MaxConnections: DefaultMaxConnections})
	if errors.Is(err, ErrNoLocalBinaries) {
		t.Skip("no PostgreSQL server binaries installed")
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, l.stop(context.Background()))
		require.NoDirExists(t, l.dir)
	})
	return l
}

func TestStartLocal(t *testing.T) {
	t.Parallel()
	l := startLocalOrSkip(t)
	t.Logf("local server from %s in %s", l.binDir, l.dir)

	srv, err := Open(t.Context(), l.url, "local test server", l.stop)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close(context.Background())) })
	var version int
	require.NoError(t, srv.admin.QueryRow(t.Context(), "SELECT current_setting('server_version_num')::int").Scan(&version))
	if version >= 150000 {
		require.Equal(t, " STRATEGY FILE_COPY", srv.createOptions)
	}

	settings := map[string]string{}
	for _, name := range []string{"fsync", "synchronous_commit", "full_page_writes", "max_connections", "listen_addresses", "data_directory", "server_encoding"} {
		var v string
		require.NoError(t, srv.admin.QueryRow(t.Context(), "SELECT current_setting($1)", name).Scan(&v))
		settings[name] = v
	}
	require.Equal(t, map[string]string{
		"fsync":              "off",
		"synchronous_commit": "off",
		"full_page_writes":   "off",
		"max_connections":    "200",
		"listen_addresses":   "127.0.0.1",
		"data_directory":     filepath.Join(l.dir, "data"),
		"server_encoding":    "UTF8",
	}, settings)

	requireCreateAndDrop(t, srv)
}
