package devenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const modulePath = "github.com/agentrewind/agentrewind"

// RepoRoot returns the root of this repository, found by walking up from the working directory (go test
// runs each package in its own directory) to the go.mod that declares this module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module "+modulePath+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: not inside the agentrewind repository (no go.mod declaring " + modulePath + ")")
		}
		dir = parent
	}
}

// binaryFromEnvOrBin returns the path in the environment variable env when set, or else the single match
// of pattern under the repository's bin/ directory. makeTarget names what builds it.
func binaryFromEnvOrBin(env, pattern, makeTarget string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w; run 'make %s'", env, p, err, makeTarget)
		}
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	matches, _ := filepath.Glob(filepath.Join(root, "bin", pattern))
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("no %s under %s: run 'make %s' (make test does it for you) or set %s",
			pattern, filepath.Join(root, "bin"), makeTarget, env)
	case 1:
		return matches[0], nil
	default:
		return "", fmt.Errorf("several %s under %s (%s): set %s to choose one",
			pattern, filepath.Join(root, "bin"), strings.Join(matches, ", "), env)
	}
}
