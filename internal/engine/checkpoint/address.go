package checkpoint

import (
	"fmt"
	"strconv"
	"strings"
)

// Resolve finds the checkpoint an address names among list (seed D11):
//   - "latest": the newest capture (of sessionID when it is set);
//   - "step N": the newest capture of sessionID (or of any session when empty) taken at or before
//     step N;
//   - anything else: a case-insensitive id prefix that must name exactly one checkpoint.
//
// Guards are named only by id prefix: one carries the step its restore happened at, not the step
// its files belong to.
//
// An unknown address wraps ErrNotFound; an ambiguous prefix is an *AmbiguousError with the candidates.
func Resolve(list []Summary, sessionID, addr string) (Summary, error) {
	sorted := append([]Summary(nil), list...)
	SortNewestFirst(sorted)
	inSession := func(s Summary) bool { return !s.Guard && (sessionID == "" || s.Anchor.Session == sessionID) }
	addr = strings.TrimSpace(addr)
	fields := strings.Fields(addr)
	switch {
	case addr == "":
		return Summary{}, fmt.Errorf("an empty address: use an id prefix, \"step N\" or \"latest\"")
	case strings.EqualFold(addr, "latest"):
		for _, s := range sorted {
			if inSession(s) {
				return s, nil
			}
		}
		return Summary{}, fmt.Errorf("latest: %w", ErrNotFound)
	case strings.EqualFold(fields[0], "step"):
		if len(fields) != 2 {
			return Summary{}, fmt.Errorf("%q: write \"step N\" with one step number", addr)
		}
		n, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil || n < 0 {
			return Summary{}, fmt.Errorf("%q: the step must be a non-negative integer", addr)
		}
		for _, s := range sorted {
			if inSession(s) && s.Anchor.Step <= n {
				return s, nil
			}
		}
		return Summary{}, fmt.Errorf("no checkpoint at or before step %d: %w", n, ErrNotFound)
	}
	prefix := strings.ToLower(addr)
	var hits []Summary
	for _, s := range sorted {
		if strings.HasPrefix(s.ID, prefix) {
			hits = append(hits, s)
		}
	}
	switch len(hits) {
	case 0:
		return Summary{}, fmt.Errorf("%q: %w", addr, ErrNotFound)
	case 1:
		// A session, when given, bounds an id prefix too: restoring another session's files under
		// this session's name (and anchoring its guard there) is a mistake, not an address.
		if sessionID != "" && hits[0].Anchor.Session != sessionID {
			return Summary{}, fmt.Errorf("%q is a checkpoint of session %q, not of %q: %w", addr, hits[0].Anchor.Session, sessionID, ErrNotFound)
		}
		return hits[0], nil
	}
	amb := &AmbiguousError{Query: addr}
	for _, h := range hits {
		amb.Candidates = append(amb.Candidates, h.ID)
	}
	return Summary{}, amb
}
