package libs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// byteOrder is what the binary package's byte orders implement.
type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

// buildCache encodes entries as an ld.so cache in the new format with byte
// order bo, preceded by an (empty-stringed) old-format table if withOld.
func buildCache(entries []cacheEntry, bo byteOrder, withOld bool) []byte {
	var strs []byte
	base := newHeaderSize + len(entries)*newEntrySize
	var table []byte
	for _, e := range entries {
		key := base + len(strs)
		strs = append(append(strs, e.Name...), 0)
		val := base + len(strs)
		strs = append(append(strs, e.Path...), 0)
		table = bo.AppendUint32(table, uint32(e.Flags))
		table = bo.AppendUint32(table, uint32(key))
		table = bo.AppendUint32(table, uint32(val))
		table = bo.AppendUint32(table, 0)
		table = bo.AppendUint64(table, e.HWCap)
	}
	var b []byte
	if withOld {
		b = append(b, cacheMagicOld...)
		b = append(b, 0)
		b = binary.NativeEndian.AppendUint32(b, uint32(len(entries)))
		b = append(b, make([]byte, len(entries)*oldEntrySize)...)
		for len(b)%8 != 0 {
			b = append(b, 0)
		}
	}
	b = append(b, cacheMagicNew...)
	b = bo.AppendUint32(b, uint32(len(entries)))
	b = bo.AppendUint32(b, uint32(len(strs)))
	flag := byte(cacheEndianLittle)
	if bo.String() == binary.BigEndian.String() {
		flag = cacheEndianBig
	}
	b = append(b, flag, 0, 0, 0)
	b = append(b, make([]byte, 16)...) // extension offset, unused
	b = append(b, table...)
	return append(b, strs...)
}

var testEntries = []cacheEntry{
	{Name: "libzmq.so.5", Path: "/usr/lib/x86_64-linux-gnu/libzmq.so.5", Flags: 0x303},
	{Name: "libc.so.6", Path: "/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v3/libc.so.6", Flags: 0x303, HWCap: 1<<62 | 2},
	{Name: "libc.so.6", Path: "/lib/x86_64-linux-gnu/libc.so.6", Flags: 0x303},
	{Name: "libc.so.6", Path: "/lib/i386-linux-gnu/libc.so.6", Flags: 0x3},
}

func TestParseCache(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		bo      byteOrder
		withOld bool
	}{
		{name: "new-little", bo: binary.LittleEndian},
		{name: "new-big", bo: binary.BigEndian},
		{name: "old-and-new", bo: binary.NativeEndian, withOld: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseCache(buildCache(testEntries, tt.bo, tt.withOld))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, testEntries) {
				t.Errorf("parseCache = %+v, want %+v", got, testEntries)
			}
		})
	}
}

func TestParseCacheErrors(t *testing.T) {
	t.Parallel()
	good := buildCache(testEntries, binary.LittleEndian, false)
	tests := []struct {
		name string
		data []byte
	}{
		{name: "empty", data: nil},
		{name: "wrong-magic", data: append([]byte("glibc-ld.so.cache1.0"), good[20:]...)},
		{name: "short-header", data: good[:40]},
		{name: "truncated-table", data: good[:newHeaderSize+newEntrySize+3]},
		{name: "huge-count", data: slices.Concat(good[:20], []byte{0xff, 0xff, 0xff, 0xff}, good[24:])},
		{name: "truncated-strings", data: good[:len(good)-1]},
		{name: "bad-offset", data: slices.Concat(good[:newHeaderSize+4], []byte{0xff, 0xff, 0, 0}, good[newHeaderSize+8:])},
		{name: "old-only", data: []byte(cacheMagicOld + "\x00\x00\x00\x00\x00")},
		{name: "old-huge-count", data: []byte(cacheMagicOld + "\x00\xff\xff\xff\xff")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got, err := parseCache(tt.data); !errors.Is(err, errCacheFormat) {
				t.Errorf("parseCache = %+v, %v; want errCacheFormat", got, err)
			}
		})
	}
}

// TestReadRealCache parses this machine's /etc/ld.so.cache.
func TestReadRealCache(t *testing.T) {
	t.Parallel()
	const real = "/etc/ld.so.cache"
	if _, err := os.Stat(real); err != nil {
		t.Skipf("no ld.so cache: %v", err)
	}
	entries, err := readCache(real)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name == "" || !filepath.IsAbs(e.Path) {
			t.Errorf("odd entry %+v", e)
		}
	}
	ldconfig, err := exec.LookPath("ldconfig")
	if err != nil {
		ldconfig = "/sbin/ldconfig"
	}
	if _, err := os.Stat(ldconfig); err == nil {
		if out, err := exec.Command(ldconfig, "-p").Output(); err == nil {
			first, _, _ := strings.Cut(string(out), " ")
			if n, err := strconv.Atoi(first); err == nil && n != len(entries) {
				t.Errorf("parsed %d entries, ldconfig -p reports %d", len(entries), n)
			}
		}
	}
	if _, err := os.Stat(zmqSO); err != nil {
		t.Skipf("libzmq not installed: %v", err)
	}
	var paths []string
	for _, e := range entries {
		if e.Name == "libzmq.so.5" {
			paths = append(paths, e.Path)
		}
	}
	if len(paths) == 0 {
		t.Fatalf("libzmq.so.5 not in %s", real)
	}
	if !sameFile(t, paths[0], zmqSO) {
		t.Errorf("cache maps libzmq.so.5 to %q, want %s", paths, zmqSO)
	}
}

func TestReadConf(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := filepath.Join(dir, "ld.so.conf")
	writeFile(t, conf, "/opt/a # trailing comment\n\n# comment\ninclude conf.d/*.conf\ninclude "+dir+"/abs.conf\nhwcap 0 nosegneg\n")
	writeFile(t, filepath.Join(dir, "conf.d", "1.conf"), "/opt/b:/opt/c,/opt/d\n/opt/e=libc6\ninclude ../ld.so.conf\n")
	writeFile(t, filepath.Join(dir, "conf.d", "2.conf"), "  /opt/f/  \n")
	writeFile(t, filepath.Join(dir, "conf.d", "ignored.txt"), "/opt/x\n")
	writeFile(t, filepath.Join(dir, "abs.conf"), "/opt/g\n")
	got, err := readConf(conf)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/a", "/opt/b", "/opt/c", "/opt/d", "/opt/e", "/opt/f", "/opt/g"}
	if !slices.Equal(got, want) {
		t.Errorf("readConf = %q, want %q", got, want)
	}
	if _, err := readConf(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("readConf(missing) = %v, want fs.ErrNotExist", err)
	}
}

// TestCacheLookupOrder checks that baseline entries are tried before hwcap
// subdirectory ones, and that the ld.so.conf directories are used only
// without a cache.
func TestCacheLookupOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cache := filepath.Join(dir, "ld.so.cache")
	if err := os.WriteFile(cache, buildCache(testEntries, binary.LittleEndian, false), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "ld.so.conf"), "/opt/conf\n")
	r := &resolver{opts: Options{CacheFile: cache, ConfFile: filepath.Join(dir, "ld.so.conf")}}
	got := r.cacheLookup("libc.so.6")
	want := []string{testEntries[2].Path, testEntries[3].Path, testEntries[1].Path}
	if !slices.Equal(got, want) {
		t.Errorf("cacheLookup = %q, want %q", got, want)
	}
	r = &resolver{opts: Options{CacheFile: filepath.Join(dir, "none"), ConfFile: filepath.Join(dir, "ld.so.conf")}}
	if got := r.cacheLookup("libc.so.6"); !slices.Equal(got, []string{"/opt/conf/libc.so.6"}) {
		t.Errorf("cacheLookup without cache = %q", got)
	}
}

func FuzzParseCache(f *testing.F) {
	f.Add(buildCache(testEntries, binary.LittleEndian, false))
	f.Add(buildCache(testEntries, binary.BigEndian, false))
	f.Add(buildCache(testEntries[:1], binary.NativeEndian, true))
	f.Add(buildCache(nil, binary.LittleEndian, false))
	f.Add([]byte(cacheMagicOld + "\x00\x02\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := parseCache(data)
		if err != nil {
			if !errors.Is(err, errCacheFormat) {
				t.Fatalf("error %v does not wrap errCacheFormat", err)
			}
			return
		}
		// Every entry takes newEntrySize bytes of the input, so the
		// allocation is bounded by its size.
		if len(entries)*newEntrySize > len(data) {
			t.Fatalf("%d entries from %d bytes", len(entries), len(data))
		}
		if cap(entries)*newEntrySize > len(data) {
			t.Fatalf("capacity %d from %d bytes", cap(entries), len(data))
		}
		for _, e := range entries {
			if len(e.Name) >= len(data) || len(e.Path) >= len(data) {
				t.Fatalf("entry %+v longer than the input", e)
			}
			if bytes.IndexByte([]byte(e.Name), 0) >= 0 || bytes.IndexByte([]byte(e.Path), 0) >= 0 {
				t.Fatalf("entry %+v contains NUL", e)
			}
		}
	})
}
