//go:build race

package fingerprint

// raceEnabled: the race detector makes sync.Pool drop items at random, so allocation counts vary.
const raceEnabled = true
