package yarnclient

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/yarn/libs"
)

// stageItem is one local file Submit stages: its link name in the
// containers' working directory (and its name in the staging directory).
type stageItem struct {
	Local string
	Name  string
	// Archive is unpacked by the NodeManager (LocalResourceType ARCHIVE)
	// into a directory of that name; it is staged under archives/ with
	// its own base name, whose extension tells the NodeManager how to
	// unpack it.
	Archive bool
	// AMOnly files go to the ApplicationMaster only (ps-submit itself,
	// job.json); the rest go to every task too.
	AMOnly bool
}

// staged is its path in the staging directory.
func (it stageItem) staged() string {
	if it.Archive {
		return "archives/" + it.Name + "/" + filepath.Base(it.Local)
	}
	return it.Name
}

// stagePlan lists what Submit stages for spec besides job.json — this
// ps-submit binary (self), the command's executable when it is a local
// file outside the system directories, every spec.Files entry by base
// name, every spec.Archives entry by its directory name
// (job.ArchiveName), the non-system shared libraries of both binaries
// under lib/ — and the command as the tasks run it.
func stagePlan(spec job.JobSpec, self string, lookup conf.Lookup) ([]stageItem, []string, error) {
	cmd := append([]string(nil), spec.Command...)
	items := []stageItem{{Local: self, Name: amBinaryName, AMOnly: true}}
	taken := map[string]string{amBinaryName: self, amJobFile: "", amLibDir: "", conf.JobKeysFile: "", amKeytab: "", tokensFile: "", madeFile: "", claimsFile: ""}
	add := func(flag, local, name string, archive bool) error {
		if prev, dup := taken[name]; dup {
			if prev == "" || name == amBinaryName {
				return fmt.Errorf("yarnclient: %s %s: the name %q is reserved in the containers' working directory", flag, local, name)
			}
			return fmt.Errorf("yarnclient: %s %s: a file named %q is already shipped (%s)", flag, local, name, prev)
		}
		taken[name] = local
		items = append(items, stageItem{Local: local, Name: name, Archive: archive})
		return nil
	}
	binaries := []string{self}
	// A name without a slash is looked up in the nodes' PATH.
	if exe := spec.Command[0]; strings.Contains(exe, "/") && isRegularFile(exe) && !isSystemPath(exe) {
		name := filepath.Base(exe)
		if name == amBinaryName || name == amJobFile || name == amLibDir {
			return nil, nil, fmt.Errorf("yarnclient: the command's executable may not be named %q", name)
		}
		if err := add("command", exe, name, false); err != nil {
			return nil, nil, err
		}
		cmd[0] = "./" + name
		binaries = append(binaries, exe)
	}
	for _, f := range spec.Files {
		if err := add("--files", f, filepath.Base(f), false); err != nil {
			return nil, nil, err
		}
	}
	for _, a := range spec.Archives {
		local, name, err := job.ArchiveName(a)
		if err != nil {
			return nil, nil, err
		}
		if err := add("--archives", local, name, true); err != nil {
			return nil, nil, err
		}
	}
	ldPath, _ := lookup("LD_LIBRARY_PATH")
	var all []libs.Lib
	for _, b := range binaries {
		ls, err := libs.Resolve(b, libs.Options{LDLibraryPath: ldPath})
		if errors.Is(err, libs.ErrNotELF) {
			continue // a script: nothing to ship
		}
		if err != nil {
			return nil, nil, fmt.Errorf("yarnclient: shared libraries of %s: %w", b, err)
		}
		all = append(all, ls...)
	}
	for _, l := range libs.Ship(all) {
		items = append(items, stageItem{Local: l.Path, Name: amLibDir + "/" + l.Name})
	}
	return items, cmd, nil
}
