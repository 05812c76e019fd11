package ui

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/agentrewind/agentrewind/internal/engine/evidence"
	"github.com/agentrewind/agentrewind/internal/engine/inspect"
	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict"
)

//go:embed assets
var assets embed.FS

// ContentSecurityPolicy is sent with every answer: scripts and styles only from the page's own
// files (no inline script, no eval), data only from the page's own endpoints, no frames, forms or
// plugins. A recorded string that slipped into the page as markup still could not run.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Page sizes of the paged endpoints: a page the browser asks for by default, and the most it may ask.
const (
	defaultLimit = 200
	maxLimit     = 2000
)

// maxCached is how many loaded sessions the server keeps. A committed recording never changes, and
// a session replaced by another recording under its id is cached under another key (see open), so a
// cached one is never stale; the bound is only memory.
const maxCached = 8

// Options configure a Server.
type Options struct {
	// LoopbackOnly refuses requests whose Host header is not a loopback name or address, so a web
	// page on another site cannot reach a server bound to 127.0.0.1 through DNS rebinding. Set it
	// when the listen address is a loopback one.
	LoopbackOnly bool
	// Prices prices the model calls shown; nil is the built-in list prices.
	Prices *price.Table
}

// Server answers the page and its JSON endpoints over a Source. It only reads.
type Server struct {
	src  Source
	opts Options
	mux  *http.ServeMux

	mu     sync.Mutex
	loaded map[string]*loadedSession
	order  []string
	// verdicts remembers the list's verdicts by session and recording (listingKey), so listing many
	// sessions judges each once, not once per request.
	verdicts map[string][2]string
}

// loadedSession is a session loaded once and the verdict computed on it once.
type loadedSession struct {
	once sync.Once
	s    *session.Session
	err  error

	planOnce sync.Once
	plan     *PlanView
	planErr  error
}

// NewServer serves src.
func NewServer(src Source, opts Options) *Server {
	if opts.Prices == nil {
		opts.Prices = price.Default()
	}
	srv := &Server{src: src, opts: opts, mux: http.NewServeMux(), loaded: map[string]*loadedSession{}, verdicts: map[string][2]string{}}
	static, _ := fs.Sub(assets, "assets")
	files := http.FileServerFS(static)
	srv.mux.Handle("GET /assets/", http.StripPrefix("/assets/", files))
	srv.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "index.html")
	})
	srv.api("GET /api/sessions", srv.sessions)
	srv.api("GET /api/sessions/{id}", srv.summary)
	srv.api("GET /api/sessions/{id}/events", srv.events)
	srv.api("GET /api/sessions/{id}/steps/{step}", srv.step)
	srv.api("GET /api/sessions/{id}/diff", srv.diff)
	srv.api("GET /api/sessions/{id}/fork", srv.fork)
	srv.api("GET /api/sessions/{id}/plan", srv.plan)
	srv.api("GET /api/sessions/{id}/checkpoints", srv.checkpoints)
	return srv
}

// ServeHTTP refuses every method but GET and HEAD, and foreign Host headers when LoopbackOnly, then
// serves with the security headers set.
func (srv *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("method %s: this server is read-only (GET and HEAD only)", r.Method))
		return
	}
	if srv.opts.LoopbackOnly && !loopbackHost(r.Host) {
		writeError(w, http.StatusMisdirectedRequest, fmt.Errorf("host %q: this server answers only to a loopback name (localhost, 127.0.0.1, [::1])", r.Host))
		return
	}
	srv.mux.ServeHTTP(w, r)
}

// loopbackHost reports whether a Host header names this machine's loopback interface.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// api registers a JSON endpoint: fn's value is sent as JSON, its error as {"error": ...} with a status
// that says whose fault it was.
func (srv *Server) api(pattern string, fn func(r *http.Request) (any, error)) {
	srv.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		v, err := fn(r)
		if err != nil {
			writeError(w, statusOf(err), err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(v)
	})
}

// paramError is a request parameter that is not what the endpoint takes.
type paramError struct {
	name string
	err  error
}

func (e *paramError) Error() string { return fmt.Sprintf("parameter %s: %v", e.name, e.err) }

func statusOf(err error) int {
	var pe *paramError
	var se *inspect.StepError
	switch {
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.As(err, &pe):
		return http.StatusBadRequest
	case errors.As(err, new(*unshowableError)):
		return http.StatusUnprocessableEntity
	case errors.As(err, &se):
		if se.Got == "" {
			return http.StatusNotFound
		}
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, status int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

// maxShowableStep is the largest step number a page holds exactly: its numbers are doubles
// (Number.MAX_SAFE_INTEGER).
const maxShowableStep = 1<<53 - 1

// unshowableError is a valid session the page could not show truthfully.
type unshowableError struct {
	id    string
	step  int64
	index int
}

func (e *unshowableError) Error() string {
	return fmt.Sprintf("session %s: step %d (event %d) is past %d, the largest step number a browser holds exactly: the page would merge neighbouring steps (agentrewind inspect shows it)",
		e.id, e.step, e.index, int64(maxShowableStep))
}

// checkShowable refuses a session whose steps (strictly increasing, gaps allowed) pass
// maxShowableStep.
func checkShowable(s *session.Session) error {
	for i := range s.Events {
		if s.Events[i].Step > maxShowableStep {
			return &unshowableError{id: s.Meta.ID, step: s.Events[i].Step, index: i}
		}
	}
	return nil
}

// open returns the session named by the request's {id}, loading it once per recording: a source
// that can replace a session under the same id (RevisionSource) is asked which recording the id
// holds now, and the cache is keyed by both.
func (srv *Server) open(ctx context.Context, id string) (*loadedSession, error) {
	if err := CheckID(id); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	rev, err := srv.revision(ctx, id)
	if err != nil {
		return nil, err
	}
	key := id + "\x00" + rev
	srv.mu.Lock()
	ls, ok := srv.loaded[key]
	if !ok {
		ls = &loadedSession{}
		srv.loaded[key] = ls
		srv.order = append(srv.order, key)
		if len(srv.order) > maxCached {
			delete(srv.loaded, srv.order[0])
			srv.order = srv.order[1:]
		}
	}
	srv.mu.Unlock()
	// The load is shared by every request waiting on it, so it must not end with the request that
	// started it: a client that leaves would fail the others with its own cancellation. It is
	// bounded by the source (a pull, a file read) and its result is kept for the next request.
	ls.once.Do(func() {
		if ls.s, ls.err = srv.src.Open(context.WithoutCancel(ctx), id); ls.err == nil {
			ls.err = checkShowable(ls.s)
		}
	})
	if ls.err != nil {
		srv.forget(key, ls) // a failure is not kept: the next request tries again
		return nil, ls.err
	}
	return ls, nil
}

// revision is the recording session id holds now, when the source can say (RevisionSource).
func (srv *Server) revision(ctx context.Context, id string) (string, error) {
	if rs, ok := srv.src.(RevisionSource); ok {
		return rs.Revision(ctx, id)
	}
	return "", nil
}

// forget drops the cache entry key if it still holds ls.
func (srv *Server) forget(key string, ls *loadedSession) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.loaded[key] != ls {
		return
	}
	delete(srv.loaded, key)
	for i, k := range srv.order {
		if k == key {
			srv.order = append(srv.order[:i:i], srv.order[i+1:]...)
			break
		}
	}
}

func (srv *Server) session(r *http.Request) (*loadedSession, error) {
	return srv.open(r.Context(), r.PathValue("id"))
}

// sessions lists the sessions, each with its resume verdict: the source's, else the engine's.
func (srv *Server) sessions(r *http.Request) (any, error) {
	list, err := srv.src.Sessions(r.Context())
	if err != nil {
		return nil, err
	}
	for i := range list {
		l := &list[i]
		if l.Verdict != "" || l.Problem != "" {
			continue
		}
		rev, err := srv.revision(r.Context(), l.ID)
		if err != nil {
			l.Problem = err.Error()
			continue
		}
		key := listingKey(l) + "\x00" + rev
		srv.mu.Lock()
		v, ok := srv.verdicts[key]
		srv.mu.Unlock()
		if !ok {
			p, err := srv.planOf(r.Context(), l.ID)
			if err != nil {
				l.Problem = err.Error()
				continue
			}
			v = [2]string{p.Verdict, p.Reason}
			srv.mu.Lock()
			srv.verdicts[key] = v
			srv.mu.Unlock()
		}
		l.Verdict, l.VerdictReason = v[0], v[1]
	}
	if list == nil {
		list = []Listing{}
	}
	return list, nil
}

// listingKey names a recording: a session re-recorded under the same id has another creation time
// or length, and so another key; the source's revision, added to it, tells also a log edited in place.
func listingKey(l *Listing) string {
	return fmt.Sprintf("%s\x00%d\x00%d", l.ID, l.CreatedAt, l.Events)
}

func (srv *Server) summary(r *http.Request) (any, error) {
	ls, err := srv.session(r)
	if err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	sum := summaryOf(id, ls.s, srv.opts.Prices)
	if list, err := srv.src.Sessions(r.Context()); err == nil {
		for _, l := range list {
			if l.Parent != "" && (l.Parent == id || l.Parent == ls.s.Meta.ID) {
				sum.Forks = append(sum.Forks, l.ID)
			}
		}
	}
	return sum, nil
}

// Page is one page of a session's timeline.
type Page struct {
	Total  int   `json:"total"`
	Offset int   `json:"offset"`
	Rows   []Row `json:"rows"`
}

func (srv *Server) events(r *http.Request) (any, error) {
	ls, err := srv.session(r)
	if err != nil {
		return nil, err
	}
	offset, limit, err := pageParams(r)
	if err != nil {
		return nil, err
	}
	lo, hi := pageBounds(len(ls.s.Events), offset, limit)
	return Page{Total: len(ls.s.Events), Offset: lo, Rows: pricedRowsOf(ls.s, ls.s.Events[lo:hi], srv.opts.Prices)}, nil
}

func (srv *Server) step(r *http.Request) (any, error) {
	ls, err := srv.session(r)
	if err != nil {
		return nil, err
	}
	step, err := intParam("step", r.PathValue("step"))
	if err != nil {
		return nil, err
	}
	for i := range ls.s.Events {
		if ls.s.Events[i].Step == step {
			return stepView(ls.s, i, srv.opts.Prices)
		}
	}
	return nil, &inspect.StepError{Step: step}
}

func (srv *Server) diff(r *http.Request) (any, error) {
	ls, err := srv.session(r)
	if err != nil {
		return nil, err
	}
	from, err := intParam("from", r.URL.Query().Get("from"))
	if err != nil {
		return nil, err
	}
	to, err := intParam("to", r.URL.Query().Get("to"))
	if err != nil {
		return nil, err
	}
	return diffView(ls.s.Events, from, to)
}

// fork shows the session beside its parent from the fork point. The parent is looked up in the same
// source by the session's meta.parent.
func (srv *Server) fork(r *http.Request) (any, error) {
	ls, err := srv.session(r)
	if err != nil {
		return nil, err
	}
	parentID := ls.s.Meta.Parent
	if parentID == "" {
		return nil, fmt.Errorf("%w: session %s is not a fork (its meta.json names no parent)", ErrNotFound, r.PathValue("id"))
	}
	parent, err := srv.open(r.Context(), parentID)
	if err != nil {
		return nil, fmt.Errorf("the parent %s of fork %s: %w", parentID, r.PathValue("id"), err)
	}
	offset, limit, err := pageParams(r)
	if err != nil {
		return nil, err
	}
	return forkView(parentID, r.PathValue("id"), parent.s, ls.s, offset, limit, srv.opts.Prices), nil
}

func (srv *Server) plan(r *http.Request) (any, error) {
	return srv.planOf(r.Context(), r.PathValue("id"))
}

// planOf is the verdict on session id: the one the source stores (a ResumePlan), else the engine's
// on the recording alone.
func (srv *Server) planOf(ctx context.Context, id string) (*PlanView, error) {
	if ps, ok := srv.src.(PlanSource); ok {
		p, err := ps.StoredPlan(ctx, id)
		if err != nil || p != nil {
			return p, err
		}
	}
	ls, err := srv.open(ctx, id)
	if err != nil {
		return nil, err
	}
	ls.planOnce.Do(func() {
		policy := verdict.DefaultPolicy()
		g, err := evidence.Gather(ls.s, nil, policy)
		if err != nil {
			ls.planErr = err
			return
		}
		p := planView(verdict.Evaluate(g.Facts, policy), g.Facts.Ledger.Checkpoint)
		ls.plan = &p
	})
	return ls.plan, ls.planErr
}

func (srv *Server) checkpoints(r *http.Request) (any, error) {
	id := r.PathValue("id")
	if err := CheckID(id); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	list, err := srv.src.Checkpoints(r.Context(), id)
	if list == nil {
		list = []CheckpointView{}
	}
	return list, err
}

func pageParams(r *http.Request) (offset, limit int, err error) {
	q := r.URL.Query()
	offset, limit = 0, defaultLimit
	if s := q.Get("offset"); s != "" {
		if offset, err = strconv.Atoi(s); err != nil || offset < 0 {
			return 0, 0, &paramError{"offset", fmt.Errorf("%q is not a count from 0", s)}
		}
	}
	if s := q.Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > maxLimit {
			return 0, 0, &paramError{"limit", fmt.Errorf("%q is not a number from 1 to %d", s, maxLimit)}
		}
	}
	return offset, limit, nil
}

func intParam(name, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, &paramError{name, fmt.Errorf("%q is not a step number", s)}
	}
	return n, nil
}
