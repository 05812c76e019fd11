// Package fsutil holds the file-output rules every command that writes a file follows: an output
// path must not lie inside the directory the command reads, a file is replaced only by a complete
// new one (written beside it, synced, renamed), and a rename never replaces anything but a regular
// file: a device or FIFO is written into. It decides nothing else and owns no file layout.
package fsutil
