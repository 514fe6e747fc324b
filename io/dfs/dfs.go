package dfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"
)

// FileSystem is the part of a file system Spindle uses, in the shapes of
// package os, with a context on every call. Names are paths within the
// file system (an absolute slash path on HDFS, an OS path on Local); use
// a Resolver to turn a URI into a FileSystem and a name.
//
// Errors are *fs.PathError values, wrapped with a "dfs: " prefix, whose
// Path is the full URI (FileSystem.URI of the name): errors.Is(err,
// fs.ErrNotExist), fs.ErrPermission and fs.ErrExist work on every
// implementation. When ctx ends first, the error wraps ctx.Err().
//
// Implementations are safe for concurrent use; the Files and Writers they
// return are not.
type FileSystem interface {
	// Open opens a file for reading. The File's Read, ReadAt and Seek
	// honour ctx for as long as the file is open (see File).
	Open(ctx context.Context, name string) (File, error)
	// Create opens a file for writing. The parent directory must exist.
	// Without opts.Overwrite an existing file is an error wrapping
	// fs.ErrExist. The Writer's Write and Close honour ctx. The data is
	// complete only when Close returns nil; write to a temporary name and
	// Rename for an all-or-nothing file.
	Create(ctx context.Context, name string, opts CreateOptions) (Writer, error)
	// Stat describes a file or directory. BlockSize reports the block
	// size it carries.
	Stat(ctx context.Context, name string) (fs.FileInfo, error)
	// ReadDir lists a directory, sorted by name.
	ReadDir(ctx context.Context, name string) ([]fs.FileInfo, error)
	// MkdirAll creates a directory and any missing parents, like
	// os.MkdirAll; an existing directory is not an error.
	MkdirAll(ctx context.Context, name string, perm fs.FileMode) error
	// Rename renames oldname to newname, replacing newname if it is a
	// file. Each implementation documents how atomic that is.
	Rename(ctx context.Context, oldname, newname string) error
	// Remove removes a file or an empty directory.
	Remove(ctx context.Context, name string) error
	// RemoveAll removes name and everything below it; a name that does
	// not exist is not an error.
	RemoveAll(ctx context.Context, name string) error
	// Glob returns the names matching pattern, sorted, with the syntax of
	// path.Match applied to each path element ("*", "?", "[...]", "[^...]"
	// or "[!...]", "\\" escapes); separators are never matched by a
	// wildcard, and "*" matches names starting with "." too. No match is
	// not an error (the result is empty); a malformed pattern is
	// (path.ErrBadPattern).
	Glob(ctx context.Context, pattern string) ([]string, error)
	// URI returns the full URI of name, as used in errors and in splits:
	// "hdfs://host:port/p" or "file:///p".
	URI(name string) string
}

// File is a file open for reading. The context given to Open governs the
// whole life of the File: once it is done, Read, ReadAt and Seek return an
// error wrapping ctx.Err(). A File is not safe for concurrent use, ReadAt
// included (unlike *os.File).
type File interface {
	io.Reader
	io.ReaderAt
	io.Seeker
	io.Closer
	// Stat describes the file as it was when it was opened.
	Stat() (fs.FileInfo, error)
}

// Writer is a file open for writing. The context given to Create governs
// the whole life of the Writer. Close must be called, and only a nil
// error from Close means the data is stored; after a failed Write or
// Close the file may be partial. A Writer is not safe for concurrent use.
type Writer interface {
	io.Writer
	io.Closer
}

// CreateOptions tunes Create. The zero value means: the file system's
// default block size and replication, and fail if the file exists.
type CreateOptions struct {
	// BlockSize is the HDFS block size in bytes; 0 means the NameNode's
	// default (dfs.blocksize). HDFS wants a multiple of the checksum
	// chunk (512 bytes) no smaller than dfs.namenode.fs-limits.min-block-size.
	// Local ignores it.
	BlockSize int64
	// Replication is the number of HDFS replicas; 0 means the
	// NameNode's default (dfs.replication). Local ignores it.
	Replication int
	// Overwrite replaces an existing file instead of failing.
	Overwrite bool
}

// BlockSize returns the block size recorded in fi, or 0 when fi does not
// carry one (a FileInfo not made by this package, or a directory).
func BlockSize(fi fs.FileInfo) int64 {
	if b, ok := fi.(interface{ BlockSize() int64 }); ok {
		return b.BlockSize()
	}
	return 0
}

// LocalBlockSize is the block size Local reports for files, Hadoop's
// fs.local.block.size default (32 MiB). It only guides split planning.
const LocalBlockSize = 32 << 20

// ErrClosed is returned by a file system, File or Writer used after Close.
var ErrClosed = errors.New("dfs: closed")

// ErrProtectedReads is the error of opening a file of an HDFS whose
// DataNodes encrypt blocks with a DIGEST-MD5 cipher negotiated with the
// NameNode's data encryption key (dfs.encrypt.data.transfer without AES
// among dfs.encrypt.data.transfer.cipher.suites): the HDFS client library
// (github.com/colinmarc/hdfs v2.4.0) loses bytes of such streams, so no
// file could be read right. Writing is not affected.
var ErrProtectedReads = errors.New("reading from DataNodes that encrypt blocks (dfs.encrypt.data.transfer=true) " +
	"needs AES: set dfs.encrypt.data.transfer.cipher.suites=AES/CTR/NoPadding on the cluster and in its client configuration")

// pathError builds the error every method returns: a *fs.PathError naming
// the full URI, behind a "dfs: " prefix.
func pathError(op, uri string, err error) error {
	return fmt.Errorf("dfs: %w", &fs.PathError{Op: op, Path: uri, Err: err})
}

// innerError strips the *fs.PathError and *os.LinkError layers that os and
// the HDFS client put around an error, which name the path without its
// scheme, so that pathError can name the URI instead.
func innerError(err error) error {
	for {
		switch e := err.(type) {
		case *fs.PathError:
			err = e.Err
		case *os.LinkError:
			err = e.Err
		default:
			return err
		}
	}
}

// RemoteError is an exception raised by a Hadoop server (NameNode or
// DataNode), with its Java class. errors.Is maps the classes that callers
// branch on onto fs.ErrNotExist, fs.ErrPermission, fs.ErrExist,
// fs.ErrInvalid and syscall.ENOTEMPTY/ENOTDIR.
type RemoteError struct {
	// Method is the RPC method that failed, such as "getFileInfo".
	Method string
	// Class is the Java exception class, such as
	// "java.io.FileNotFoundException".
	Class string
	// Message is the exception's message as the server sent it (possibly
	// a whole Java stack trace).
	Message string
}

// maxRemoteMessage bounds how much of a remote message Error shows.
const maxRemoteMessage = 300

func (e *RemoteError) Error() string {
	msg := e.Message
	if i := strings.IndexAny(msg, "\r\n"); i >= 0 {
		msg = msg[:i]
	}
	if len(msg) > maxRemoteMessage {
		msg = msg[:maxRemoteMessage] + "…"
	}
	s := e.Method + ": " + e.Class
	if msg != "" {
		s += ": " + msg
	}
	return s
}

// Is maps Java exception classes onto the standard errors.
func (e *RemoteError) Is(target error) bool {
	cls := e.Class
	if i := strings.LastIndexByte(cls, '.'); i >= 0 {
		cls = cls[i+1:]
	}
	switch target {
	case fs.ErrNotExist:
		return cls == "FileNotFoundException"
	case fs.ErrPermission:
		return cls == "AccessControlException" || cls == "AuthorizationException"
	case fs.ErrExist:
		return cls == "FileAlreadyExistsException" || cls == "AlreadyBeingCreatedException"
	case fs.ErrInvalid:
		return cls == "HadoopIllegalArgumentException" || cls == "InvalidPathException" || cls == "IllegalArgumentException"
	case syscall.ENOTEMPTY:
		return cls == "PathIsNotEmptyDirectoryException"
	case syscall.ENOTDIR:
		return cls == "ParentNotDirectoryException" || cls == "PathIsNotDirectoryException"
	}
	return false
}

// deadlineOf returns the earlier of ctx's deadline and now+timeout
// (timeout <= 0: no bound of its own), and whether there is one.
func deadlineOf(ctx context.Context, now time.Time, timeout time.Duration) (time.Time, bool) {
	d, ok := ctx.Deadline()
	if timeout > 0 {
		t := now.Add(timeout)
		if !ok || t.Before(d) {
			return t, true
		}
	}
	return d, ok
}
