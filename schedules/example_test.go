package schedules_test

import (
	"fmt"
	"time"

	"github.com/docket-dev/docket/schedules"
)

// The fall-back night in Berlin: 02:00-03:00 happens twice. A fixed-time
// schedule runs 02:30 once; an hourly one runs both 02:00s.
func ExamplePreview() {
	after := time.Date(2026, 10, 24, 23, 30, 0, 0, time.UTC)
	for _, expr := range []string{"30 2 * * *", "0 * * * *"} {
		occ, err := schedules.Preview(expr, "Europe/Berlin", after, 3)
		if err != nil {
			panic(err)
		}
		fmt.Println(expr)
		for _, o := range occ {
			fmt.Println(" ", o)
		}
	}
	// Output:
	// 30 2 * * *
	//   2026-10-25T02:30 fold 0 at 2026-10-25T00:30:00Z
	//   2026-10-26T02:30 fold 0 at 2026-10-26T01:30:00Z
	//   2026-10-27T02:30 fold 0 at 2026-10-27T01:30:00Z
	// 0 * * * *
	//   2026-10-25T02:00 fold 0 at 2026-10-25T00:00:00Z
	//   2026-10-25T02:00 fold 1 at 2026-10-25T01:00:00Z
	//   2026-10-25T03:00 fold 0 at 2026-10-25T02:00:00Z
}

// Spring forward in New York: 02:30 does not exist on 8 March, so a daily
// 02:30 runs at 03:00 EDT, the first instant after the gap.
func ExampleNext() {
	c, err := schedules.ParseCron("30 2 * * *")
	if err != nil {
		panic(err)
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic(err)
	}
	o, err := schedules.Next(c, ny, time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC))
	if err != nil {
		panic(err)
	}
	fmt.Println(o, c.FixedTime())
	// Output: 2026-03-08T02:30 fold 0 at 2026-03-08T07:00:00Z true
}
