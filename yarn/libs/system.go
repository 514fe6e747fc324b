package libs

import "path"

// systemPatterns are the sonames (path.Match patterns) present on every
// Linux node that must never be shipped: the glibc family, the dynamic
// loader under the names it has on the architectures Linux distributions
// ship, and libgcc_s. The package documentation lists them.
var systemPatterns = []string{
	"linux-vdso.so.1",
	"linux-gate.so.1", // the vDSO's name on 32-bit x86
	"ld-linux*.so*",
	"ld64.so.*", // the loader on ppc64 and s390x
	"ld.so.1",   // the loader on 32-bit PowerPC and MIPS
	"libc.so.6",
	"libm.so.6",
	"libpthread.so.0",
	"libdl.so.2",
	"librt.so.1",
	"libresolv.so.2",
	"libutil.so.1",
	"libnsl.so.1",
	"libcrypt.so.1",
	"libanl.so.1",
	"libmvec.so.1",
	"libBrokenLocale.so.1",
	"libnss_*",
	"libthread_db.so.1",
	"libgcc_s.so.1",
}

// libstdcxx is the soname of the GNU C++ runtime, shipped unless
// Options.SystemLibstdcxx is set.
const libstdcxx = "libstdc++.so.6"

// IsSystem reports whether the soname name is in the fixed system set that
// is never shipped (see the package documentation). It does not consider
// libstdc++.so.6 a system library; Options.SystemLibstdcxx does.
func IsSystem(name string) bool {
	return matchAny(systemPatterns, name)
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, name); err == nil && ok {
			return true
		}
	}
	return false
}

// isSystem is IsSystem extended by opts and by the executable's own
// PT_INTERP (interp, a base name, or "").
func (o Options) isSystem(name, interp string) bool {
	switch {
	case IsSystem(name):
		return true
	case interp != "" && path.Base(name) == interp:
		return true
	case o.SystemLibstdcxx && name == libstdcxx:
		return true
	}
	return matchAny(o.ExtraSystem, name)
}
