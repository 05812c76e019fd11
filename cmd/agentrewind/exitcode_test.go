package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/bundle"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// readerErrors is every exported error type and sentinel the session, bundle and blob store readers
// return (and compare's), with the exit code it must give, wrapped as callers wrap it.
var readerErrors = map[string]struct {
	err  error
	exit int
}{
	"session.ErrNotCommitted":          {session.ErrNotCommitted, exitCorrupt},
	"session.ErrIncomplete":            {session.ErrIncomplete, exitCorrupt},
	"session.CorruptEventError":        {&session.CorruptEventError{File: "events.jsonl", Line: 2, Err: errors.New("x")}, exitCorrupt},
	"session.DigestMismatchError":      {&session.DigestMismatchError{Object: "events.jsonl"}, exitCorrupt},
	"session.MigrationError":           {&session.MigrationError{From: 9, To: 2}, exitCorrupt},
	"session.CorruptMetaError":         {&session.CorruptMetaError{File: "meta.json", Field: "eventsHash", Err: errors.New("x")}, exitCorrupt},
	"session.MissingError":             {&session.MissingError{Object: "blobs/ab", Err: fs.ErrNotExist}, exitCorrupt},
	"session.BlobRefError":             {&session.BlobRefError{Field: "result", Hash: "../x", Err: errors.New("x")}, exitCorrupt},
	"session.RefError":                 {&session.RefError{Field: "refs.messages", Hash: "ab", Err: errors.New("x")}, exitCorrupt},
	"session.TextError":                {&session.TextError{Msg: "duplicate key"}, exitCorrupt},
	"session.SerializedError":          {&session.SerializedError{Name: "ToolError", Message: "a recorded tool failed"}, exitError},
	"session.TooLargeError":            {&session.TooLargeError{What: "blob ab", Size: 1 << 30, Limit: session.MaxBlobBytes}, exitCorrupt},
	"session.InsideSessionError":       {&session.InsideSessionError{Dir: "runs/42/blobs", Resolved: "/w/runs/42/blobs", Session: "/w/runs/42"}, exitError},
	"bundle.UnsafeEntryError":          {&bundle.UnsafeEntryError{Name: "blobs/ab", Reason: "symbolic link"}, exitCorrupt},
	"bundle.BlobHashError":             {&bundle.BlobHashError{Name: "blobs/ab"}, exitCorrupt},
	"bundle.MissingEntryError":         {&bundle.MissingEntryError{Name: "events.jsonl"}, exitCorrupt},
	"bundle.TrailingDataError":         {&bundle.TrailingDataError{Offset: 4096, Bytes: 12}, exitCorrupt},
	"bundle.ErrDestinationNotEmpty":    {bundle.ErrDestinationNotEmpty, exitError},
	"bundle.DestinationError":          {&bundle.DestinationError{Dir: "out", Err: bundle.ErrDestinationNotEmpty}, exitError},
	"blobstore.ErrVaultMissing":        {blobstore.ErrVaultMissing, exitCorrupt},
	"blobstore.ErrMetaUnverified":      {blobstore.ErrMetaUnverified, exitCorrupt},
	"blobstore.ErrNotFound":            {blobstore.ErrNotFound, exitError},
	"blobstore.ErrSessionNotFound":     {blobstore.ErrSessionNotFound, exitError},
	"blobstore.ErrBucketNotFound":      {blobstore.ErrBucketNotFound, exitError},
	"blobstore.ErrDestinationNotEmpty": {blobstore.ErrDestinationNotEmpty, exitError},
	"blobstore.ErrTooSlow":             {blobstore.ErrTooSlow, exitError},
	"blobstore.ErrWindowClosed":        {blobstore.ErrWindowClosed, exitError},
	"blobstore.TooSlowError":           {&blobstore.TooSlowError{}, exitError},
	"blobstore.OpError":                {&blobstore.OpError{Op: "get", Object: "s3://b/k", Err: errors.New("connection reset")}, exitError},
	"blobstore.ConflictError":          {&blobstore.ConflictError{ID: "s"}, exitError},
	"blobstore.ErrExists":              {blobstore.ErrExists, exitError},
	"replay.FingerprintMismatchError":  {&replay.FingerprintMismatchError{Session: "s", Field: "argsHash"}, exitCorrupt},
	"replay.DriftError":                {&replay.DriftError{Step: 3}, exitDrift},
}

func TestExitCodesClassifyEveryReaderError(t *testing.T) {
	for name, tc := range readerErrors {
		t.Run(name, func(t *testing.T) {
			// escapeErr is how the session commands return every error, so its text prints safely.
			for _, err := range []error{tc.err, fmt.Errorf("session runs/42: %w", tc.err), escapeErr(classify(tc.err))} {
				if got := exitCode(classify(err)); got != tc.exit {
					t.Errorf("exitCode(classify(%v)) = %d, want %d", err, got, tc.exit)
				}
			}
		})
	}
	// A corrupt session reached through a transport error is still corrupt.
	wrapped := &blobstore.OpError{Op: "get", Object: "s3://b/k", Err: &session.DigestMismatchError{Object: "blobs/ab"}}
	if got := exitCode(classify(wrapped)); got != exitCorrupt {
		t.Errorf("a digest mismatch inside an OpError: exit %d", got)
	}
}

// TestExitCodeTableCoversEveryErrorType fails when a reader package gains an exported error type or
// sentinel that the table above does not classify.
func TestExitCodeTableCoversEveryErrorType(t *testing.T) {
	pkgs := map[string]string{
		"session":   "../../internal/engine/session",
		"bundle":    "../../internal/engine/bundle",
		"blobstore": "../../internal/blobstore",
	}
	for pkg, dir := range pkgs {
		for _, name := range exportedErrors(t, dir) {
			if _, ok := readerErrors[pkg+"."+name]; !ok {
				t.Errorf("%s.%s has no exit code in readerErrors", pkg, name)
			}
		}
	}
	for _, name := range exportedErrors(t, "../../internal/engine/replay") {
		if _, ok := readerErrors["replay."+name]; !ok && (name == "DriftError" || strings.Contains(name, "Fingerprint")) {
			t.Errorf("replay.%s has no exit code in readerErrors", name)
		}
	}
}

// exportedErrors lists the exported `type XError struct` and `var ErrX` declarations of a package.
func exportedErrors(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				switch sp := spec.(type) {
				case *ast.TypeSpec:
					if _, isStruct := sp.Type.(*ast.StructType); isStruct && sp.Name.IsExported() && strings.HasSuffix(sp.Name.Name, "Error") {
						names = append(names, sp.Name.Name)
					}
				case *ast.ValueSpec:
					// A const is a name or a number, never an error value.
					if gd.Tok != token.VAR {
						continue
					}
					for _, n := range sp.Names {
						if n.IsExported() && strings.HasPrefix(n.Name, "Err") {
							names = append(names, n.Name)
						}
					}
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatalf("no error declarations found in %s", dir)
	}
	return names
}
