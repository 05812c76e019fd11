// Package fingerprint owns canonical JSON and the SHA-256 fingerprints that replay matches a live model
// request or tool call against its recording.
//
// Replay only works if two logically identical requests always produce the same fingerprint, so the
// canonical form removes every difference that carries no meaning:
//
//   - object keys are sorted by UTF-16 code units, as RFC 8785 (JCS) and JavaScript sort them;
//   - numbers are exact decimals, never rounded through a double: equal values print alike (1, 1.0,
//     1e0 and 10e-1 are "1"; -0 is 0) and different values never do (2^53+1, 1e-400). The text is the
//     digits laid out as ECMAScript's Number::toString lays out a double's, so a number written in a
//     double's shortest round-trip form, as JSON encoders write them, prints as RFC 8785 prints it;
//     other numbers keep all their digits ("9007199254740993", "1.0000000000000001", "1e-400");
//   - strings and keys are NFC-normalized, so "café" typed precomposed or decomposed is one string;
//   - there is no insignificant whitespace and only '"', '\\' and control characters are escaped.
//
// For NFC input whose numbers are in that shortest form the output is byte-for-byte what RFC 8785
// prescribes. On top of the canonical form, a fingerprint can mask volatile fields (Structural mode)
// and pass every string through a redaction function, so secrets that differ between runs but redact
// to the same token do not break matching.
//
// Ambiguity is refused rather than resolved: duplicate keys (also keys that only collide after NFC),
// NaN and infinities, decimal exponents beyond ±9999 (1e10000), invalid UTF-8, unpaired surrogate
// escapes, runs of more than 30 combining marks (which NFC can only normalise by inserting U+034F),
// cyclic Go values, values with no JSON form and malformed documents are typed errors that name where
// the problem is. A fingerprint that silently depended on which duplicate won, or on how a broken byte
// was repaired, would match requests it should not.
//
// The package must stay pure: no I/O, no clock, no randomness and no package state that changes a
// result (its only state is a pool of scratch memory that holds nothing from one call to the next), so
// a fingerprint depends on its input and nothing else, on every run and platform, and every function is
// safe for concurrent use. It knows nothing about
// sessions, providers or secrets; callers decide what to fingerprint, which paths are volatile and how to
// redact.
package fingerprint
