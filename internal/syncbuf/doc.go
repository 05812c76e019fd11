// Package syncbuf is a bytes.Buffer that goroutines may write and read at once: where a child
// process's or a server's output is collected while another goroutine reads it.
package syncbuf
