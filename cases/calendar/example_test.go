package calendar_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/docket-dev/docket/cases/calendar"
	"github.com/docket-dev/docket/db"
)

// A deadline of five working days in Berlin, asked for on the Wednesday
// before Easter 2027: Good Friday and Easter Monday are holidays, and the
// clocks go forward on the Sunday between them.
func ExampleBusinessDays() {
	cal, err := calendar.NewBusinessDays(calendar.BusinessDaysConfig{
		Zone:     "Europe/Berlin",
		Holidays: []string{"2027-03-26", "2027-03-29"},
		Cutoff:   "17:00",
	})
	if err != nil {
		panic(err)
	}
	from := time.Date(2027, 3, 24, 10, 0, 0, 0, cal.Location()) // Wednesday, 10:00 CET

	due, err := cal.Resolve(from, "5 working days")
	fmt.Println(due, err)
	fmt.Println(due.UTC())

	// After the cut-off the request counts as received on Thursday.
	due, _ = cal.Resolve(from.Add(8*time.Hour), "5 working days at 12:00")
	fmt.Println(due)

	// Calendar days are not working days, and the calendar says so.
	_, err = cal.Resolve(from, "5 days")
	fmt.Println(errors.Is(err, db.ErrInvalidArgument))
	// Output:
	// 2027-04-02 17:00:00 +0200 CEST <nil>
	// 2027-04-02 15:00:00 +0000 UTC
	// 2027-04-05 12:00:00 +0200 CEST
	// true
}

// An exact elapsed duration; a day is refused because it is not one.
func ExampleDurations() {
	var cal calendar.Durations
	from := time.Date(2027, 3, 27, 12, 0, 0, 0, time.UTC)

	due, err := cal.Resolve(from, "PT48H")
	fmt.Println(due, err)

	_, err = cal.Resolve(from, "2d")
	fmt.Println(errors.Is(err, db.ErrInvalidArgument))
	// Output:
	// 2027-03-29 12:00:00 +0000 UTC <nil>
	// true
}
