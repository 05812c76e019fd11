// Package inspect reads a recorded session for a person: the context sent at a step, how it changed
// between two steps, and token counts by the best tier available. It only reads events; printing is
// the CLI's and the web timeline's.
package inspect
