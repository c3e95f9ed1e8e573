package plans

import (
	"encoding/json"
	"fmt"
)

// LabelUntrusted returns value, a JSON object, as a step's result labelled
// untrusted: the member "trust" set to "untrusted". A step returns it when
// its result carries what nobody vouches for (a model's answer, a page it
// fetched, a reply from outside). The label joins downstream as the run's
// input label does: an argument sourced from the result is untrusted, so
// is every step after this one, and a Trusted step that would get it is
// refused, naming the source. A label lowers trust, never raises it: any
// value of "trust" but "trusted" labels the result untrusted, and a step
// whose arguments were untrusted has an untrusted result whatever it says.
func LabelUntrusted(value any) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if value != nil {
		b, err := json.Marshal(value)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &m); err != nil || m == nil {
			return nil, fmt.Errorf("plans.LabelUntrusted: the value must be a JSON object: %v", err)
		}
	}
	m["trust"] = json.RawMessage(`"untrusted"`)
	return json.Marshal(m)
}
