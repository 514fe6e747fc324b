package split

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/spindle-ps/spindle/io/dfs"
)

// Resolver maps a URI onto a file system and a name within it;
// *dfs.Resolver is one.
type Resolver interface {
	Resolve(ctx context.Context, uri string) (dfs.FileSystem, string, error)
}

// Split is a byte range of one input file, the unit of work a worker
// reads. The lines that belong to it are those that start inside
// [Start, Start+Length) (see Open).
type Split struct {
	// URI is the file's full URI ("hdfs://host:port/p" or "file:///p").
	URI string
	// Start and Length delimit the range, in bytes of the file.
	Start, Length int64
	// FileSize is the size of the file when the split was planned; Open
	// refuses a file whose size has changed since.
	FileSize int64
	// Compressed marks a gzip file, read whole by one split.
	Compressed bool
}

func (s Split) String() string {
	return fmt.Sprintf("%s:%d+%d", s.URI, s.Start, s.Length)
}

// MaxSplits bounds the number of splits one Plan returns, so that a tiny
// split size over a large input fails instead of exhausting memory.
const MaxSplits = 1 << 22

// ErrNoMatch is wrapped by the error Plan returns for an input that
// names no file.
var ErrNoMatch = errors.New("split: input matches no file")

// unsupportedCompression lists the file extensions of Hadoop codecs that
// Open cannot decompress; reading such a file as text would only yield
// garbage, so Plan refuses it.
var unsupportedCompression = []string{".bz2", ".snappy", ".lz4", ".zst", ".deflate", ".xz", ".lzo"}

// Plan cuts the input files into splits of splitSize bytes (the last split
// of a file may be shorter). Each input is a URI or path (see
// dfs.ParseURI) naming
//
//   - a file;
//   - a directory: the files directly inside it, except those whose names
//     start with "_" or "." (such as _SUCCESS); a subdirectory is an error;
//   - a glob ("*", "?", "[...]" in any path element): each match is taken
//     as a file or directory as above, except matches whose names start
//     with "_" or "." when the pattern's last element does not.
//
// An input that names no file is an error naming it (wrapping
// ErrNoMatch); so is an input whose file system fails. A file named in
// more than one input is planned once. Empty files yield no split.
// Gzip files (".gz") are not splittable and get one split each with
// Compressed set; files with the extension of another Hadoop codec are
// an error. splitSize 0 means each file's block size (HDFS's, or
// dfs.LocalBlockSize); a negative one is an error.
//
// Splits are sorted by URI, then by Start.
func Plan(ctx context.Context, r Resolver, inputs []string, splitSize int64) ([]Split, error) {
	if splitSize < 0 {
		return nil, fmt.Errorf("split: negative split size %d", splitSize)
	}
	if len(inputs) == 0 {
		return nil, fmt.Errorf("split: no inputs")
	}
	p := planner{ctx: ctx, size: splitSize, seen: map[string]bool{}}
	for _, in := range inputs {
		if err := p.input(r, in); err != nil {
			return nil, err
		}
	}
	sort.Slice(p.splits, func(i, j int) bool {
		a, b := p.splits[i], p.splits[j]
		if a.URI != b.URI {
			return a.URI < b.URI
		}
		return a.Start < b.Start
	})
	return p.splits, nil
}

type planner struct {
	ctx    context.Context
	size   int64
	seen   map[string]bool
	splits []Split
}

func hidden(name string) bool {
	return strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".")
}

func (p *planner) input(r Resolver, in string) error {
	fsys, name, err := r.Resolve(p.ctx, in)
	if err != nil {
		return fmt.Errorf("split: input %s: %w", in, err)
	}
	files := 0
	if dfs.HasMeta(name) {
		matches, err := fsys.Glob(p.ctx, name)
		if err != nil {
			return fmt.Errorf("split: input %s: %w", in, err)
		}
		keepHidden := hidden(path.Base(strings.ReplaceAll(name, "\\", "/")))
		for _, m := range matches {
			if hidden(path.Base(m)) && !keepHidden {
				continue
			}
			fi, err := fsys.Stat(p.ctx, m)
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since the glob listed it
			}
			if err != nil {
				return fmt.Errorf("split: input %s: %w", in, err)
			}
			n, err := p.path(fsys, in, m, fi)
			if err != nil {
				return err
			}
			files += n
		}
	} else {
		fi, err := fsys.Stat(p.ctx, name)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s (%w)", ErrNoMatch, in, err)
		}
		if err != nil {
			return fmt.Errorf("split: input %s: %w", in, err)
		}
		if files, err = p.path(fsys, in, name, fi); err != nil {
			return err
		}
	}
	if files == 0 {
		return fmt.Errorf("%w: %s", ErrNoMatch, in)
	}
	return nil
}

// path plans a file, or the files of a directory, and returns how many
// files it found.
func (p *planner) path(fsys dfs.FileSystem, in, name string, fi fs.FileInfo) (int, error) {
	if !fi.IsDir() {
		return 1, p.file(fsys, in, name, fi)
	}
	infos, err := fsys.ReadDir(p.ctx, name)
	if err != nil {
		return 0, fmt.Errorf("split: input %s: %w", in, err)
	}
	n := 0
	for _, e := range infos {
		if hidden(e.Name()) {
			continue
		}
		child := joinName(name, e.Name())
		if e.IsDir() {
			return 0, fmt.Errorf("split: input %s: %s is a directory (an input directory may hold only files; use a glob such as %s/*/*)",
				in, fsys.URI(child), strings.TrimSuffix(in, "/"))
		}
		if err := p.file(fsys, in, child, e); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

func joinName(dir, name string) string {
	if strings.HasSuffix(dir, "/") {
		return dir + name
	}
	return dir + "/" + name
}

func (p *planner) file(fsys dfs.FileSystem, in, name string, fi fs.FileInfo) error {
	uri := fsys.URI(name)
	if p.seen[uri] {
		return nil
	}
	p.seen[uri] = true
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("split: input %s: %s is not a regular file", in, uri)
	}
	lower := strings.ToLower(name)
	for _, ext := range unsupportedCompression {
		if strings.HasSuffix(lower, ext) {
			return fmt.Errorf("split: input %s: %s: %s compression is not supported (only gzip)", in, uri, ext)
		}
	}
	size := fi.Size()
	if size == 0 {
		return nil
	}
	if strings.HasSuffix(lower, ".gz") {
		return p.add(Split{URI: uri, Start: 0, Length: size, FileSize: size, Compressed: true})
	}
	step := p.size
	if step == 0 {
		step = dfs.BlockSize(fi)
	}
	if step <= 0 {
		step = dfs.LocalBlockSize
	}
	if (size-1)/step+1 > int64(MaxSplits-len(p.splits)) {
		return fmt.Errorf("split: input %s: more than %d splits (split size %d bytes, %s has %d bytes)", in, MaxSplits, step, uri, size)
	}
	for start := int64(0); start < size; start += step {
		if err := p.ctx.Err(); err != nil {
			return fmt.Errorf("split: plan: %w", err)
		}
		p.splits = append(p.splits, Split{URI: uri, Start: start, Length: min(step, size-start), FileSize: size})
	}
	return nil
}

func (p *planner) add(s Split) error {
	if len(p.splits) >= MaxSplits {
		return fmt.Errorf("split: more than %d splits", MaxSplits)
	}
	p.splits = append(p.splits, s)
	return nil
}
