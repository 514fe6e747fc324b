package model

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ps/spindle/io/dfs"
)

// The model a job writes: in its output directory, one text file per
// server, part-NNNNN (the server's rank, five digits as Hadoop numbers
// its parts), of lines "key<TAB>value[<TAB>value…]"; then _manifest.json;
// then, last, an empty _SUCCESS. A directory without _SUCCESS holds no
// complete model.
const (
	SuccessFile  = "_SUCCESS"
	ManifestFile = "_manifest.json"
	// Format names the part files' format in the manifest.
	Format = "spindle-text/v1"
)

// PartName returns the file name of server rank's part.
func PartName(rank int) string { return fmt.Sprintf("part-%05d", rank) }

// Manifest describes a complete model.
type Manifest struct {
	Format  string         `json:"format"`
	Job     string         `json:"job,omitempty"`
	Parts   []ManifestPart `json:"parts"`
	Created time.Time      `json:"created"`
	// Training says how the model was trained, as the tracker saw it;
	// absent when the launcher did not know.
	Training *Training `json:"training,omitempty"`
}

// Training is the tracker's account of the job that wrote a model.
type Training struct {
	// EpochRecords counts, per epoch, the records of the input the
	// workers read, each shard once however often it was handed out.
	// Epochs before the one a resumed job started at are absent.
	EpochRecords map[int]int64 `json:"epoch_records,omitempty"`
	// Metrics are the last epoch's metrics the workers reported, and
	// MetricsEpoch that epoch.
	Metrics      map[string]float64 `json:"metrics,omitempty"`
	MetricsEpoch int                `json:"metrics_epoch"`
	// ResumedFrom is the checkpoint the last run of the job started from
	// (after --resume, or a restart after a server was lost); "" when it
	// started from scratch.
	ResumedFrom string `json:"resumed_from,omitempty"`
	// Restarts counts the times the whole job was started again from a
	// checkpoint after losing a server or the scheduler.
	Restarts int `json:"restarts,omitempty"`
	// Started is when the job's tracker started; FirstData when a worker
	// first asked it for input, about to train its first batch.
	Started   time.Time `json:"started"`
	FirstData time.Time `json:"first_data,omitzero"`
}

// ManifestPart is one part file of a model.
type ManifestPart struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// FS is what committing a model needs of a filesystem.
type FS interface {
	// Size returns the size of the file at path, or an error wrapping
	// fs.ErrNotExist.
	Size(ctx context.Context, path string) (int64, error)
	// WriteFile writes data to path so that readers see all or nothing
	// (a temporary name, then a rename).
	WriteFile(ctx context.Context, path string, data []byte) error
}

// Commit checks that dir holds a part from each of the servers and
// writes the manifest, then _SUCCESS. It fails, naming the missing part,
// when one is absent. A job without servers must have written at least
// part-00000 (its workers write the parts, as many as they like, numbered
// from 0 without gaps). The manifest is m (its Job and Training) with
// the format, the parts found and the time filled in.
func Commit(ctx context.Context, fsys FS, dir string, servers int, m Manifest) error {
	m.Format, m.Parts, m.Created = Format, nil, time.Now().UTC()
	if servers == 0 {
		for {
			n, err := fsys.Size(ctx, joinURI(dir, PartName(len(m.Parts))))
			if err != nil {
				break
			}
			m.Parts = append(m.Parts, ManifestPart{Name: PartName(len(m.Parts)), Bytes: n})
		}
		if len(m.Parts) == 0 {
			return fmt.Errorf("model: model in %s is incomplete: no %s", dir, PartName(0))
		}
	}
	var missing []error
	for r := 0; r < servers; r++ {
		p := joinURI(dir, PartName(r))
		n, err := fsys.Size(ctx, p)
		if err != nil {
			missing = append(missing, fmt.Errorf("%s: %w", p, err))
			continue
		}
		m.Parts = append(m.Parts, ManifestPart{Name: PartName(r), Bytes: n})
	}
	if len(missing) > 0 {
		return fmt.Errorf("model: model in %s is incomplete: %w", dir, errors.Join(missing...))
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("model: manifest: %w", err)
	}
	if err := fsys.WriteFile(ctx, joinURI(dir, ManifestFile), append(data, '\n')); err != nil {
		return fmt.Errorf("model: write manifest: %w", err)
	}
	if err := fsys.WriteFile(ctx, joinURI(dir, SuccessFile), nil); err != nil {
		return fmt.Errorf("model: write %s: %w", SuccessFile, err)
	}
	return nil
}

// LocalFS is FS on the local filesystem.
type LocalFS struct{}

// Size implements FS.
func (LocalFS) Size(_ context.Context, path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	if fi.IsDir() {
		return 0, fmt.Errorf("%s is a directory: %w", path, fs.ErrInvalid)
	}
	return fi.Size(), nil
}

// WriteFile implements FS.
func (LocalFS) WriteFile(_ context.Context, path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// ResolverFS is FS over any file system io/dfs resolves (local or
// HDFS), for models written to URIs.
type ResolverFS struct{ R Resolver }

// Resolver maps a URI onto a file system; *dfs.Resolver is one.
type Resolver interface {
	Resolve(ctx context.Context, uri string) (dfs.FileSystem, string, error)
}

// Size implements FS.
func (r ResolverFS) Size(ctx context.Context, uri string) (int64, error) {
	fsys, name, err := r.R.Resolve(ctx, uri)
	if err != nil {
		return 0, err
	}
	fi, err := fsys.Stat(ctx, name)
	if err != nil {
		return 0, err
	}
	if fi.IsDir() {
		return 0, fmt.Errorf("%s is a directory: %w", uri, fs.ErrInvalid)
	}
	return fi.Size(), nil
}

// WriteFile implements FS.
func (r ResolverFS) WriteFile(ctx context.Context, uri string, data []byte) error {
	fsys, name, err := r.R.Resolve(ctx, uri)
	if err != nil {
		return err
	}
	return WriteAtomic(ctx, fsys, name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteAtomic writes a file that readers see whole or not at all: fill
// writes it under a temporary name in the same directory, which is then
// renamed over name. On any failure the temporary file is removed.
func WriteAtomic(ctx context.Context, fsys dfs.FileSystem, name string, fill func(io.Writer) error) error {
	dir, base := path.Split(name)
	tmp := path.Join(dir, "."+base+".tmp")
	w, err := fsys.Create(ctx, tmp, dfs.CreateOptions{Overwrite: true})
	if err != nil {
		return err
	}
	if err := fill(w); err != nil {
		_ = w.Close()
		_ = fsys.Remove(ctx, tmp)
		return err
	}
	if err := w.Close(); err != nil {
		_ = fsys.Remove(ctx, tmp)
		return err
	}
	if err := fsys.Rename(ctx, tmp, name); err != nil {
		_ = fsys.Remove(ctx, tmp)
		return err
	}
	return nil
}

// joinURI appends a file name to a directory path or URI.
func joinURI(dir, name string) string {
	if len(dir) > 0 && dir[len(dir)-1] == '/' {
		return dir + name
	}
	return dir + "/" + name
}

// ErrIncomplete is wrapped by ReadModel's error for a directory without
// _SUCCESS: no complete model is there.
var ErrIncomplete = errors.New("model: no complete model (no _SUCCESS)")

// maxManifest bounds the manifest's size.
const maxManifest = 16 << 20

// ReadManifest returns the manifest of the complete model in dir (a path
// or URI); a directory without _SUCCESS gives an error wrapping
// ErrIncomplete.
func ReadManifest(ctx context.Context, r Resolver, dir string) (Manifest, error) {
	fsys, name, err := r.Resolve(ctx, dir)
	if err != nil {
		return Manifest{}, err
	}
	return completeManifest(ctx, fsys, strings.TrimSuffix(name, "/"), dir)
}

// completeManifest reads base's manifest once _SUCCESS says the model is
// complete; dir names base in errors.
func completeManifest(ctx context.Context, fsys dfs.FileSystem, base, dir string) (Manifest, error) {
	if _, err := fsys.Stat(ctx, base+"/"+SuccessFile); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Manifest{}, fmt.Errorf("%w in %s", ErrIncomplete, dir)
		}
		return Manifest{}, err
	}
	return readManifest(ctx, fsys, base)
}

// readManifest reads and checks base/_manifest.json.
func readManifest(ctx context.Context, fsys dfs.FileSystem, base string) (Manifest, error) {
	uri := fsys.URI(base + "/" + ManifestFile)
	mf, err := fsys.Open(ctx, base+"/"+ManifestFile)
	if err != nil {
		return Manifest{}, err
	}
	defer mf.Close()
	var m Manifest
	if err := json.NewDecoder(io.LimitReader(mf, maxManifest)).Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("model: %s: %w", uri, err)
	}
	if m.Format != Format {
		return Manifest{}, fmt.Errorf("model: %s: format %q, want %q", uri, m.Format, Format)
	}
	return m, nil
}

// maxModelLine bounds a line of a part file.
const maxModelLine = 1 << 20

// ReadModel reads the complete model in dir (a path or URI), calling fn
// for every key with its values, part by part in rank order and, within a
// part, in file order. It refuses a directory without _SUCCESS, and names
// the file and line of a malformed line. vals is reused between calls.
func Read(ctx context.Context, r Resolver, dir string, fn func(key uint64, vals []float32) error) error {
	fsys, name, err := r.Resolve(ctx, dir)
	if err != nil {
		return err
	}
	base := strings.TrimSuffix(name, "/")
	m, err := completeManifest(ctx, fsys, base, dir)
	if err != nil {
		return err
	}
	var vals []float32
	for _, p := range m.Parts {
		if strings.ContainsAny(p.Name, "/\\") {
			return fmt.Errorf("model: manifest names part %q outside the model directory", p.Name)
		}
		uri := fsys.URI(base + "/" + p.Name)
		f, err := fsys.Open(ctx, base+"/"+p.Name)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), maxModelLine)
		line := 0
		for sc.Scan() {
			line++
			fields := strings.Split(sc.Text(), "\t")
			key, err := strconv.ParseUint(fields[0], 10, 64)
			if err != nil || len(fields) < 2 {
				f.Close()
				return fmt.Errorf("model: %s line %d: want key<TAB>value…", uri, line)
			}
			vals = vals[:0]
			for _, s := range fields[1:] {
				v, err := strconv.ParseFloat(s, 32)
				if err != nil {
					f.Close()
					return fmt.Errorf("model: %s line %d: value %q: %w", uri, line, s, err)
				}
				vals = append(vals, float32(v))
			}
			if err := fn(key, vals); err != nil {
				f.Close()
				return err
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return fmt.Errorf("model: %s: %w", uri, err)
		}
	}
	return nil
}
