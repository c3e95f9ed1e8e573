package pgserver

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{
			name: "replaces path, keeps credentials and params",
			in:   "postgres://postgres:s3cret@127.0.0.1:5432/postgres?sslmode=disable&application_name=x",
			want: "postgres://postgres:s3cret@127.0.0.1:5432/docket_t_1?sslmode=disable&application_name=x",
		},
		{
			name: "adds a path when there is none",
			in:   "postgresql://u@db.example:6543?sslmode=require",
			want: "postgresql://u@db.example:6543/docket_t_1?sslmode=require",
		},
		{
			name: "drops dbname params that would override the path",
			in:   "postgres://u@h/old?dbname=old&sslmode=disable",
			want: "postgres://u@h/docket_t_1?sslmode=disable",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := withDatabase(c.in, "docket_t_1")
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func TestWithDatabaseRejectsNonURLsWithoutLeakingPassword(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"host=localhost password=s3cret dbname=postgres",
		"mysql://root:s3cret@localhost/db",
		"postgres://u:s3cret@[::1/db",
		"Removed stale pid file.\npostgres://u:s3cret@127.0.0.1:5432/postgres",
	} {
		_, err := withDatabase(in, "x")
		require.Error(t, err, in)
		require.NotContains(t, err.Error(), "s3cret")
	}
	_, err := withDatabase("Removed stale pid file.\npostgres://u:s3cret@127.0.0.1:5432/postgres\n", "x")
	require.ErrorContains(t, err, "has 2 lines")
}

func TestMaskURL(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"postgres://postgres:s3cret@127.0.0.1:5432/postgres?sslmode=disable": "postgres://postgres:xxxxx@127.0.0.1:5432/postgres?sslmode=disable",
		"postgres://postgres@127.0.0.1:5432/postgres":                        "postgres://postgres@127.0.0.1:5432/postgres",
		"postgres://u@h/db?password=s3cret&sslmode=disable":                  "postgres://u@h/db?password=xxxxx&sslmode=disable",
		"postgres://u:s3cret@h/db?sslpassword=s3cret":                        "postgres://u:xxxxx@h/db?sslpassword=xxxxx",
		"host=localhost password=s3cret":                                     "<unparsable database URL>",
	}
	for in, want := range cases {
		got := MaskURL(in)
		require.Equal(t, want, got)
		require.NotContains(t, got, "s3cret")
	}
}
