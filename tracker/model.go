package tracker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The model a job writes: in its output directory, one text file per
// server, part-NNNNN (the server's rank, five digits as Hadoop numbers
// its parts), of lines "key<TAB>value[<TAB>value…]"; then _manifest.json;
// then, last, an empty _SUCCESS. A directory without _SUCCESS holds no
// complete model.
const (
	SuccessFile  = "_SUCCESS"
	ManifestFile = "_manifest.json"
	// ModelFormat names the part files' format in the manifest.
	ModelFormat = "spindle-text/v1"
)

// PartName returns the file name of server rank's part.
func PartName(rank int) string { return fmt.Sprintf("part-%05d", rank) }

// Manifest describes a complete model.
type Manifest struct {
	Format  string         `json:"format"`
	Job     string         `json:"job,omitempty"`
	Parts   []ManifestPart `json:"parts"`
	Created time.Time      `json:"created"`
}

// ManifestPart is one part file of a model.
type ManifestPart struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// ModelFS is what committing a model needs of a filesystem.
type ModelFS interface {
	// Size returns the size of the file at path, or an error wrapping
	// fs.ErrNotExist.
	Size(ctx context.Context, path string) (int64, error)
	// WriteFile writes data to path so that readers see all or nothing
	// (a temporary name, then a rename).
	WriteFile(ctx context.Context, path string, data []byte) error
}

// CommitModel checks that dir holds a part from each of the servers and
// writes the manifest, then _SUCCESS. It fails, naming the missing part,
// when one is absent.
func CommitModel(ctx context.Context, fsys ModelFS, dir string, servers int, job string) error {
	m := Manifest{Format: ModelFormat, Job: job, Created: time.Now().UTC()}
	var missing []error
	for r := 0; r < servers; r++ {
		p := filepath.Join(dir, PartName(r))
		n, err := fsys.Size(ctx, p)
		if err != nil {
			missing = append(missing, fmt.Errorf("%s: %w", p, err))
			continue
		}
		m.Parts = append(m.Parts, ManifestPart{Name: PartName(r), Bytes: n})
	}
	if len(missing) > 0 {
		return fmt.Errorf("tracker: model in %s is incomplete: %w", dir, errors.Join(missing...))
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("tracker: manifest: %w", err)
	}
	if err := fsys.WriteFile(ctx, filepath.Join(dir, ManifestFile), append(data, '\n')); err != nil {
		return fmt.Errorf("tracker: write manifest: %w", err)
	}
	if err := fsys.WriteFile(ctx, filepath.Join(dir, SuccessFile), nil); err != nil {
		return fmt.Errorf("tracker: write %s: %w", SuccessFile, err)
	}
	return nil
}

// LocalFS is ModelFS on the local filesystem.
type LocalFS struct{}

// Size implements ModelFS.
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

// WriteFile implements ModelFS.
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
