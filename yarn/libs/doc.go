// Package libs finds the shared libraries a program needs so that they can
// be shipped with it to YARN containers, which have nothing of Spindle
// installed.
//
// # What is resolved
//
// Needed lists the DT_NEEDED entries of one ELF file. Resolve follows them
// transitively, resolving each soname to a file on this machine in the order
// glibc's dynamic loader (ld.so) uses:
//
//  1. a soname containing a slash is used as a path as it stands;
//  2. DT_RPATH of the needing object and of the objects that loaded it, up
//     to the executable — only when the needing object has no DT_RUNPATH,
//     and skipping any object in that chain that has one;
//  3. LD_LIBRARY_PATH (Options.LDLibraryPath; the environment is never read
//     here), an empty element meaning the current directory;
//  4. DT_RUNPATH of the needing object only;
//  5. the ld.so cache (/etc/ld.so.cache in the "glibc-ld.so.cache1.1"
//     format, alone or after an old "ld.so-1.7.0" table), or, if the cache
//     is missing or unreadable, the directories listed in /etc/ld.so.conf
//     and the files it includes;
//  6. the default directories: the multiarch ones for the binary's machine
//     (such as /lib/x86_64-linux-gnu and /usr/lib/x86_64-linux-gnu), then
//     /lib64 and /usr/lib64 for 64-bit binaries, then /lib and /usr/lib.
//
// $ORIGIN (or ${ORIGIN}) in DT_RPATH, DT_RUNPATH and LD_LIBRARY_PATH expands
// to the directory of the object whose path list it is in (of the
// executable, symlinks resolved, for LD_LIBRARY_PATH). Entries using the
// other loader tokens, $LIB and $PLATFORM, are skipped.
//
// A candidate file is accepted only if it is an ELF file of the same class
// (32 or 64 bit), byte order and machine as the executable, as the loader
// does; a 32-bit libzmq in /usr/lib is passed over for a 64-bit binary.
// Among several cache entries for a soname, the baseline one (no hwcap
// subdirectory such as glibc-hwcaps/x86-64-v3) is preferred, so that what is
// shipped runs on any CPU of the architecture.
//
// # What is shipped
//
// Libraries in the system set (see IsSystem) are present on every Linux
// node and must match the node's own C library and loader; shipping them
// breaks programs. They are the glibc family — linux-vdso.so.1, the dynamic
// loader under any of its names (ld-linux*.so*, ld64.so.*, ld.so.1, and the
// executable's PT_INTERP), libc.so.6, libm.so.6, libpthread.so.0,
// libdl.so.2, librt.so.1, libresolv.so.2, libutil.so.1, libnsl.so.1,
// libcrypt.so.1, libanl.so.1, libmvec.so.1, libBrokenLocale.so.1, libnss_*
// and libthread_db.so.1 — and libgcc_s.so.1. Resolve reports them with
// System set, resolves their path only on a best-effort basis, does not
// follow their own dependencies, and does not fail if they are missing.
// libstdc++.so.6 is shipped by default, because a node may have an older
// one than the program was built against; Options.SystemLibstdcxx treats it
// as a system library instead, and Options.ExtraSystem adds more patterns.
//
// Ship filters a resolved list down to what must be shipped. In particular
// the dynamic loader itself is never shipped: the container runs the
// node's own loader, which must match the node's own libc.
//
// # How the shipped libraries are used
//
// Each shipped Lib is localized into a directory named lib/ in the
// container's working directory under its soname, Lib.Name — not under the
// base name of Lib.Path, which is often a versioned file such as
// libzmq.so.5.2.4 reached through the symlink libzmq.so.5 — with the
// contents of the file Lib.Path refers to. The container's command runs
// with
//
//	LD_LIBRARY_PATH=./lib:$LD_LIBRARY_PATH
//
// so the loader finds the shipped copies before anything on the node, while
// the system set still comes from the node. A DT_RUNPATH or DT_RPATH baked
// into a binary is searched before or after LD_LIBRARY_PATH as described
// above; a DT_RPATH naming a directory that exists on the node can thus
// still win over lib/.
package libs
