package evidence

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
)

// go-git's file:// transport shells out to git-upload-pack, which a FROM-scratch image does not have.
// Serving local repositories in-process keeps a file:// or plain-path --git-url working everywhere;
// http(s) and ssh are untouched. It is installed once, before any clone can run.
func init() {
	client.InstallProtocol("file", server.NewClient(localLoader{}))
}

// localLoader opens a local repository (bare or with a work tree) for the in-process file transport.
type localLoader struct{}

func (localLoader) Load(ep *transport.Endpoint) (storer.Storer, error) {
	r, err := git.PlainOpen(ep.Path)
	if err != nil {
		return nil, transport.ErrRepositoryNotFound
	}
	return r.Storer, nil
}

// Workspace is a git repository read as evidence: the commits reachable from one ref.
type Workspace struct {
	repo   *git.Repository
	source string
	head   plumbing.Hash
	// ancestry is every commit reachable from head, in breadth-first order from head.
	ancestry []plumbing.Hash
	inAnc    map[plumbing.Hash]bool
}

// OpenGit reads the repository at dir (a work tree or any directory inside one, or a bare repository)
// at ref; an empty ref is HEAD.
func OpenGit(dir, ref string) (*Workspace, error) {
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return nil, fmt.Errorf("opening git repository %s: %w (pass --git-dir a git work tree or bare repository)", dir, err)
	}
	return newWorkspace(repo, dir, ref)
}

// CloneGit clones url (https, ssh, file:// or a local path) bare into dir and reads it at ref; an empty
// ref is the remote's default branch. dir must be empty or absent; the caller removes it.
func CloneGit(ctx context.Context, url, ref, dir string) (*Workspace, error) {
	return CloneGitWithAuth(ctx, url, ref, dir, GitAuth{})
}

// GitAuth are the credentials of a clone: a password or token (sent only over https), or an SSH private
// key together with the known hosts its server's key is checked against. The zero value clones
// anonymously.
type GitAuth struct {
	// Username goes with Password; empty means "git", which token-based servers accept.
	Username string
	Password string
	// SSHPrivateKey is a PEM private key; SSHKnownHosts are known_hosts lines for the server.
	SSHPrivateKey []byte
	SSHKnownHosts []byte
}

// CloneGitWithAuth is CloneGit with credentials. A password is refused for anything but https (it
// would travel in clear or to a server that never asked for it), and an SSH key without known hosts is
// refused: an unchecked host key would hand the evidence to whoever answers.
func CloneGitWithAuth(ctx context.Context, url, ref, dir string, auth GitAuth) (*Workspace, error) {
	url = localURL(url)
	method, err := authMethod(url, auth, filepath.Dir(filepath.Clean(dir)))
	if err != nil {
		return nil, err
	}
	repo, err := git.PlainCloneContext(ctx, dir, true, &git.CloneOptions{URL: url, Auth: method})
	if err != nil {
		return nil, fmt.Errorf("cloning %s: %w (check the URL, the credentials, and that the repository is reachable and not empty)", url, err)
	}
	return newWorkspace(repo, url, ref)
}

func authMethod(url string, auth GitAuth, tmp string) (transport.AuthMethod, error) {
	user := auth.Username
	if user == "" {
		user = "git"
	}
	switch {
	case auth.Password != "" && len(auth.SSHPrivateKey) > 0:
		return nil, errors.New("git credentials: give a password or an SSH key, not both")
	case auth.Password != "":
		if !strings.HasPrefix(url, "https://") {
			return nil, fmt.Errorf("git credentials: a password is only sent over https, and %s is not an https:// URL", url)
		}
		return &githttp.BasicAuth{Username: user, Password: auth.Password}, nil
	case len(auth.SSHPrivateKey) > 0:
		if len(auth.SSHKnownHosts) == 0 {
			return nil, errors.New("git credentials: an SSH key needs the server's known hosts, to check whom the evidence comes from")
		}
		keys, err := gitssh.NewPublicKeys(user, auth.SSHPrivateKey, "")
		if err != nil {
			return nil, fmt.Errorf("git credentials: the SSH private key: %w", err)
		}
		known, err := os.CreateTemp(tmp, "known_hosts-*")
		if err != nil {
			return nil, fmt.Errorf("git credentials: writing the known hosts: %w", err)
		}
		defer known.Close()
		if _, err := known.Write(auth.SSHKnownHosts); err != nil {
			return nil, fmt.Errorf("git credentials: writing the known hosts: %w", err)
		}
		keys.HostKeyCallback, err = gitssh.NewKnownHostsCallback(known.Name())
		if err != nil {
			return nil, fmt.Errorf("git credentials: the known hosts: %w", err)
		}
		return keys, nil
	}
	return nil, nil
}

// localURL turns a relative local path into an absolute one, which the file transport needs.
func localURL(url string) string {
	if strings.Contains(url, "://") || strings.Contains(url, "@") {
		return url
	}
	if _, err := os.Stat(url); err == nil {
		if abs, err := filepath.Abs(url); err == nil {
			return abs
		}
	}
	return url
}

func newWorkspace(repo *git.Repository, source, ref string) (*Workspace, error) {
	head, err := resolveRef(repo, ref)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	anc, err := reachable(repo, head)
	if err != nil {
		return nil, fmt.Errorf("%s: walking the history of %s: %w", source, head, err)
	}
	w := &Workspace{repo: repo, source: source, head: head, ancestry: anc, inAnc: make(map[plumbing.Hash]bool, len(anc))}
	for _, h := range anc {
		w.inAnc[h] = true
	}
	return w, nil
}

// resolveRef resolves HEAD, a branch (local or remote-tracking), a tag or a full commit hash. It
// deliberately does not resolve revision expressions or abbreviated hashes: the ref names the lane.
func resolveRef(repo *git.Repository, ref string) (plumbing.Hash, error) {
	if ref == "" || ref == "HEAD" {
		h, err := repo.Head()
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("reading HEAD: %w (is the repository empty? pass --git-ref)", err)
		}
		return h.Hash(), nil
	}
	for _, name := range []string{ref, "refs/heads/" + ref, "refs/remotes/origin/" + ref, "refs/tags/" + ref} {
		r, err := repo.Reference(plumbing.ReferenceName(name), true)
		if err == nil {
			return peel(repo, r.Hash())
		}
	}
	if plumbing.IsHash(ref) {
		if _, err := repo.CommitObject(plumbing.NewHash(ref)); err == nil {
			return plumbing.NewHash(ref), nil
		}
	}
	return plumbing.ZeroHash, fmt.Errorf("ref %q is not a branch, tag or commit of this repository", ref)
}

// peel follows an annotated tag to its commit.
func peel(repo *git.Repository, h plumbing.Hash) (plumbing.Hash, error) {
	if tag, err := repo.TagObject(h); err == nil {
		c, err := tag.Commit()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		return c.Hash, nil
	}
	return h, nil
}

// reachable lists every commit reachable from h through all parents, breadth-first.
func reachable(repo *git.Repository, h plumbing.Hash) ([]plumbing.Hash, error) {
	seen := map[plumbing.Hash]bool{h: true}
	queue := []plumbing.Hash{h}
	for i := 0; i < len(queue); i++ {
		c, err := repo.CommitObject(queue[i])
		if err != nil {
			return nil, err
		}
		for _, p := range c.ParentHashes {
			if !seen[p] {
				seen[p] = true
				queue = append(queue, p)
			}
		}
	}
	return queue, nil
}

// Source is where the workspace was read from.
func (w *Workspace) Source() string { return w.source }

// Head is the commit the evidence is read at.
func (w *Workspace) Head() string { return w.head.String() }

// Ancestry lists the commits reachable from Head.
func (w *Workspace) Ancestry() []string {
	out := make([]string, len(w.ancestry))
	for i, h := range w.ancestry {
		out[i] = h.String()
	}
	return out
}

// errAmbiguous is returned when an abbreviated SHA names more than one commit.
var errAmbiguous = errors.New("ambiguous abbreviated SHA")

// findInAncestry resolves a claimed SHA against the ancestry with the resume package's matching rule.
func (w *Workspace) findInAncestry(sha string, same func(a, b string) bool) (plumbing.Hash, error) {
	var found []plumbing.Hash
	for _, h := range w.ancestry {
		if same(sha, h.String()) {
			found = append(found, h)
		}
	}
	switch len(found) {
	case 0:
		return plumbing.ZeroHash, plumbing.ErrObjectNotFound
	case 1:
		return found[0], nil
	}
	return plumbing.ZeroHash, errAmbiguous
}

// existsAnywhere reports whether a claimed SHA names a commit in the repository outside ancestry,
// which tells "on another branch" apart from "never existed" in the adjudication report.
func (w *Workspace) existsAnywhere(sha string, same func(a, b string) bool) bool {
	iter, err := w.repo.CommitObjects()
	if err != nil {
		return false
	}
	found := false
	_ = iter.ForEach(func(c *object.Commit) error {
		if same(sha, c.Hash.String()) {
			found = true
			return storer.ErrStop
		}
		return nil
	})
	return found
}

// footprint lists the paths a commit changed against its first parent (a root commit against the
// empty tree). An --allow-empty commit has none.
func (w *Workspace) footprint(h plumbing.Hash) ([]string, error) {
	c, err := w.repo.CommitObject(h)
	if err != nil {
		return nil, err
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, err
	}
	var parent *object.Tree
	if c.NumParents() > 0 {
		p, err := c.Parent(0)
		if err != nil {
			return nil, err
		}
		if parent, err = p.Tree(); err != nil {
			return nil, err
		}
	}
	changes, err := object.DiffTree(parent, tree)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, ch := range changes {
		for _, name := range []string{ch.From.Name, ch.To.Name} {
			if name != "" {
				paths = append(paths, name)
			}
		}
	}
	return paths, nil
}

// reachableFrom is the set of commits reachable from h, restricted to the workspace's ancestry.
func (w *Workspace) reachableFrom(h plumbing.Hash) (map[plumbing.Hash]bool, error) {
	list, err := reachable(w.repo, h)
	if err != nil {
		return nil, err
	}
	set := make(map[plumbing.Hash]bool, len(list))
	for _, x := range list {
		set[x] = true
	}
	return set, nil
}
