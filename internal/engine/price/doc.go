// Package price turns the tokens of recorded model calls into what they cost, from a table of list
// prices per provider and model. It is pure: callers read price files and flags and hand the bytes in.
//
// A cost is never a guess. A call whose model has no price, or whose token counts contradict each other,
// leaves the cost unknown and is named (Cost.Unpriced), so a reader shows "unknown", never $0. A cost
// the recording itself states (a provider that reports one, a migrated recording) is taken as stated.
// Sums are exact integers: a rate is micro-dollars per million tokens, so a token at a rate costs a
// picodollar amount and only the final figure is rounded, to the micro-dollar.
package price
