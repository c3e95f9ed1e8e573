package console_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/console"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
)

// A service mounts the console under /ops/ and signs people in its own way:
// here, a header its own middleware would set after checking the session.
func Example() {
	ctx := context.Background()
	pool := testkit.ExamplePool(ctx, db.SystemClock{}, "user:ana", []string{"shop"},
		access.Grant{Principal: "user:ops", Project: "shop", Capability: access.JobCancel})
	defer pool.Close()

	ops, err := console.New(pool, console.Config{
		Prefix: "/ops",
		AuthenticateFunc: func(r *http.Request) (access.Actor, error) {
			if name := r.Header.Get("X-Shop-User"); name != "" {
				return access.Actor("user:" + name), nil
			}
			return "", errors.New("Sign in to the shop first.")
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/", ops)

	for _, who := range []string{"ops", ""} {
		r := httptest.NewRequest(http.MethodGet, "/ops/console/", nil)
		if who != "" {
			r.Header.Set("X-Shop-User", who)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Printf("%q: %d\n", who, w.Code)
	}
	// Output:
	// "ops": 200
	// "": 401
}
