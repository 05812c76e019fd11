// Package redact owns secret redaction for recordings: it finds secrets (API keys, access keys,
// bearer tokens, user-supplied shapes) in strings and JSON documents, replaces each by a deterministic
// token "arw:redacted:<first 32 hex of sha256(secret)>" (128 bits: no two secrets can be made to share
// one), and keeps the token→secret map in a Vault that is sealed with AES-256-GCM into vault.enc so
// that a local replay can restore the secrets. The 12-hex tokens of older recordings are still
// restored, never minted; a vault that meets two secrets for one token refuses to seal.
//
// A secret found once is redacted wherever it appears later, bare or quoted, and anywhere in the
// string or document it was found in. A string whose JSON
// escapes spell a secret (\u0073k-…, a key with \/) is replaced as a whole by its own token. Only the
// tokens the redactor minted shield text from the patterns: "arw:redacted:" written before a secret
// protects nothing.
//
// Stream redacts a streamed response as a whole: the strings of its chunks are joined per lane (a
// content block, a choice, a tool call) and redacted together, so a secret cut anywhere by chunk
// boundaries is still found; a stream in which a known secret could still be read is refused
// (ErrStreamExposed) rather than stored.
//
// Determinism is the point of the token: the same secret always yields the same token, in every
// process and on every machine, so a redacted recording still replays (request fingerprints match)
// and two recordings of the same run still diff cleanly.
//
// What this package must not do:
//   - write a secret anywhere but into a sealed vault: no logging, no error message carries one;
//   - decide where vault.enc or the key lives, or talk to Kubernetes: callers hand it a KeyProvider
//     (a key file on a workstation, or a key the caller fetched from a Kubernetes Secret);
//   - ship the vault: a bundle never carries vault.enc (package bundle enforces that on both ends);
//   - repair bytes: a JSON string with invalid UTF-8 or an unpaired surrogate escape is refused
//     (TextError), never replaced by U+FFFD, because fingerprints are taken of the redacted body.
//
// Redaction is best effort by construction — only the shapes in the configured patterns are found —
// so the patterns are deliberately tight (they must not eat ordinary prose) and users extend them
// with ParsePatterns.
package redact
