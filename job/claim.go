package job

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/spindle-ps/spindle/io/dfs"
)

// A running job claims its output and its checkpoint directory: it keeps
// a file, claimFile, in each, which says whose it is and which the job
// renews every claimRenew while it runs. Another job refuses a directory
// whose claim was renewed within claimStale, whatever its Overwrite: two
// jobs writing into one directory would leave parts of each under one
// _SUCCESS, or clear each other's checkpoints. A claim older than that,
// or one made on this host by a process that is gone (a ps-submit killed
// by SIGKILL, whether its parent collected it yet or not), is void, and
// the next job takes it over. A later attempt of the job's
// ApplicationMaster takes over its own job's claims.
const (
	claimFile  = "_spindle_job"
	claimRenew = 15 * time.Second
	claimStale = time.Minute
)

// claim is the contents of a claimFile.
type claim struct {
	Job       string    `json:"job"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Container string    `json:"container,omitempty"` // on YARN, the ApplicationMaster's
	Since     time.Time `json:"since"`
	// partial is set by readClaim on a file that is not a whole claim:
	// one being written, or left by a process killed while it wrote it.
	partial bool
}

// heldClaim is a claim this job made: its directory, and the value that
// named it.
type heldClaim struct {
	fsys      dfs.FileSystem
	dir, name string
}

// maxClaim bounds how much of a claimFile is read.
const maxClaim = 4 << 10

// isClaim reports whether a directory entry is a claim or its renewal
// in progress (dfs.TempName): not the directory's contents.
func isClaim(name string) bool {
	return name == claimFile || name == path.Base(dfs.TempName(claimFile))
}

// checkClaim returns the error for dir (name on fsys, the value of
// field), when another job's live claim holds it; nil when it holds none,
// a void one, or, with takeOver, any.
func checkClaim(ctx context.Context, fsys dfs.FileSystem, name, dir, field string, takeOver bool) error {
	if takeOver {
		return nil
	}
	c, at, err := readClaim(ctx, fsys, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return dirError(field, dir, fmt.Errorf("read the claim of the job that writes it: %w", err))
	case !live(c, at, time.Now()):
		return nil
	}
	who := fmt.Sprintf("job %q of process %d on %s", c.Job, c.PID, c.Host)
	if c.Container != "" {
		who = fmt.Sprintf("job %q of container %s on %s", c.Job, c.Container, c.Host)
	}
	return dirError(field, dir, fmt.Errorf("%w: %s, since %s, claim made or renewed %s ago; wait for it to end or kill it (a claim not renewed for %v is void: %s)",
		ErrOutputInUse, who, c.Since.Format(time.RFC3339), time.Since(at).Round(time.Second), claimStale, fsys.URI(path.Join(name, claimFile))))
}

// ErrOutputInUse is wrapped by the error for an output or checkpoint
// directory another running job writes.
var ErrOutputInUse = errors.New("in use by another running job")

// readClaim reads the claim in directory name and when it was last
// renewed; an error wrapping fs.ErrNotExist when there is none. A
// renewal caught between its two renames counts as the claim.
func readClaim(ctx context.Context, fsys dfs.FileSystem, name string) (claim, time.Time, error) {
	var c claim
	p := path.Join(name, claimFile)
	fi, err := fsys.Stat(ctx, p)
	if errors.Is(err, fs.ErrNotExist) {
		p = dfs.TempName(p)
		fi, err = fsys.Stat(ctx, p)
	}
	if err != nil {
		return c, time.Time{}, err
	}
	f, err := fsys.Open(ctx, p)
	if err != nil {
		return c, time.Time{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxClaim))
	if err != nil {
		return c, time.Time{}, err
	}
	if err := json.Unmarshal(data, &c); err != nil {
		// Half written, or not ours: it claims as long as it is fresh.
		c = claim{Job: "unknown", Host: "unknown host", partial: true}
	}
	return c, fi.ModTime(), nil
}

// live reports whether claim c, renewed at at, still holds at now: renewed
// within claimStale, and not made on this host by a process that is gone.
func live(c claim, at, now time.Time) bool {
	if now.Sub(at) > claimStale {
		return false
	}
	if h, err := os.Hostname(); err == nil && h == c.Host && c.Container == "" && c.PID > 0 {
		if err := syscall.Kill(c.PID, 0); errors.Is(err, syscall.ESRCH) || zombie(c.PID) {
			return false
		}
	}
	return true
}

// zombie reports whether process pid has ended and waits for its parent
// to collect its status (a ps-submit killed from a script that has not
// waited for it yet): it is gone, though signals still find it. False
// where /proc does not say.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) state ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'Z' || b[i+2] == 'X'
}

// takeClaim claims directory name (the value dir of field) for this
// job. A claim already there that is void, or on a later attempt of the
// ApplicationMaster this job's own, is replaced; a live one is refused.
func (f *files) takeClaim(ctx context.Context, fsys dfs.FileSystem, name, dir, field string) error {
	data, err := f.claimData()
	if err != nil {
		return err
	}
	err = createClaim(ctx, fsys, name, data)
	if errors.Is(err, fs.ErrExist) {
		if err := checkClaim(ctx, fsys, name, dir, field, f.rerun); err != nil {
			return err
		}
		if err := removeClaim(ctx, fsys, name); err != nil {
			return dirError(field, dir, fmt.Errorf("remove a void claim: %w", err))
		}
		if err = createClaim(ctx, fsys, name, data); errors.Is(err, fs.ErrExist) {
			return dirError(field, dir, fmt.Errorf("%w: another job claimed it as this one did", ErrOutputInUse))
		}
	}
	if err != nil {
		return dirError(field, dir, fmt.Errorf("claim it: %w", err))
	}
	f.claims = append(f.claims, heldClaim{fsys: fsys, dir: name, name: dir})
	return nil
}

// createClaim writes data as the claim in directory name, unless one is
// there (an error wrapping fs.ErrExist). A claim it could not write
// whole is removed: half a claim would hold for claimStale.
func createClaim(ctx context.Context, fsys dfs.FileSystem, name string, data []byte) error {
	w, err := fsys.Create(ctx, path.Join(name, claimFile), dfs.CreateOptions{})
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = removeClaim(ctx, fsys, name)
	}
	return err
}

// claimData is this job's claim.
func (f *files) claimData() ([]byte, error) {
	if f.since.IsZero() {
		f.since = time.Now()
	}
	host, _ := os.Hostname()
	return json.Marshal(claim{Job: f.spec.Name, Host: host, PID: os.Getpid(), Container: os.Getenv("CONTAINER_ID"), Since: f.since})
}

// renewClaims renews this job's claims, at most every claimRenew. A
// failure is logged: the claim then lapses, which only lets another job
// in.
func (f *files) renewClaims(ctx context.Context) {
	if len(f.claims) == 0 || time.Since(f.renewed) < claimRenew {
		return
	}
	f.renewed = time.Now()
	data, err := f.claimData()
	if err != nil {
		return
	}
	for _, c := range f.claims {
		if err := dfs.WriteFile(ctx, c.fsys, path.Join(c.dir, claimFile), data); err != nil {
			f.log.WithError(err).Warnf("could not renew the claim on %s", c.name)
		}
	}
}

// releaseClaims removes this job's claims. It is best effort: a claim
// left behind lapses.
func (f *files) releaseClaims(ctx context.Context) {
	for _, c := range f.claims {
		if err := removeClaim(ctx, c.fsys, c.dir); err != nil {
			f.log.WithError(err).Warnf("could not remove the claim on %s", c.name)
		}
	}
	f.claims = nil
}

// removeClaim removes the claim in directory name, and a renewal's
// temporary file that a process killed during it left.
func removeClaim(ctx context.Context, fsys dfs.FileSystem, name string) error {
	p := path.Join(name, claimFile)
	for _, q := range []string{p, dfs.TempName(p)} {
		if err := fsys.Remove(ctx, q); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// DropClaim removes the claim in directory name on fsys when the
// ApplicationMaster of YARN application app ("application_…") made it:
// what an application killed before it could release its claims left,
// which whoever removes its staging directory cleans up with the empty
// directories it made (name is one). Another job's claim stays. A claim
// that is not whole goes too: the ApplicationMaster claims a directory it
// made at once, so that is what it leaves when killed while it wrote the
// claim.
func DropClaim(ctx context.Context, fsys dfs.FileSystem, name, app string) error {
	c, _, err := readClaim(ctx, fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	id, ok := strings.CutPrefix(app, "application_")
	if !ok {
		return nil
	}
	if !strings.Contains(c.Container+"_", "_"+id+"_") && !c.partial {
		return nil
	}
	return removeClaim(ctx, fsys, name)
}
