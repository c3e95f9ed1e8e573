package db_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
)

func TestIsNil(t *testing.T) {
	t.Parallel()
	var pool *pgxpool.Pool
	var q db.DBTX = pool
	require.True(t, db.IsNil(nil))
	require.True(t, db.IsNil(q), "a nil pointer inside an interface")
	require.False(t, db.IsNil(&pgxpool.Pool{}))
	require.False(t, db.IsNil(3))
}
