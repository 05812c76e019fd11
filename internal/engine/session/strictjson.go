package session

// CheckJSONText refuses a JSON document that encoding/json would accept but silently rewrite — a
// repeated object key at any depth, invalid UTF-8, an unpaired surrogate escape — with a *TextError.
// It is the rule Open applies to every stored line, for a boundary that takes JSON in to refuse what
// could never be read back. doc must be valid JSON (json.Valid); anything else is refused too.
func CheckJSONText(doc []byte) error { return checkJSONText(doc, nil) }
