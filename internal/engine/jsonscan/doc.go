// Package jsonscan tells whether bytes are JSON, and whether they are compact, with encoding/json's
// verdicts exactly (json.Valid, and what json.Compact would leave as it is) but without its
// byte-at-a-time state machine: a replayed call checks every recorded answer and request it serves,
// and that check was a tenth of the proxy's time. It also marshals Go values as encoding/json does
// but refuses, where encoding/json silently repairs, a string that is not valid UTF-8 (Marshal,
// CheckUTF8): a recording must hold what it was given.
package jsonscan
