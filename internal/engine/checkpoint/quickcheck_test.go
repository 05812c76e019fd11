package checkpoint

import (
	"testing"
	"time"
)

func TestUnchangedRereadsAFileUnlessEveryStatFieldMatchesAndItIsNotRacy(t *testing.T) {
	start := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	old := start.Add(-time.Hour).UnixNano()
	prev := Entry{Path: "a.go", Type: TypeFile, Mode: 0o644, Size: 10, Hash: hashOf("x"), MTimeNs: old, CTimeNs: old + 5, Inode: 42}
	same := FileStat{Size: 10, Mode: 0o644, MTime: old, CTime: old + 5, Inode: 42}
	with := func(f func(*FileStat)) FileStat { s := same; f(&s); return s }
	entry := func(f func(*Entry)) Entry { e := prev; f(&e); return e }
	for _, tc := range []struct {
		name string
		prev Entry
		cur  FileStat
		want bool
	}{
		{"every field equal and old", prev, same, true},
		{"size differs", prev, with(func(s *FileStat) { s.Size++ }), false},
		{"mtime differs", prev, with(func(s *FileStat) { s.MTime++ }), false},
		{"ctime differs (mtime set back by a tool)", prev, with(func(s *FileStat) { s.CTime++ }), false},
		{"inode differs (replaced by a rename)", prev, with(func(s *FileStat) { s.Inode++ }), false},
		{"mode differs", prev, with(func(s *FileStat) { s.Mode = 0o755 }), false},
		{"recorded without a stat (schema 1)", entry(func(e *Entry) { e.MTimeNs, e.CTimeNs, e.Inode = 0, 0, 0 }), FileStat{Size: 10, Mode: 0o644}, false},
		{"a symlink is never a file's baseline", entry(func(e *Entry) { e.Type = TypeSymlink }), same, false},
		{"racy: mtime 1 s before the baseline started", entry(func(e *Entry) { e.MTimeNs = start.Add(-time.Second).UnixNano() }), with(func(s *FileStat) { s.MTime = start.Add(-time.Second).UnixNano() }), false},
		{"racy: mtime exactly RacyWindow before", entry(func(e *Entry) { e.MTimeNs = start.Add(-RacyWindow).UnixNano() }), with(func(s *FileStat) { s.MTime = start.Add(-RacyWindow).UnixNano() }), false},
		{"not racy: 1 ns older than the window", entry(func(e *Entry) { e.MTimeNs = start.Add(-RacyWindow).UnixNano() - 1 }), with(func(s *FileStat) { s.MTime = start.Add(-RacyWindow).UnixNano() - 1 }), true},
		{"racy: mtime after the baseline started", entry(func(e *Entry) { e.MTimeNs = start.Add(time.Second).UnixNano() }), with(func(s *FileStat) { s.MTime = start.Add(time.Second).UnixNano() }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unchanged(tc.prev, tc.cur, start); got != tc.want {
				t.Errorf("Unchanged = %v, want %v", got, tc.want)
			}
		})
	}
}
