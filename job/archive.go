package job

import (
	"fmt"
	"path/filepath"
	"strings"
)

// archiveExts are the kinds of archive a job may ship (JobSpec.Archives),
// which YARN's NodeManagers and the local launcher both unpack.
var archiveExts = []string{".tar.gz", ".tgz", ".zip"}

// ArchiveName parses an entry of JobSpec.Archives, "PATH" or
// "PATH#NAME": the archive's local path, and the name of the directory
// it is unpacked into in the task's working directory — NAME, or the
// archive's base name without its extension (data.tar.gz → data).
func ArchiveName(entry string) (local, name string, err error) {
	local, name, hasName := strings.Cut(entry, "#")
	base := filepath.Base(local)
	ext := ""
	for _, e := range archiveExts {
		if strings.HasSuffix(strings.ToLower(base), e) {
			ext = e
		}
	}
	switch {
	case local == "":
		return "", "", fmt.Errorf("job: Archives %q: no path", entry)
	case ext == "":
		return "", "", fmt.Errorf("job: Archives %q: not a .tar.gz, .tgz or .zip file", entry)
	case !hasName:
		name = base[:len(base)-len(ext)]
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return "", "", fmt.Errorf("job: Archives %q: %q cannot name a directory in the working directory", entry, name)
	}
	return local, name, nil
}
