package libs

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// The ld.so cache formats, from glibc's sysdeps/generic/dl-cache.h.
const (
	cacheMagicOld = "ld.so-1.7.0"
	cacheMagicNew = "glibc-ld.so.cache1.1"

	oldHeaderSize = 16 // magic[11], padding, uint32 nlibs
	oldEntrySize  = 12 // int32 flags, uint32 key, uint32 value
	newHeaderSize = 48 // magic[17], version[3], nlibs, len_strings, flags, pad[3], extension_offset, unused[3]
	newEntrySize  = 24 // int32 flags, uint32 key, uint32 value, uint32 osversion, uint64 hwcap

	// cacheEndianLittle and cacheEndianBig are the values of the new
	// header's flags byte; 0 means "unset" (native order).
	cacheEndianLittle = 2
	cacheEndianBig    = 3

	// maxCacheSize bounds how much of a cache file is read.
	maxCacheSize = 64 << 20
)

// errCacheFormat is returned for a cache file that cannot be parsed.
var errCacheFormat = errors.New("malformed ld.so cache")

// cacheEntry is one entry of the ld.so cache: the soname Name is provided
// by the file Path.
type cacheEntry struct {
	Name  string
	Path  string
	Flags int32  // FLAG_ELF_LIBC6 etc. and the required ABI (FLAG_X8664_LIB64…)
	HWCap uint64 // 0 for the baseline library
}

// parseCache parses an ld.so cache in the new format, either alone or after
// an old-format table. The number of entries is checked against the size of
// data before anything is allocated.
func parseCache(data []byte) ([]cacheEntry, error) {
	start := 0
	if !bytes.HasPrefix(data, []byte(cacheMagicNew)) {
		if !bytes.HasPrefix(data, []byte(cacheMagicOld)) || len(data) < oldHeaderSize {
			return nil, fmt.Errorf("%w: no %q header", errCacheFormat, cacheMagicNew)
		}
		nold := uint64(binary.NativeEndian.Uint32(data[12:16]))
		// The new table follows the old one, aligned to 8 bytes.
		off := (oldHeaderSize - 4 + nold*oldEntrySize + 7) &^ 7
		if off > uint64(len(data)) || !bytes.HasPrefix(data[off:], []byte(cacheMagicNew)) {
			return nil, fmt.Errorf("%w: old format without a new table", errCacheFormat)
		}
		start = int(off)
	}
	// Offsets in the new format are relative to its header.
	c := data[start:]
	if len(c) < newHeaderSize {
		return nil, fmt.Errorf("%w: short header", errCacheFormat)
	}
	var bo binary.ByteOrder = binary.NativeEndian
	switch c[28] {
	case cacheEndianLittle:
		bo = binary.LittleEndian
	case cacheEndianBig:
		bo = binary.BigEndian
	}
	n := uint64(bo.Uint32(c[20:24]))
	if n > uint64(len(c)-newHeaderSize)/newEntrySize {
		return nil, fmt.Errorf("%w: %d entries do not fit in %d bytes", errCacheFormat, n, len(c))
	}
	entries := make([]cacheEntry, 0, n)
	for i := range n {
		e := c[newHeaderSize+i*newEntrySize:]
		name, err := cacheString(c, bo.Uint32(e[4:8]))
		if err != nil {
			return nil, fmt.Errorf("entry %d key: %w", i, err)
		}
		p, err := cacheString(c, bo.Uint32(e[8:12]))
		if err != nil {
			return nil, fmt.Errorf("entry %d value: %w", i, err)
		}
		entries = append(entries, cacheEntry{
			Name:  name,
			Path:  p,
			Flags: int32(bo.Uint32(e[0:4])),
			HWCap: bo.Uint64(e[16:24]),
		})
	}
	return entries, nil
}

// cacheString returns the NUL-terminated string at off in c.
func cacheString(c []byte, off uint32) (string, error) {
	if uint64(off) >= uint64(len(c)) {
		return "", fmt.Errorf("%w: string offset %d beyond %d bytes", errCacheFormat, off, len(c))
	}
	s := c[off:]
	end := bytes.IndexByte(s, 0)
	if end < 0 {
		return "", fmt.Errorf("%w: unterminated string at %d", errCacheFormat, off)
	}
	return string(s[:end]), nil
}

// readCache reads and parses the cache file name.
func readCache(name string) ([]cacheEntry, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("libs: read ld.so cache: %w", err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxCacheSize+1)); err != nil {
		return nil, fmt.Errorf("libs: read ld.so cache %s: %w", name, err)
	}
	if buf.Len() > maxCacheSize {
		return nil, fmt.Errorf("libs: ld.so cache %s: %w: larger than %d bytes", name, errCacheFormat, maxCacheSize)
	}
	entries, err := parseCache(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("libs: ld.so cache %s: %w", name, err)
	}
	return entries, nil
}

// maxConfDepth bounds the nesting of include directives in ld.so.conf.
const maxConfDepth = 8

// readConf returns the directories listed in the ld.so.conf file name and,
// recursively, in the files its include directives name (glob patterns,
// relative to the including file's directory).
func readConf(name string) ([]string, error) {
	var dirs []string
	seen := map[string]bool{}
	if err := readConfFile(name, 0, seen, &dirs); err != nil {
		return nil, err
	}
	return dirs, nil
}

func readConfFile(name string, depth int, seen map[string]bool, dirs *[]string) error {
	if depth > maxConfDepth || seen[name] {
		return nil
	}
	seen[name] = true
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("libs: read ld.so.conf: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "include":
			for _, pat := range fields[1:] {
				if !filepath.IsAbs(pat) {
					pat = filepath.Join(filepath.Dir(name), pat)
				}
				matches, _ := filepath.Glob(pat) // the only error is a bad pattern
				for _, m := range matches {
					// An unreadable included file is skipped, as by ldconfig.
					_ = readConfFile(m, depth+1, seen, dirs)
				}
			}
		case "hwcap":
			// Obsolete and ignored by current ldconfig.
		default:
			// Old ld.so.conf syntax allows several directories on a line,
			// separated by blanks, commas or colons, and a "=TYPE" suffix.
			for _, d := range strings.FieldsFunc(line, func(r rune) bool {
				return r == ',' || r == ':' || r == ' ' || r == '\t'
			}) {
				if i := strings.IndexByte(d, '='); i >= 0 {
					d = d[:i]
				}
				if d != "" {
					*dirs = append(*dirs, filepath.Clean(d))
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("libs: read ld.so.conf %s: %w", name, err)
	}
	return nil
}
