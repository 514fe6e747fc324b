package libs

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNeededBinSh(t *testing.T) {
	t.Parallel()
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Skipf("no /bin/sh: %v", err)
	}
	needed, err := Needed(sh)
	if errors.Is(err, ErrNotELF) {
		t.Skipf("/bin/sh is not an ELF file")
	}
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(needed, "libc.so.6") {
		t.Errorf("Needed(%s) = %q, want libc.so.6 among them", sh, needed)
	}
}

func TestNeededErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name    string
		content string
		want    error
	}{
		{name: "script", content: "#!/bin/sh\necho hi\n", want: ErrNotELF},
		{name: "empty", content: "", want: ErrNotELF},
		{name: "truncated-elf", content: "\x7fELF\x02\x01", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := filepath.Join(dir, tt.name)
			writeFile(t, p, tt.content)
			_, err := Needed(p)
			if err == nil {
				t.Fatalf("Needed(%s) succeeded", p)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Needed(%s) = %v, want %v", p, err, tt.want)
			}
			if !strings.Contains(err.Error(), p) {
				t.Errorf("error %q does not name %s", err, p)
			}
			if _, err := Resolve(p, Options{}); err == nil || !strings.Contains(err.Error(), p) {
				t.Errorf("Resolve(%s) = %v, want an error naming it", p, err)
			}
		})
	}
	if _, err := Needed(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Needed(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestNeededStatic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A Go program importing nothing that needs cgo is linked statically.
	bin := goBuild(t, dir, "package main\n\nfunc main() {}\n")
	needed, err := Needed(bin)
	if err != nil {
		t.Fatal(err)
	}
	if needed == nil || len(needed) != 0 {
		t.Errorf("Needed(static) = %#v, want an empty list", needed)
	}
	libs, err := Resolve(bin, Options{})
	if err != nil || len(libs) != 0 {
		t.Errorf("Resolve(static) = %v, %v; want nothing", libs, err)
	}
}

const zmqProgram = `package main

// #cgo pkg-config: libzmq
// #include <zmq.h>
import "C"

func main() {
	var major, minor, patch C.int
	C.zmq_version(&major, &minor, &patch)
	println(major, minor, patch)
}
`

// fakeELF returns the header of an ELF shared object of the given class
// and machine, little-endian, without sections or segments.
func fakeELF(class elf.Class, m elf.Machine) []byte {
	le := binary.LittleEndian
	b := []byte{0x7f, 'E', 'L', 'F', byte(class), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)}
	b = append(b, make([]byte, 9)...)
	b = le.AppendUint16(b, uint16(elf.ET_DYN))
	b = le.AppendUint16(b, uint16(m))
	b = le.AppendUint32(b, uint32(elf.EV_CURRENT))
	ehsize, phentsize, shentsize := uint16(64), uint16(56), uint16(64)
	if class == elf.ELFCLASS32 {
		b = append(b, make([]byte, 3*4)...) // entry, phoff, shoff
		ehsize, phentsize, shentsize = 52, 32, 40
	} else {
		b = append(b, make([]byte, 3*8)...)
	}
	b = le.AppendUint32(b, 0) // flags
	for _, v := range []uint16{ehsize, phentsize, 0, shentsize, 0, 0} {
		b = le.AppendUint16(b, v)
	}
	return b
}

func TestZmq(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(zmqSO); err != nil {
		t.Skipf("libzmq not installed: %v", err)
	}
	bin := goBuild(t, t.TempDir(), zmqProgram)

	t.Run("matches-ldd", func(t *testing.T) {
		t.Parallel()
		libs, err := Resolve(bin, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("resolved: %q", names(libs))
		t.Logf("shipped: %q", names(Ship(libs)))
		got := byName(libs)
		zmq, ok := got["libzmq.so.5"]
		if !ok {
			t.Fatalf("libzmq.so.5 not resolved: %q", names(libs))
		}
		if !sameFile(t, zmq.Path, zmqSO) || zmq.System || zmq.NeededBy != bin {
			t.Errorf("libzmq.so.5 = %+v, want %s, not system, needed by %s", zmq, zmqSO, bin)
		}
		// Every dependency libzmq itself has must be resolved.
		direct, err := Needed(zmq.Path)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range direct {
			if _, ok := got[n]; !ok {
				t.Errorf("%s, needed by libzmq, not resolved", n)
			}
		}
		// The loader agrees on every non-system library, and Resolve
		// finds every one it loads.
		want := ldd(t, bin)
		for n, p := range want {
			l, ok := got[n]
			if !ok {
				if !(Options{}).isSystem(n, "") {
					t.Errorf("ldd loads %s => %s, Resolve does not list it", n, p)
				}
				continue
			}
			if l.Path != "" && !sameFile(t, l.Path, p) {
				t.Errorf("%s: Resolve found %s, ldd %s", n, l.Path, p)
			}
		}
		for _, l := range libs {
			if _, ok := want[l.Name]; !ok && !l.System {
				t.Errorf("Resolve lists %s, ldd does not", l.Name)
			}
		}
	})

	t.Run("ship", func(t *testing.T) {
		t.Parallel()
		libs, err := Resolve(bin, Options{})
		if err != nil {
			t.Fatal(err)
		}
		all := byName(libs)
		if l := all["libc.so.6"]; !l.System || l.Path == "" {
			t.Errorf("libc.so.6 = %+v, want a resolved system library", l)
		}
		shipped := byName(Ship(libs))
		for n := range shipped {
			if IsSystem(n) {
				t.Errorf("Ship includes system library %s", n)
			}
		}
		for _, n := range []string{"libzmq.so.5", "libsodium.so.23", "libpgm-5.3.so.0", "libnorm.so.1", "libgssapi_krb5.so.2", "libstdc++.so.6"} {
			if _, ok := all[n]; ok {
				if _, ok := shipped[n]; !ok {
					t.Errorf("Ship drops %s", n)
				}
			}
		}
		if _, ok := shipped["libzmq.so.5"]; !ok {
			t.Error("Ship drops libzmq.so.5")
		}
		for _, n := range []string{"libc.so.6", "libm.so.6", "libgcc_s.so.1", "libpthread.so.0", "ld-linux-x86-64.so.2"} {
			if _, ok := shipped[n]; ok {
				t.Errorf("Ship includes %s", n)
			}
		}
	})

	t.Run("libstdcxx-system", func(t *testing.T) {
		t.Parallel()
		libs, err := Resolve(bin, Options{SystemLibstdcxx: true, ExtraSystem: []string{"libkrb5*"}})
		if err != nil {
			t.Fatal(err)
		}
		all := byName(libs)
		if _, ok := all["libstdc++.so.6"]; !ok {
			t.Skip("libzmq does not use libstdc++ here")
		}
		for _, l := range Ship(libs) {
			if l.Name == "libstdc++.so.6" || strings.HasPrefix(l.Name, "libkrb5") {
				t.Errorf("Ship includes %s despite Options", l.Name)
			}
		}
	})

	t.Run("skips-wrong-class-and-machine", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		tests := []struct {
			name string
			data []byte
		}{
			{name: "elf32-386", data: fakeELF(elf.ELFCLASS32, elf.EM_386)},
			{name: "elf64-aarch64", data: fakeELF(elf.ELFCLASS64, elf.EM_AARCH64)},
			{name: "text", data: []byte("INPUT(-lzmq)\n")},
		}
		var path []string
		for _, tt := range tests {
			d := filepath.Join(dir, tt.name)
			writeFile(t, filepath.Join(d, "libzmq.so.5"), string(tt.data))
			path = append(path, d)
		}
		libs, err := Resolve(bin, Options{LDLibraryPath: strings.Join(path, ":")})
		if err != nil {
			t.Fatal(err)
		}
		if l := byName(libs)["libzmq.so.5"]; !sameFile(t, l.Path, zmqSO) {
			t.Errorf("libzmq.so.5 resolved to %s, want %s", l.Path, zmqSO)
		}
	})

	t.Run("ld.so.conf-fallback", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "ld.so.conf"), "# test\ninclude conf.d/*.conf\n")
		writeFile(t, filepath.Join(dir, "conf.d", "a.conf"), "/nonexistent\n"+filepath.Dir(zmqSO)+"\n")
		opts := Options{
			CacheFile:   filepath.Join(dir, "no-cache"),
			ConfFile:    filepath.Join(dir, "ld.so.conf"),
			DefaultDirs: []string{},
		}
		libs, err := Resolve(bin, opts)
		if err != nil {
			t.Fatal(err)
		}
		if l := byName(libs)["libzmq.so.5"]; !sameFile(t, l.Path, zmqSO) {
			t.Errorf("libzmq.so.5 resolved to %s, want %s", l.Path, zmqSO)
		}
		// With neither cache, conf nor default directories nothing is
		// found, and the error names the library and its needer.
		opts.ConfFile = filepath.Join(dir, "no-conf")
		_, err = Resolve(bin, opts)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "libzmq.so.5") || !strings.Contains(err.Error(), bin) {
			t.Errorf("Resolve without search dirs = %v, want ErrNotFound naming libzmq.so.5 and %s", err, bin)
		}
	})
}

// TestOrigin builds, with the C compiler, a program main that needs liba,
// which needs libb, both in $ORIGIN/lib, and checks the search rules of
// DT_RPATH and DT_RUNPATH.
func TestOrigin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		dtags    string // linker flag choosing DT_RPATH or DT_RUNPATH
		ldPath   bool   // set LD_LIBRARY_PATH to $ORIGIN/lib
		symlink  bool   // resolve through a symlink to main
		wantErr  bool   // libb cannot be found
		wantZmq  bool   // main also needs a copy of libzmq in $ORIGIN/lib
		checkRun bool   // main should have DT_RUNPATH rather than DT_RPATH
	}{
		{name: "rpath-inherited", dtags: "-Wl,--disable-new-dtags"},
		{name: "rpath-symlinked-exe", dtags: "-Wl,--disable-new-dtags", symlink: true},
		{name: "runpath-not-inherited", dtags: "-Wl,--enable-new-dtags", wantErr: true, checkRun: true},
		{name: "runpath-with-ld-library-path", dtags: "-Wl,--enable-new-dtags", ldPath: true, checkRun: true},
		{name: "runpath-copied-libzmq", dtags: "-Wl,--enable-new-dtags", ldPath: true, wantZmq: true, checkRun: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			lib := filepath.Join(dir, "app", "lib")
			writeFile(t, filepath.Join(dir, "b.c"), "int b(void) { return 2; }\n")
			writeFile(t, filepath.Join(dir, "a.c"), "int b(void);\nint a(void) { return b() + 1; }\n")
			mainSrc := "int a(void);\nint main(void) { return a() - 3; }\n"
			var extra []string
			if tt.wantZmq {
				if _, err := os.Stat(zmqSO); err != nil {
					t.Skipf("libzmq not installed: %v", err)
				}
				data, err := os.ReadFile(zmqSO)
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(lib, "libzmq.so.5"), string(data))
				mainSrc = "#include <zmq.h>\nint a(void);\nint main(void) { int x, y, z; zmq_version(&x, &y, &z); return a() - 3; }\n"
				extra = []string{"-lzmq"}
			}
			writeFile(t, filepath.Join(dir, "main.c"), mainSrc)
			if err := os.MkdirAll(lib, 0o755); err != nil {
				t.Fatal(err)
			}
			gcc(t, dir, "-shared", "-fPIC", "-o", filepath.Join(lib, "libspindleb.so.1"), "-Wl,-soname,libspindleb.so.1", "b.c")
			gcc(t, dir, "-shared", "-fPIC", "-o", filepath.Join(lib, "libspindlea.so.1"), "-Wl,-soname,libspindlea.so.1", "a.c",
				filepath.Join(lib, "libspindleb.so.1"))
			exe := filepath.Join(dir, "app", "main")
			gcc(t, dir, append([]string{"-o", exe, "main.c", filepath.Join(lib, "libspindlea.so.1"), tt.dtags, "-Wl,-rpath,$ORIGIN/lib", "-Wl,-rpath-link," + lib}, extra...)...)

			ef, err := elf.Open(exe)
			if err != nil {
				t.Fatal(err)
			}
			run, _ := ef.DynString(elf.DT_RUNPATH)
			ef.Close()
			if hasRun := len(run) > 0; hasRun != tt.checkRun {
				t.Fatalf("linker produced DT_RUNPATH=%v, want %v", hasRun, tt.checkRun)
			}

			target := exe
			if tt.symlink {
				target = filepath.Join(dir, "elsewhere", "main")
				if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(exe, target); err != nil {
					t.Fatal(err)
				}
			}
			var opts Options
			if tt.ldPath {
				opts.LDLibraryPath = "/nonexistent:$ORIGIN/lib"
			}
			libs, err := Resolve(target, opts)
			if tt.wantErr {
				if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "libspindleb.so.1") ||
					!strings.Contains(err.Error(), "libspindlea.so.1") {
					t.Fatalf("Resolve = %v, want ErrNotFound for libspindleb.so.1 needed by libspindlea.so.1", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := byName(libs)
			want := []string{"libspindlea.so.1", "libspindleb.so.1"}
			if tt.wantZmq {
				want = append(want, "libzmq.so.5")
			}
			for _, n := range want {
				if l := got[n]; l.System || !sameFile(t, l.Path, filepath.Join(lib, n)) {
					t.Errorf("%s = %+v, want %s", n, l, filepath.Join(lib, n))
				}
			}
			if a, b := got["libspindlea.so.1"], got["libspindleb.so.1"]; a.NeededBy != target || b.NeededBy != a.Path {
				t.Errorf("NeededBy: a %q, b %q; want %q, %q", a.NeededBy, b.NeededBy, target, a.Path)
			}
		})
	}
}

func TestExpandTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
		ok             bool
	}{
		{name: "plain", in: "/opt/lib", want: "/opt/lib", ok: true},
		{name: "origin", in: "$ORIGIN/lib", want: "/app/bin/lib", ok: true},
		{name: "braced", in: "${ORIGIN}/../lib", want: "/app/bin/../lib", ok: true},
		{name: "twice", in: "$ORIGIN:${ORIGIN}", want: "/app/bin:/app/bin", ok: true},
		{name: "alone", in: "$ORIGIN", want: "/app/bin", ok: true},
		{name: "longer-name", in: "$ORIGINAL/lib", ok: false},
		{name: "lib-token", in: "/opt/$LIB", ok: false},
		{name: "platform-token", in: "/opt/${PLATFORM}", ok: false},
		{name: "unterminated", in: "${ORIGIN/lib", ok: false},
		{name: "bare-dollar", in: "/opt/$/lib", ok: false},
		{name: "empty", in: "", want: "", ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := expandTokens(tt.in, "/app/bin")
			if ok != tt.ok || (ok && got != tt.want) {
				t.Errorf("expandTokens(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestIsSystem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want bool
	}{
		{"linux-vdso.so.1", true},
		{"ld-linux-x86-64.so.2", true},
		{"ld-linux-aarch64.so.1", true},
		{"ld64.so.2", true},
		{"libc.so.6", true},
		{"libm.so.6", true},
		{"libpthread.so.0", true},
		{"libdl.so.2", true},
		{"librt.so.1", true},
		{"libresolv.so.2", true},
		{"libnss_files.so.2", true},
		{"libmvec.so.1", true},
		{"libgcc_s.so.1", true},
		{"libthread_db.so.1", true},
		{"libstdc++.so.6", false},
		{"libzmq.so.5", false},
		{"libsodium.so.23", false},
		{"libcrypto.so.3", false},
		{"libcrypt.so.2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := IsSystem(tt.name); got != tt.want {
				t.Errorf("IsSystem(%q) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
	o := Options{SystemLibstdcxx: true, ExtraSystem: []string{"libcuda.so*"}}
	for _, n := range []string{"libstdc++.so.6", "libcuda.so.1", "ld-custom.so.9"} {
		if !o.isSystem(n, "ld-custom.so.9") {
			t.Errorf("isSystem(%q) with options = false", n)
		}
	}
}

func TestShip(t *testing.T) {
	t.Parallel()
	in := []Lib{
		{Name: "libc.so.6", Path: "/lib/libc.so.6", System: true},
		{Name: "libzmq.so.5", Path: "/a/libzmq.so.5"},
		{Name: "libsodium.so.23", Path: "/a/libsodium.so.23"},
		{Name: "libzmq.so.5", Path: "/b/libzmq.so.5"},
		{Name: "libgcc_s.so.1", System: true},
	}
	got := Ship(in)
	want := []Lib{in[1], in[2]}
	if !slices.Equal(got, want) {
		t.Errorf("Ship = %+v, want %+v", got, want)
	}
	if Ship(nil) != nil {
		t.Error("Ship(nil) != nil")
	}
}
