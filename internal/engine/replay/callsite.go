package replay

import (
	"path"
	"runtime"
	"strconv"
	"strings"
)

// CallOption adjusts one boundary call.
type CallOption func(*callOptions)

type callOptions struct {
	site string
}

// Site names the call site explicitly. A named site is the strongest matching key: two identical
// requests made from different sites replay their own recorded answers.
func Site(name string) CallOption { return func(o *callOptions) { o.site = name } }

// runnerFrames is the prefix of the runner's own method frames, skipped when deriving a call site.
var runnerFrames = func() string {
	pc, _, _, _ := runtime.Caller(0)
	fn := runtime.FuncForPC(pc).Name() // ".../internal/engine/replay.init.func1"
	return fn[:strings.LastIndex(fn, "/")+len("/replay")+1] + "(*runner)."
}()

// deriveCallSite names a call site from the first caller outside the runner: its function and file
// basename, without line numbers so that unrelated edits to the file do not move it, and without
// closure suffixes or enclosing functions, which the compiler renames when it inlines. When no frame is
// found it falls back to a per-lane ordinal of the call kind.
func deriveCallSite(opts callOptions, l *lane, kind string) string {
	if opts.site != "" {
		return opts.site
	}
	pcs := make([]uintptr, 16)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if f.Function != "" && !strings.HasPrefix(f.Function, runnerFrames) {
			return trimFunction(f.Function) + "@" + path.Base(f.File)
		}
		if !more {
			break
		}
	}
	return kind + "#" + strconv.Itoa(l.ordinal(kind))
}

// trimFunction reduces a runtime function name to the named function (with its receiver, for a method):
// "example.com/agent.run.plan.func2" becomes "plan", "example.com/agent.(*Bot).step.func1" becomes
// "(*Bot).step".
func trimFunction(fn string) string {
	if i := strings.LastIndex(fn, "/"); i >= 0 {
		fn = fn[i+1:]
	}
	fn = stripTypeArgs(fn)
	parts := strings.Split(fn, ".")[1:] // drop the package name
	for len(parts) > 1 && isGenerated(parts[len(parts)-1]) {
		parts = parts[:len(parts)-1]
	}
	if len(parts) == 0 {
		return fn
	}
	name := parts[len(parts)-1]
	if len(parts) > 1 && strings.HasPrefix(parts[len(parts)-2], "(") {
		name = parts[len(parts)-2] + "." + name
	}
	return name
}

// isGenerated reports whether a name segment was made up by the compiler: func1, gowrap2, 3.
func isGenerated(seg string) bool {
	for _, prefix := range []string{"func", "gowrap", "deferwrap", ""} {
		if rest, ok := strings.CutPrefix(seg, prefix); ok && rest != "" {
			if _, err := strconv.Atoi(rest); err == nil {
				return true
			}
		}
	}
	return false
}

// stripTypeArgs removes the instantiation brackets of generic functions ("ask[...]" becomes "ask"), whose
// dots would otherwise split the name.
func stripTypeArgs(fn string) string {
	var b strings.Builder
	depth := 0
	for _, r := range fn {
		switch {
		case r == '[':
			depth++
		case r == ']' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}
