package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/spindle-ps/spindle/io/dfs"
)

// The files of a model directory (see the package documentation).
const (
	SuccessFile  = "_SUCCESS"
	ManifestFile = "_manifest.json"
	// TablesFile describes the tables of a model written by TableWriter;
	// server 0 writes it, and Commit lists its tables in the manifest.
	TablesFile = "_tables.json"

	// Format is the manifest format of a model of one table in text
	// parts, directly in the model directory (and of models written
	// without a TablesFile); it is also the format name of text parts.
	Format = "spindle-text/v1"
	// FormatBinary is the format name of binary parts.
	FormatBinary = "spindle-binary/v1"
	// FormatTables is the manifest format of every other model: several
	// tables, or binary parts. Its Tables say where each table's parts
	// are and in which format.
	FormatTables = "spindle-model/v2"

	// tablesFormat is the format of TablesFile.
	tablesFormat = "spindle-model-tables/v1"
)

// PartName returns the file name of server rank's part.
func PartName(rank int) string { return fmt.Sprintf("part-%05d", rank) }

// Manifest describes a complete model.
type Manifest struct {
	// Format is Format or FormatTables.
	Format string `json:"format"`
	Job    string `json:"job,omitempty"`
	// Parts are the parts of the model's only table when Format is
	// Format, in rank order; empty otherwise.
	Parts []ManifestPart `json:"parts"`
	// Tables lists the model's tables, in the order the job declared
	// them; absent for a model written without a TablesFile.
	Tables  []ManifestTable `json:"tables,omitempty"`
	Created time.Time       `json:"created"`
	// Training says how the model was trained, as the tracker saw it;
	// absent when the launcher did not know.
	Training *Training `json:"training,omitempty"`
}

// ManifestTable is one table of a model.
type ManifestTable struct {
	// Name is the table's name.
	Name string `json:"name"`
	// Dir is the directory of its parts, relative to the model's: "" for
	// a model of one table, the table's name otherwise.
	Dir string `json:"dir"`
	// Width is the number of values per key.
	Width int `json:"width"`
	// Elem is the element type the job trained with: "float32" or
	// "float64".
	Elem string `json:"elem"`
	// Format is the parts' format: Format (text) or FormatBinary.
	Format string `json:"format"`
	// Parts are the table's parts, in rank order.
	Parts []ManifestPart `json:"parts,omitempty"`
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
	// LocatedShards counts the shards with known hosts handed to workers
	// whose host was known, NodeLocalShards those read on a host that
	// stores them; both 0 when the input's locations were not known.
	LocatedShards   int `json:"located_shards,omitempty"`
	NodeLocalShards int `json:"node_local_shards,omitempty"`
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
	// ReadFile returns the contents of the file at path, at most limit
	// bytes (more is an error), or an error wrapping fs.ErrNotExist.
	ReadFile(ctx context.Context, path string, limit int64) ([]byte, error)
	// WriteFile writes data to path so that readers see all or nothing
	// (a temporary name, then a rename).
	WriteFile(ctx context.Context, path string, data []byte) error
}

// tablesDoc is the content of TablesFile.
type tablesDoc struct {
	Format string          `json:"format"`
	Tables []ManifestTable `json:"tables"`
}

// maxTables bounds the tables a model lists.
const maxTables = 1 << 10

// parseTables reads and checks a TablesFile; uri names it in errors.
func parseTables(data []byte, uri string) ([]ManifestTable, error) {
	var d tablesDoc
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("model: %s: %w", uri, err)
	}
	if d.Format != tablesFormat {
		return nil, fmt.Errorf("model: %s: format %q, want %q", uri, d.Format, tablesFormat)
	}
	if err := checkTables(d.Tables); err != nil {
		return nil, fmt.Errorf("model: %s: %w", uri, err)
	}
	return d.Tables, nil
}

// checkTables checks the tables a TablesFile or a manifest lists.
func checkTables(tables []ManifestTable) error {
	if len(tables) == 0 || len(tables) > maxTables {
		return fmt.Errorf("%d tables, want 1..%d", len(tables), maxTables)
	}
	seen := map[string]bool{}
	for _, t := range tables {
		switch {
		case !validName(t.Name):
			return fmt.Errorf("table name %q", t.Name)
		case seen[t.Name]:
			return fmt.Errorf("table %s listed twice", t.Name)
		case t.Dir != "" && t.Dir != t.Name, t.Dir == "" && len(tables) > 1:
			return fmt.Errorf("table %s: directory %q", t.Name, t.Dir)
		case t.Width < 1 || t.Width > MaxWidth:
			return fmt.Errorf("table %s: width %d, want 1..%d", t.Name, t.Width, MaxWidth)
		case t.Elem != "float32" && t.Elem != "float64":
			return fmt.Errorf("table %s: element type %q", t.Name, t.Elem)
		case t.Format != Format && t.Format != FormatBinary:
			return fmt.Errorf("table %s: part format %q", t.Name, t.Format)
		}
		for _, p := range t.Parts {
			if !validName(p.Name) {
				return fmt.Errorf("table %s: part %q", t.Name, p.Name)
			}
		}
		seen[t.Name] = true
	}
	return nil
}

// validName reports whether s can name a table or a part: a base name,
// not hidden.
func validName(s string) bool {
	return s != "" && len(s) <= 255 && !strings.ContainsAny(s, "/\\\x00") && s[0] != '.' && s[0] != '_'
}

// Commit checks that dir holds a part from each of the servers and
// writes the manifest, then _SUCCESS. It fails, naming the missing part,
// when one is absent; then nothing is written. The manifest is m (its Job
// and Training) with the format, the tables, the parts found and the time
// filled in.
//
// When dir holds a TablesFile (a model written by TableWriter), every
// table it lists must have a part from each server, in the table's
// directory; with no servers (a collective job, whose workers write the
// model), parts numbered from 0 without gaps, at least part-00000.
// Otherwise the model is one table of text parts directly in dir; a job
// without servers must then have written at least part-00000 (its
// workers write the parts, as many as they like, numbered from 0 without
// gaps).
func Commit(ctx context.Context, fsys FS, dir string, servers int, m Manifest) error {
	m.Format, m.Parts, m.Tables, m.Created = Format, nil, nil, time.Now().UTC()
	data, err := fsys.ReadFile(ctx, joinURI(dir, TablesFile), maxManifest)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if m.Parts, err = legacyParts(ctx, fsys, dir, servers); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("model: %w", err)
	default:
		if m.Tables, err = parseTables(data, joinURI(dir, TablesFile)); err != nil {
			return err
		}
		var missing []error
		for i := range m.Tables {
			t := &m.Tables[i]
			t.Parts = nil
			if servers == 0 {
				// Written by workers: parts numbered from 0 without gaps.
				for {
					p := joinURI(joinURI(dir, t.Dir), PartName(len(t.Parts)))
					n, err := fsys.Size(ctx, p)
					if err != nil {
						if len(t.Parts) == 0 {
							missing = append(missing, fmt.Errorf("%s: %w", p, err))
						}
						break
					}
					t.Parts = append(t.Parts, ManifestPart{Name: PartName(len(t.Parts)), Bytes: n})
				}
				continue
			}
			for r := 0; r < servers; r++ {
				p := joinURI(joinURI(dir, t.Dir), PartName(r))
				n, err := fsys.Size(ctx, p)
				if err != nil {
					missing = append(missing, fmt.Errorf("%s: %w", p, err))
					continue
				}
				t.Parts = append(t.Parts, ManifestPart{Name: PartName(r), Bytes: n})
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("model: model in %s is incomplete: %w", dir, errors.Join(missing...))
		}
		if len(m.Tables) == 1 && m.Tables[0].Dir == "" && m.Tables[0].Format == Format {
			m.Parts = m.Tables[0].Parts // readable by readers of Format
		} else {
			m.Format = FormatTables
		}
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("model: manifest: %w", err)
	}
	if err := fsys.WriteFile(ctx, joinURI(dir, ManifestFile), append(out, '\n')); err != nil {
		return fmt.Errorf("model: write manifest: %w", err)
	}
	if err := fsys.WriteFile(ctx, joinURI(dir, SuccessFile), nil); err != nil {
		return fmt.Errorf("model: write %s: %w", SuccessFile, err)
	}
	return nil
}

// legacyParts lists the text parts of a model without a TablesFile.
func legacyParts(ctx context.Context, fsys FS, dir string, servers int) ([]ManifestPart, error) {
	var parts []ManifestPart
	if servers == 0 {
		for {
			n, err := fsys.Size(ctx, joinURI(dir, PartName(len(parts))))
			if err != nil {
				break
			}
			parts = append(parts, ManifestPart{Name: PartName(len(parts)), Bytes: n})
		}
		if len(parts) == 0 {
			return nil, fmt.Errorf("model: model in %s is incomplete: no %s", dir, PartName(0))
		}
		return parts, nil
	}
	var missing []error
	for r := 0; r < servers; r++ {
		p := joinURI(dir, PartName(r))
		n, err := fsys.Size(ctx, p)
		if err != nil {
			missing = append(missing, fmt.Errorf("%s: %w", p, err))
			continue
		}
		parts = append(parts, ManifestPart{Name: PartName(r), Bytes: n})
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("model: model in %s is incomplete: %w", dir, errors.Join(missing...))
	}
	return parts, nil
}

// LocalFS is FS on the local filesystem.
type LocalFS struct{}

// Size implements FS.
func (LocalFS) Size(ctx context.Context, path string) (int64, error) {
	return sizeOf(ctx, dfs.Local{}, path)
}

// ReadFile implements FS.
func (LocalFS) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	return readLimited(ctx, dfs.Local{}, path, limit)
}

// WriteFile implements FS.
func (LocalFS) WriteFile(ctx context.Context, path string, data []byte) error {
	return dfs.WriteFile(ctx, dfs.Local{}, path, data)
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
	return sizeOf(ctx, fsys, name)
}

// ReadFile implements FS.
func (r ResolverFS) ReadFile(ctx context.Context, uri string, limit int64) ([]byte, error) {
	fsys, name, err := r.R.Resolve(ctx, uri)
	if err != nil {
		return nil, err
	}
	return readLimited(ctx, fsys, name, limit)
}

// WriteFile implements FS.
func (r ResolverFS) WriteFile(ctx context.Context, uri string, data []byte) error {
	fsys, name, err := r.R.Resolve(ctx, uri)
	if err != nil {
		return err
	}
	return dfs.WriteFile(ctx, fsys, name, data)
}

func sizeOf(ctx context.Context, fsys dfs.FileSystem, name string) (int64, error) {
	fi, err := fsys.Stat(ctx, name)
	if err != nil {
		return 0, err
	}
	if fi.IsDir() {
		return 0, fmt.Errorf("%s is a directory: %w", fsys.URI(name), fs.ErrInvalid)
	}
	return fi.Size(), nil
}

// readLimited reads a file of at most limit bytes.
func readLimited(ctx context.Context, fsys dfs.FileSystem, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("model: %s is larger than %d bytes", fsys.URI(name), limit)
	}
	return data, nil
}

// joinURI appends a file name to a directory path or URI; an empty name
// leaves dir as it is.
func joinURI(dir, name string) string {
	if name == "" {
		return dir
	}
	if len(dir) > 0 && dir[len(dir)-1] == '/' {
		return dir + name
	}
	return dir + "/" + name
}

// ErrIncomplete is wrapped by the readers' errors for a directory without
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
	data, err := readLimited(ctx, fsys, base+"/"+ManifestFile, maxManifest)
	if err != nil {
		return Manifest{}, err
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("model: %s: %w", uri, err)
	}
	switch m.Format {
	case Format:
		for _, p := range m.Parts {
			if !validName(p.Name) {
				return Manifest{}, fmt.Errorf("model: %s: part %q outside the model directory", uri, p.Name)
			}
		}
		if len(m.Tables) > 0 {
			if err := checkTables(m.Tables); err != nil {
				return Manifest{}, fmt.Errorf("model: %s: %w", uri, err)
			}
		}
	case FormatTables:
		if err := checkTables(m.Tables); err != nil {
			return Manifest{}, fmt.Errorf("model: %s: %w", uri, err)
		}
	default:
		return Manifest{}, fmt.Errorf("model: %s: format %q, want %q or %q", uri, m.Format, Format, FormatTables)
	}
	return m, nil
}

// TableNames returns the names of the model's tables, in the order the
// job declared them; nil for a model written without a TablesFile.
func (m Manifest) TableNames() []string {
	var out []string
	for _, t := range m.Tables {
		out = append(out, t.Name)
	}
	return out
}

// table returns the table called name, or the only table when name is "".
func (m Manifest) table(name string) (ManifestTable, error) {
	if len(m.Tables) == 0 {
		// A model without a TablesFile: one table of text parts.
		if name != "" {
			return ManifestTable{}, fmt.Errorf("model: no table %s: the model has one unnamed table", name)
		}
		return ManifestTable{Width: 0, Elem: "float32", Format: Format, Parts: m.Parts}, nil
	}
	if name == "" {
		if len(m.Tables) > 1 {
			return ManifestTable{}, fmt.Errorf("model: the model has %d tables (%s): name one", len(m.Tables), strings.Join(m.TableNames(), ", "))
		}
		return m.Tables[0], nil
	}
	i := slices.IndexFunc(m.Tables, func(t ManifestTable) bool { return t.Name == name })
	if i < 0 {
		return ManifestTable{}, fmt.Errorf("model: no table %s (the model has %s)", name, strings.Join(m.TableNames(), ", "))
	}
	return m.Tables[i], nil
}
