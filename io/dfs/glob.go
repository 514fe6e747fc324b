package dfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"syscall"
)

// HasMeta reports whether s contains any of the glob characters Glob
// interprets ("*", "?", "[", "\\").
func HasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// maxGlobMatches bounds the result of one Glob, so that a pattern such as
// "/*/*/*/*" on a large namespace fails instead of exhausting memory.
const maxGlobMatches = 1 << 20

// glob expands pattern over fsys one path element at a time: literal
// elements are appended as they are, an element with wildcards lists the
// directories matched so far and keeps the entries it matches. A trailing
// run of literal elements is checked with Stat. sep is the separator of
// fsys's names ("/" on HDFS and on POSIX hosts).
func glob(ctx context.Context, fsys FileSystem, pattern, sep string) ([]string, error) {
	if pattern == "" {
		return nil, nil
	}
	abs := strings.HasPrefix(pattern, sep)
	var elems []string
	for _, e := range strings.Split(pattern, sep) {
		if e == "" || e == "." {
			continue
		}
		// Hadoop and shells negate a class with "[!...]", path.Match with "[^...]".
		e = strings.ReplaceAll(e, "[!", "[^")
		if _, err := path.Match(e, ""); err != nil {
			return nil, pathError("glob", fsys.URI(pattern), err)
		}
		elems = append(elems, e)
	}
	root := "."
	if abs {
		root = sep
	}
	join := func(dir, name string) string {
		switch dir {
		case ".":
			return name
		case sep:
			return sep + name
		}
		return dir + sep + name
	}
	cands := []string{root}
	unchecked := false // cands may not exist: literal elements were appended
	for _, e := range elems {
		if err := ctx.Err(); err != nil {
			return nil, pathError("glob", fsys.URI(pattern), err)
		}
		next := cands[:0:0]
		if !HasMeta(e) {
			for _, c := range cands {
				next = append(next, join(c, e))
			}
			cands, unchecked = next, true
			continue
		}
		for _, c := range cands {
			infos, err := fsys.ReadDir(ctx, c)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
					continue
				}
				return nil, err
			}
			for _, fi := range infos {
				if ok, _ := path.Match(e, fi.Name()); ok {
					next = append(next, join(c, fi.Name()))
				}
			}
			if len(next) > maxGlobMatches {
				return nil, pathError("glob", fsys.URI(pattern), fmt.Errorf("more than %d matches", maxGlobMatches))
			}
		}
		cands, unchecked = next, false
	}
	if unchecked {
		kept := cands[:0]
		for _, c := range cands {
			if _, err := fsys.Stat(ctx, c); err != nil {
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
					continue
				}
				return nil, err
			}
			kept = append(kept, c)
		}
		cands = kept
	}
	if len(elems) == 0 {
		// The pattern is the root itself.
		if _, err := fsys.Stat(ctx, root); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil
			}
			return nil, err
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	sort.Strings(cands)
	return cands, nil
}
