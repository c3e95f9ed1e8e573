package pgserver

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// passwordMask replaces passwords in URLs that are shown to people.
const passwordMask = "xxxxx"

// parseAdminURL parses a postgres:// or postgresql:// URL. The error never
// contains the password.
func parseAdminURL(raw string) (*url.URL, error) {
	const want = "want a URL like postgres://user:password@host:5432/postgres?sslmode=disable"
	if n := strings.Count(strings.TrimSpace(raw), "\n"); n > 0 {
		// Typically a script's other output captured along with the URL.
		return nil, fmt.Errorf("database URL has %d lines, expected one (was other output captured with it?): %s", n+1, want)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		// url.Parse quotes the whole input in its error: keep it out, it
		// may hold a password.
		return nil, errors.New("database URL is not a URL: " + want)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("database URL %s has scheme %q: %s", MaskURL(raw), u.Scheme, want)
	}
	return u, nil
}

// withDatabase returns raw with its database name replaced by name, keeping
// host, credentials and query parameters. It drops "dbname" and "database"
// query parameters, which would otherwise override the path. It fails only if
// raw is not a postgres URL; the error never contains the password.
func withDatabase(raw, name string) (string, error) {
	u, err := parseAdminURL(raw)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	u.RawPath = ""
	q := u.Query()
	if q.Has("dbname") || q.Has("database") {
		q.Del("dbname")
		q.Del("database")
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

// MaskURL returns raw with any password (in the user info or in a password
// or sslpassword query parameter) replaced by xxxxx, for logs and errors.
// Input that is not a URL at all is replaced entirely, since we cannot tell
// where a password might be in it.
func MaskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "<unparsable database URL>"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), passwordMask)
	}
	q := u.Query()
	masked := false
	for _, key := range []string{"password", "sslpassword"} {
		if q.Has(key) {
			q.Set(key, passwordMask)
			masked = true
		}
	}
	if masked {
		u.RawQuery = q.Encode()
	}
	return u.String()
}
