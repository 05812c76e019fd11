// Package codecerr is how the provider codecs report input they cannot map: one error type naming the
// codec, the method, the member or the byte offset at fault, the causes every codec shares, and the
// helpers that validate a body before it is read.
package codecerr
