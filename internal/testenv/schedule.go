package testenv

// NextSchedule is the schedule after one that saw options[i] choices at its decision i, depth first:
// an interleaving harness runs the empty schedule (every decision 0) and then each NextSchedule until
// it is nil, which plays every order of the actors' steps once.
func NextSchedule(schedule, options []int) []int {
	next := make([]int, len(options))
	copy(next, schedule)
	for i := len(next) - 1; i >= 0; i-- {
		if next[i]+1 < options[i] {
			next[i]++
			return next[:i+1]
		}
	}
	return nil
}
