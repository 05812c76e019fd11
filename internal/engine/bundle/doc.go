// Package bundle owns the .rewind archive: a gzip-compressed tar of one recorded session directory
// holding meta.json, events.jsonl and blobs/<sha256 hex> — and nothing else. Pack writes one
// deterministically (the same session always packs to the same bytes, so bundles can be compared and
// content-addressed); Unpack extracts one that may come from anyone, so it trusts nothing in it.
//
// What this package must not do:
//   - put vault.enc (the encrypted secret map) into a bundle, or accept a bundle that carries one:
//     secrets stay on the machine that recorded them;
//   - follow or create links, devices or any file outside the allowed set, on either side;
//   - write outside the destination directory (every write goes through an os.Root), leave a partial
//     extraction or a session that does not verify behind (Unpack extracts beside the destination and
//     renames only a verified session into place), overwrite an existing session (the destination
//     must be empty), or keep a blob no event references;
//   - interpret the session itself: reading events.jsonl and verifying the result belong to the
//     session package, which Unpack calls. The only content checks here are the ones the format
//     itself defines (a blob's name is the sha256 of its bytes) and counting redaction tokens so a
//     user sees what a bundle reveals.
package bundle
