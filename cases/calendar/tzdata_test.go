package calendar_test

// The tests need the IANA database; the embedded copy is used only where the
// machine has none, so the zones resolve the same on every test machine that
// lacks one and as the system says elsewhere.
import _ "time/tzdata"
