package libs

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

var (
	// ErrNotELF is returned (wrapped) for a file that is not an ELF file,
	// such as a shell or Python script given as the user's command; such a
	// file needs no libraries shipped.
	ErrNotELF = errors.New("libs: not an ELF file")
	// ErrNotFound is returned (wrapped, with the library and the object
	// needing it named) when a non-system library cannot be resolved.
	ErrNotFound = errors.New("libs: library not found")
)

// Lib is one shared library a program needs.
type Lib struct {
	// Name is the soname as needed (the DT_NEEDED string). A shipped
	// library is localized under this name.
	Name string
	// Path is the file Name resolved to on this machine, as found by the
	// search (it may be a symlink). It is empty for a system library that
	// could not be found.
	Path string
	// System reports that the library is present on every node and is
	// not shipped.
	System bool
	// NeededBy is the path of the first object found to need Name.
	NeededBy string
}

// Options configure Resolve. The zero value resolves as the loader would on
// this machine with LD_LIBRARY_PATH unset.
type Options struct {
	// LDLibraryPath is the LD_LIBRARY_PATH the program runs with on this
	// machine (colon- or semicolon-separated). Resolve never reads the
	// environment itself.
	LDLibraryPath string
	// SystemLibstdcxx treats libstdc++.so.6 as a system library, not
	// shipped. By default it is shipped.
	SystemLibstdcxx bool
	// ExtraSystem adds path.Match patterns of sonames that are treated as
	// system libraries, in addition to the fixed set (see IsSystem).
	ExtraSystem []string
	// CacheFile is the ld.so cache; "" means /etc/ld.so.cache. If it
	// cannot be read or parsed, the directories of ConfFile are searched
	// instead.
	CacheFile string
	// ConfFile is the ld.so.conf used when the cache is unusable; ""
	// means /etc/ld.so.conf.
	ConfFile string
	// DefaultDirs replaces the loader's default directories, which are
	// otherwise derived from the executable's machine.
	DefaultDirs []string
}

// Needed returns the DT_NEEDED entries of the ELF file path, in order. A
// statically linked binary yields an empty list.
func Needed(path string) ([]string, error) {
	o, err := openObject(path)
	if err != nil {
		return nil, err
	}
	return o.needed, nil
}

// Resolve returns the libraries the ELF file path needs, transitively, in
// the breadth-first order the dynamic loader loads them, each soname once,
// resolved to files on this machine as the package documentation describes.
// System libraries are included with System set but their own dependencies
// are not followed. A non-system library that cannot be found is an error
// wrapping ErrNotFound; a file that is not ELF is an error wrapping
// ErrNotELF. Resolve may be called concurrently; it reads the ld.so cache
// afresh on each call.
func Resolve(path string, opts Options) ([]Lib, error) {
	exe, err := openObject(path)
	if err != nil {
		return nil, err
	}
	// The loader computes the executable's $ORIGIN from /proc/self/exe,
	// which has symlinks resolved.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		exe.setOrigin(real)
	}
	r := &resolver{
		opts: opts,
		exe:  exe,
		seen: map[string]bool{},
	}
	var libs []Lib
	queue := []*object{exe}
	for len(queue) > 0 {
		o := queue[0]
		queue = queue[1:]
		for _, name := range o.needed {
			if r.seen[name] {
				continue
			}
			r.seen[name] = true
			lib := Lib{Name: name, NeededBy: o.path}
			if opts.isSystem(name, exe.interp) {
				lib.System = true
				if p, _, err := r.find(name, o); err == nil {
					lib.Path = p
				}
				libs = append(libs, lib)
				continue
			}
			p, dep, err := r.find(name, o)
			if err != nil {
				return nil, err
			}
			lib.Path = p
			libs = append(libs, lib)
			queue = append(queue, dep)
		}
	}
	return libs, nil
}

// Ship returns the libraries of libs that must be shipped: those not marked
// System. Duplicates by Name are dropped, the first kept, so the lists
// Resolve returns for several binaries can be concatenated.
func Ship(libs []Lib) []Lib {
	var out []Lib
	seen := map[string]bool{}
	for _, l := range libs {
		if l.System || seen[l.Name] {
			continue
		}
		seen[l.Name] = true
		out = append(out, l)
	}
	return out
}

// object is the part of an ELF file that library resolution needs.
type object struct {
	path    string
	origin  string // directory for $ORIGIN
	class   elf.Class
	data    elf.Data
	machine elf.Machine
	needed  []string
	rpath   []string // raw DT_RPATH entries, tokens unexpanded
	runpath []string // raw DT_RUNPATH entries, tokens unexpanded
	hasRun  bool     // DT_RUNPATH present (it disables DT_RPATH)
	interp  string   // base name of PT_INTERP, or ""
	parent  *object  // the object whose DT_NEEDED loaded this one
}

func (o *object) setOrigin(p string) {
	abs, err := filepath.Abs(p)
	if err != nil {
		abs = p
	}
	o.origin = filepath.Dir(abs)
}

// openObject reads the dynamic section of the ELF file path.
func openObject(path string) (*object, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("libs: %w", err)
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil || string(magic[:]) != elf.ELFMAG {
		return nil, fmt.Errorf("%w: %s", ErrNotELF, path)
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, fmt.Errorf("libs: read ELF file %s: %w", path, err)
	}
	defer ef.Close()
	o := &object{
		path:    path,
		class:   ef.Class,
		data:    ef.Data,
		machine: ef.Machine,
	}
	o.setOrigin(path)
	if o.needed, err = ef.DynString(elf.DT_NEEDED); err != nil {
		return nil, fmt.Errorf("libs: read DT_NEEDED of %s: %w", path, err)
	}
	if o.needed == nil {
		o.needed = []string{}
	}
	rpath, err := ef.DynString(elf.DT_RPATH)
	if err != nil {
		return nil, fmt.Errorf("libs: read DT_RPATH of %s: %w", path, err)
	}
	runpath, err := ef.DynString(elf.DT_RUNPATH)
	if err != nil {
		return nil, fmt.Errorf("libs: read DT_RUNPATH of %s: %w", path, err)
	}
	o.rpath = splitPath(rpath)
	o.runpath = splitPath(runpath)
	o.hasRun = len(runpath) > 0
	for _, p := range ef.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(p.Open(), 4096))
		if err != nil {
			return nil, fmt.Errorf("libs: read PT_INTERP of %s: %w", path, err)
		}
		o.interp = filepath.Base(strings.TrimRight(string(b), "\x00"))
	}
	return o, nil
}

// splitPath splits DT_RPATH/DT_RUNPATH strings into their elements. Empty
// elements within a list are kept: the loader treats them as the current
// directory.
func splitPath(vals []string) []string {
	var out []string
	for _, v := range vals {
		if v == "" {
			continue
		}
		out = append(out, strings.Split(v, ":")...)
	}
	return out
}

// compatible reports whether an object of class, data and machine can be
// loaded into o.
func (o *object) compatible(class elf.Class, data elf.Data, machine elf.Machine) bool {
	return o.class == class && o.data == data && o.machine == machine
}

// resolver holds the state of one Resolve call. It is not safe for
// concurrent use.
type resolver struct {
	opts Options
	exe  *object
	seen map[string]bool

	cacheDone bool
	cache     []cacheEntry // nil if unusable
	confDirs  []string     // ld.so.conf directories when the cache is unusable
}

// find resolves the soname name needed by o and loads the file found.
func (r *resolver) find(name string, o *object) (string, *object, error) {
	if strings.Contains(name, "/") {
		if dep, ok := r.try(name, o); ok {
			return name, dep, nil
		}
		return "", nil, fmt.Errorf("%w: %s needed by %s", ErrNotFound, name, o.path)
	}
	for _, dir := range r.searchDirs(o) {
		p := filepath.Join(dir, name) // dir "" is the current directory
		if dep, ok := r.try(p, o); ok {
			return p, dep, nil
		}
	}
	for _, p := range r.cacheLookup(name) {
		if dep, ok := r.try(p, o); ok {
			return p, dep, nil
		}
	}
	for _, dir := range r.defaultDirs() {
		p := filepath.Join(dir, name)
		if dep, ok := r.try(p, o); ok {
			return p, dep, nil
		}
	}
	return "", nil, fmt.Errorf("%w: %s needed by %s", ErrNotFound, name, o.path)
}

// try opens the candidate p for o and reports whether the loader would
// accept it: a regular ELF file of o's class, byte order and machine.
func (r *resolver) try(p string, o *object) (*object, bool) {
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, false
	}
	dep, err := openObject(p)
	if err != nil || !o.compatible(dep.class, dep.data, dep.machine) {
		return nil, false
	}
	dep.parent = o
	return dep, true
}

// searchDirs returns the directories searched for a library o needs before
// the cache: DT_RPATH, LD_LIBRARY_PATH, DT_RUNPATH, with tokens expanded.
func (r *resolver) searchDirs(o *object) []string {
	var dirs []string
	if !o.hasRun {
		for l := o; l != nil; l = l.parent {
			if !l.hasRun {
				dirs = appendExpanded(dirs, l.rpath, l.origin)
			}
		}
	}
	if r.opts.LDLibraryPath != "" {
		elems := strings.Split(strings.ReplaceAll(r.opts.LDLibraryPath, ";", ":"), ":")
		dirs = appendExpanded(dirs, elems, r.exe.origin)
	}
	dirs = appendExpanded(dirs, o.runpath, o.origin)
	return dirs
}

func appendExpanded(dirs, elems []string, origin string) []string {
	for _, e := range elems {
		if d, ok := expandTokens(e, origin); ok {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// expandTokens expands $ORIGIN and ${ORIGIN} in a search path element to
// origin. It reports false for an element using another loader token
// ($LIB, $PLATFORM or an unknown one), which is then not searched.
func expandTokens(s, origin string) (string, bool) {
	if !strings.Contains(s, "$") {
		return s, true
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			return b.String(), true
		}
		b.WriteString(s[:i])
		s = s[i+1:]
		var tok string
		if strings.HasPrefix(s, "{") {
			end := strings.IndexByte(s, '}')
			if end < 0 {
				return "", false
			}
			tok, s = s[1:end], s[end+1:]
		} else {
			n := 0
			for n < len(s) && isIdent(s[n]) {
				n++
			}
			tok, s = s[:n], s[n:]
		}
		if tok != "ORIGIN" {
			return "", false
		}
		b.WriteString(origin)
	}
}

func isIdent(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// cacheLookup returns the files the ld.so cache (or, failing it, the
// ld.so.conf directories) offers for name, baseline entries first.
func (r *resolver) cacheLookup(name string) []string {
	if !r.cacheDone {
		r.cacheDone = true
		cf := r.opts.CacheFile
		if cf == "" {
			cf = "/etc/ld.so.cache"
		}
		if entries, err := readCache(cf); err == nil {
			r.cache = entries
		} else {
			conf := r.opts.ConfFile
			if conf == "" {
				conf = "/etc/ld.so.conf"
			}
			r.confDirs, _ = readConf(conf) // no conf: only the default dirs remain
		}
	}
	var base, hw []string
	for _, e := range r.cache {
		if e.Name != name {
			continue
		}
		if e.HWCap == 0 {
			base = append(base, e.Path)
		} else {
			hw = append(hw, e.Path)
		}
	}
	out := append(base, hw...)
	for _, d := range r.confDirs {
		out = append(out, filepath.Join(d, name))
	}
	return out
}

// defaultDirs returns the loader's trusted directories for the executable.
func (r *resolver) defaultDirs() []string {
	if r.opts.DefaultDirs != nil {
		return r.opts.DefaultDirs
	}
	var dirs []string
	for _, t := range multiarch(r.exe.class, r.exe.data, r.exe.machine) {
		dirs = append(dirs, "/lib/"+t, "/usr/lib/"+t)
	}
	if r.exe.class == elf.ELFCLASS64 {
		dirs = append(dirs, "/lib64", "/usr/lib64")
	}
	dirs = append(dirs, "/lib", "/usr/lib")
	return slices.Compact(dirs)
}

// multiarch returns the Debian multiarch tuples for a machine.
func multiarch(class elf.Class, data elf.Data, m elf.Machine) []string {
	is64 := class == elf.ELFCLASS64
	switch m {
	case elf.EM_X86_64:
		if is64 {
			return []string{"x86_64-linux-gnu"}
		}
		return []string{"x86_64-linux-gnux32"}
	case elf.EM_386:
		return []string{"i386-linux-gnu"}
	case elf.EM_AARCH64:
		return []string{"aarch64-linux-gnu"}
	case elf.EM_ARM:
		return []string{"arm-linux-gnueabihf", "arm-linux-gnueabi"}
	case elf.EM_PPC64:
		if data == elf.ELFDATA2LSB {
			return []string{"powerpc64le-linux-gnu"}
		}
		return []string{"powerpc64-linux-gnu"}
	case elf.EM_PPC:
		return []string{"powerpc-linux-gnu"}
	case elf.EM_S390:
		if is64 {
			return []string{"s390x-linux-gnu"}
		}
		return []string{"s390-linux-gnu"}
	case elf.EM_RISCV:
		if is64 {
			return []string{"riscv64-linux-gnu"}
		}
		return []string{"riscv32-linux-gnu"}
	case elf.EM_LOONGARCH:
		return []string{"loongarch64-linux-gnu"}
	case elf.EM_MIPS:
		switch {
		case is64 && data == elf.ELFDATA2LSB:
			return []string{"mips64el-linux-gnuabi64"}
		case is64:
			return []string{"mips64-linux-gnuabi64"}
		case data == elf.ELFDATA2LSB:
			return []string{"mipsel-linux-gnu"}
		default:
			return []string{"mips-linux-gnu"}
		}
	}
	return nil
}
