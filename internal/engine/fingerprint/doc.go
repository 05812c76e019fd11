// Package fingerprint owns canonical JSON and the SHA-256 fingerprints that replay matches a live model
// request or tool call against its recording.
//
// Replay only works if two logically identical requests always produce the same fingerprint, so the
// canonical form removes every difference that carries no meaning:
//
//   - object keys are sorted by UTF-16 code units, as RFC 8785 (JCS) and JavaScript sort them;
//   - numbers are parsed as IEEE-754 doubles and printed in the ECMAScript shortest round-trip form,
//     so 1, 1.0, 1e0 and 10e-1 are one number and -0 is 0;
//   - strings and keys are NFC-normalized, so "café" typed precomposed or decomposed is one string;
//   - there is no insignificant whitespace and only '"', '\\' and control characters are escaped.
//
// For NFC input the output is byte-for-byte what RFC 8785 prescribes. On top of the canonical form, a
// fingerprint can mask volatile fields (Structural mode) and pass every string through a redaction
// function, so secrets that differ between runs but redact to the same token do not break matching.
//
// Ambiguity is refused rather than resolved: duplicate keys (also keys that only collide after NFC),
// NaN and infinities, invalid UTF-8, unpaired surrogate escapes, values with no JSON form and malformed
// documents are typed errors that name where the problem is. A fingerprint that silently depended on
// which duplicate won, or on how a broken byte was repaired, would match requests it should not.
//
// The package must stay pure: no I/O, no clock, no randomness and no package state that changes, so a
// fingerprint depends on its input and nothing else, on every run and platform, and every function is
// safe for concurrent use. It knows nothing about
// sessions, providers or secrets; callers decide what to fingerprint, which paths are volatile and how to
// redact.
package fingerprint
