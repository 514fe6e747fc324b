package dfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/colinmarc/hdfs/v2"
	"github.com/colinmarc/hdfs/v2/hadoopconf"
	krbclient "github.com/jcmturner/gokrb5/v8/client"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadoop/creds"
	"github.com/spindle-ps/spindle/internal/hadoop/kerberos"
)

// HDFSOptions configures an HDFS file system. HDFSOptionsFromConf fills
// it from a Hadoop configuration.
type HDFSOptions struct {
	// Authority is the authority of this file system's URIs: the
	// NameNode's host:port, or an HA nameservice. Required.
	Authority string
	// Namenodes are the RPC addresses (host:port) to try, in order.
	// Required.
	Namenodes []string
	// User is the Hadoop user to act as (simple authentication).
	// Required.
	User string
	// DialTimeout bounds each TCP connection attempt to a NameNode or a
	// DataNode. Default (0) 20 s, Hadoop's ipc.client.connect.timeout.
	DialTimeout time.Duration
	// RPCTimeout bounds each NameNode call when the caller's context has
	// no earlier deadline. A call that runs out of time closes the
	// NameNode connection. Default (0) 120 s, Hadoop's
	// ipc.client.rpc-timeout.ms; negative means no bound besides ctx.
	RPCTimeout time.Duration
	// IOTimeout bounds each Read, Write and Close of a File or Writer
	// (DataNode traffic, and the NameNode calls they make) when the
	// context has no earlier deadline. Default (0) 60 s, Hadoop's
	// dfs.client.socket-timeout; negative means no bound besides ctx.
	IOTimeout time.Duration
	// UseDatanodeHostname connects to DataNodes by hostname rather than
	// IP address (dfs.client.use.datanode.hostname).
	UseDatanodeHostname bool
	// DataTransferProtection is "", "authentication", "integrity" or
	// "privacy" (dfs.data.transfer.protection, dfs.encrypt.data.transfer).
	DataTransferProtection string
	// EncryptDataTransfer is dfs.encrypt.data.transfer.
	EncryptDataTransfer bool
	// EncryptCipherSuites is dfs.encrypt.data.transfer.cipher.suites: with
	// EncryptDataTransfer, AES/CTR/NoPadding there lets blocks be read;
	// with DataTransferProtection privacy, it is offered to the DataNodes
	// as the cipher of their connections.
	EncryptCipherSuites string

	// Kerberos is set when the cluster uses Kerberos
	// (hadoop.security.authentication=kerberos); exactly one of Login and
	// Token must then be set.
	Kerberos bool
	// NamenodePrincipal is dfs.namenode.kerberos.principal
	// ("nn/_HOST@REALM").
	NamenodePrincipal string
	// Login is a logged-in Kerberos client (ps-submit, a user's shell).
	// User is then the principal's short name.
	Login *krbclient.Client
	// Token is an HDFS delegation token for this file system (inside a
	// YARN container). User is then the token's owner. SetToken replaces
	// it for the connections made afterwards.
	Token *creds.Token
	// Protection is hadoop.rpc.protection: the protections the NameNode
	// connection accepts, in order of preference (see hrpc.Options).
	Protection []string
}

// Defaults of HDFSOptions, from Hadoop's core-default.xml and
// hdfs-default.xml.
const (
	DefaultDialTimeout = 20 * time.Second
	DefaultRPCTimeout  = 120 * time.Second
	DefaultIOTimeout   = 60 * time.Second
)

// HDFSOptionsFromConf builds the options for the file system at
// authority (empty: the one of fs.defaultFS) acting as user, reading
// dfs.namenode.rpc-address.*, dfs.ha.namenodes.*, ipc.client.connect.timeout,
// ipc.client.rpc-timeout.ms, dfs.client.socket-timeout,
// dfs.client.use.datanode.hostname, dfs.data.transfer.protection,
// dfs.encrypt.data.transfer, hadoop.security.authentication and
// dfs.namenode.kerberos.principal. With Kerberos the caller sets Login or
// Token (Resolver does).
func HDFSOptionsFromConf(hc conf.HadoopConf, authority, user string) (HDFSOptions, error) {
	if authority == "" {
		def := hc.DefaultFS()
		u, err := ParseURI(def)
		if err != nil || u.Scheme != "hdfs" || u.Authority == "" {
			return HDFSOptions{}, fmt.Errorf("dfs: fs.defaultFS is %q, not hdfs://host:port: name the NameNode in the URI", def)
		}
		authority = u.Authority
	}
	o := HDFSOptions{Authority: authority, Namenodes: hc.Namenodes(authority), User: user}
	switch auth := strings.ToLower(strings.TrimSpace(hc.GetDefault("hadoop.security.authentication", "simple"))); auth {
	case "simple":
	case "kerberos":
		o.Kerberos = true
		o.Protection = hc.RPCProtection()
		o.NamenodePrincipal = strings.TrimSpace(hc.GetDefault("dfs.namenode.kerberos.principal", ""))
		if o.NamenodePrincipal == "" {
			return HDFSOptions{}, fmt.Errorf("dfs: hdfs://%s: hadoop.security.authentication=kerberos but dfs.namenode.kerberos.principal is not set", authority)
		}
	default:
		return HDFSOptions{}, fmt.Errorf("dfs: hadoop.security.authentication=%s is not supported (simple or kerberos)", auth)
	}
	if user == "" && !o.Kerberos {
		return HDFSOptions{}, fmt.Errorf("dfs: hdfs://%s: no Hadoop user", authority)
	}
	if len(o.Namenodes) == 0 {
		return HDFSOptions{}, fmt.Errorf("dfs: hdfs://%s: no NameNode address (dfs.ha.namenodes.%s lists none with a dfs.namenode.rpc-address)", authority, authority)
	}
	ms := func(key string, dst *time.Duration) error {
		n, err := hc.GetInt64(key, -1)
		if err != nil {
			return fmt.Errorf("dfs: %w", err)
		}
		switch {
		case n > 0:
			*dst = time.Duration(n) * time.Millisecond
		case n == 0:
			*dst = -1 // Hadoop's 0: no timeout
		}
		return nil
	}
	if err := ms("ipc.client.connect.timeout", &o.DialTimeout); err != nil {
		return HDFSOptions{}, err
	}
	if o.DialTimeout < 0 {
		o.DialTimeout = 0 // a dial always gets a bound: the default
	}
	if err := ms("ipc.client.rpc-timeout.ms", &o.RPCTimeout); err != nil {
		return HDFSOptions{}, err
	}
	if err := ms("dfs.client.socket-timeout", &o.IOTimeout); err != nil {
		return HDFSOptions{}, err
	}
	copts := hdfs.ClientOptionsFromConf(hadoopconf.HadoopConf(hc))
	o.UseDatanodeHostname = copts.UseDatanodeHostname
	o.DataTransferProtection = copts.DataTransferProtection
	o.EncryptDataTransfer = strings.EqualFold(strings.TrimSpace(hc.GetDefault("dfs.encrypt.data.transfer", "false")), "true")
	o.EncryptCipherSuites = strings.TrimSpace(hc.GetDefault("dfs.encrypt.data.transfer.cipher.suites", ""))
	return o, nil
}

func (o HDFSOptions) withDefaults() HDFSOptions {
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.RPCTimeout == 0 {
		o.RPCTimeout = DefaultRPCTimeout
	}
	if o.IOTimeout == 0 {
		o.IOTimeout = DefaultIOTimeout
	}
	return o
}

// HDFS is a FileSystem over HDFS, speaking Hadoop's protocols through
// github.com/colinmarc/hdfs/v2. Names are absolute slash paths.
//
// It connects on first use and reconnects after a failure. A NameNode
// that cannot be reached fails an operation within the DialTimeout (or
// the context's deadline, if earlier) with an error naming its
// host:port; one that accepts the connection but does not answer fails
// it within RPCTimeout (or the context's deadline). Cancelling the
// context of an operation whose NameNode call is in flight closes the
// NameNode connection: other calls in flight on it at that moment fail
// too, with an error rather than a hang, and later operations use a new
// connection. Files already open keep the old connection, which the
// client re-dials after a 5 s back-off. An idempotent operation (Stat,
// ReadDir, MkdirAll, Open) that finds its NameNode connection lost is
// tried once more on a new one; Rename, Remove and RemoveAll are not.
//
// Rename uses HDFS's rename2 with OVERWRITE, so replacing an existing
// file is one atomic NameNode operation: readers see the old or the new
// file. An existing destination directory is replaced only if it is
// empty. Create with Overwrite deletes an existing file and then creates
// it, which is not atomic; write a temporary name and Rename instead when
// readers must never see a missing or partial file.
//
// A Writer fills one block at a time and, when a block is full, completes
// the file and reopens it for append before starting the next block (the
// client cannot retry a refused block allocation the way Hadoop's does).
// So a file being written may be seen, between blocks, as a complete file
// holding the blocks written so far: another reason to write under a
// temporary name and Rename.
//
// HDFS is safe for concurrent use. Close it when done.
type HDFS struct {
	opts HDFSOptions

	mu       sync.Mutex
	sess     *session      // the session new operations use; nil until needed
	sessions []*session    // every session not yet closed
	dialing  chan struct{} // closed when the session being dialled is ready
	closed   bool

	token atomic.Pointer[creds.Token] // the delegation token new connections use; see SetToken

	// saslQOPs, when DataNodes sign or encrypt, are the qualities of
	// protection datanodeSASL accepts (the client then does no SASL of
	// its own), and blockTok the block access token it authenticates
	// with. writing counts the files open for writing: where a dial for
	// a new block finds a token, if it has none.
	saslQOPs  []string
	blockTok  atomic.Pointer[blockToken]
	writingMu sync.Mutex
	writing   map[string]int
	// aesSuite is whether the cipher suites name AES/CTR/NoPadding.
	aesSuite bool
	// aesConns counts the DataNode connections that negotiated AES-CTR
	// streams in datanodeSASL.
	aesConns atomic.Int64
	// connects counts the sessions made; clockSkew moves the clock of
	// now, for tests.
	connects  atomic.Int64
	clockSkew atomic.Int64
}

var _ FileSystem = (*HDFS)(nil)

// NewHDFS returns an HDFS file system; it connects on first use.
func NewHDFS(opts HDFSOptions) (*HDFS, error) {
	if opts.Authority == "" || len(opts.Namenodes) == 0 {
		return nil, fmt.Errorf("dfs: HDFSOptions needs an Authority and Namenodes")
	}
	if opts.Kerberos {
		switch {
		case opts.Token != nil:
			d, err := creds.ParseDelegation(opts.Token.Identifier)
			if err != nil {
				return nil, fmt.Errorf("dfs: hdfs://%s: delegation token: %w", opts.Authority, err)
			}
			opts.User = d.Owner
		case opts.Login != nil:
			opts.User = kerberos.Name(opts.Login)
		default:
			return nil, fmt.Errorf("dfs: hdfs://%s uses Kerberos: no Kerberos login and no delegation token for it: %s", opts.Authority, kerberos.Hint)
		}
	}
	if opts.User == "" {
		return nil, fmt.Errorf("dfs: hdfs://%s: HDFSOptions needs a User", opts.Authority)
	}
	h := &HDFS{opts: opts.withDefaults()}
	h.token.Store(opts.Token)
	h.saslQOPs = protectedTransfer(h.opts)
	h.aesSuite = aesSuite(h.opts.EncryptCipherSuites)
	return h, nil
}

// SetToken makes connections to the NameNode made from now on
// authenticate with t, a newer delegation token of the same owner (one
// obtained before the old one's maximum lifetime ends). Connections
// already made keep going: the NameNode checks a token when a connection
// is made. It refuses a token of another owner, and an HDFS that does not
// use delegation tokens.
func (h *HDFS) SetToken(t creds.Token) error {
	if h.token.Load() == nil {
		return fmt.Errorf("dfs: hdfs://%s does not authenticate with a delegation token", h.opts.Authority)
	}
	d, err := creds.ParseDelegation(t.Identifier)
	if err != nil {
		return fmt.Errorf("dfs: hdfs://%s: delegation token: %w", h.opts.Authority, err)
	}
	if d.Owner != h.opts.User {
		return fmt.Errorf("dfs: hdfs://%s: a delegation token of %q cannot replace one of %q", h.opts.Authority, d.Owner, h.opts.User)
	}
	h.token.Store(&t)
	return nil
}

// URI returns "hdfs://authority" followed by the cleaned name.
func (h *HDFS) URI(name string) string {
	return "hdfs://" + h.opts.Authority + cleanHDFS(name)
}

func cleanHDFS(name string) string {
	if !strings.HasPrefix(name, "/") {
		name = "/" + name
	}
	return path.Clean(name)
}

// Close closes every connection. Files and Writers still open fail from
// then on; Close is idempotent.
func (h *HDFS) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.sess = nil
	all := h.sessions
	h.sessions = nil
	h.mu.Unlock()
	var errs []error
	for _, s := range all {
		if err := s.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("dfs: close hdfs://%s: %w", h.opts.Authority, errors.Join(errs...))
	}
	return nil
}

// Stat implements FileSystem.
func (h *HDFS) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	name = cleanHDFS(name)
	var fi fs.FileInfo
	err := h.call(ctx, "stat", h.URI(name), true, func(c *hdfs.Client) error {
		st, err := c.Stat(name)
		if err != nil {
			return err
		}
		fi = newHDFSInfo(st, name)
		return nil
	})
	return fi, err
}

// ReadDir implements FileSystem. A file is an error wrapping
// syscall.ENOTDIR.
func (h *HDFS) ReadDir(ctx context.Context, name string) ([]fs.FileInfo, error) {
	name = cleanHDFS(name)
	var infos []fs.FileInfo
	err := h.call(ctx, "readdir", h.URI(name), true, func(c *hdfs.Client) error {
		f, err := c.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		if !f.Stat().IsDir() {
			return syscall.ENOTDIR
		}
		list, err := f.Readdir(0)
		if err != nil {
			return err
		}
		infos = make([]fs.FileInfo, len(list))
		for i, st := range list {
			infos[i] = newHDFSInfo(st, path.Join(name, st.Name()))
		}
		return nil
	})
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name() < infos[j].Name() })
	return infos, err
}

// MkdirAll implements FileSystem. A file in the way is an error wrapping
// fs.ErrExist (the name itself) or syscall.ENOTDIR (a parent).
func (h *HDFS) MkdirAll(ctx context.Context, name string, perm fs.FileMode) error {
	name = cleanHDFS(name)
	return h.call(ctx, "mkdir", h.URI(name), true, func(c *hdfs.Client) error {
		return c.MkdirAll(name, perm.Perm())
	})
}

// Rename implements FileSystem (rename2 with OVERWRITE; see HDFS).
func (h *HDFS) Rename(ctx context.Context, oldname, newname string) error {
	oldname, newname = cleanHDFS(oldname), cleanHDFS(newname)
	return h.call(ctx, "rename", h.URI(oldname)+" -> "+h.URI(newname), false, func(c *hdfs.Client) error {
		return c.Rename(oldname, newname)
	})
}

// Remove implements FileSystem. A non-empty directory is an error
// wrapping syscall.ENOTEMPTY.
func (h *HDFS) Remove(ctx context.Context, name string) error {
	name = cleanHDFS(name)
	return h.call(ctx, "remove", h.URI(name), false, func(c *hdfs.Client) error {
		return c.Remove(name)
	})
}

// RemoveAll implements FileSystem. Removed files are deleted at once,
// not moved to the trash.
func (h *HDFS) RemoveAll(ctx context.Context, name string) error {
	name = cleanHDFS(name)
	if name == "/" {
		return pathError("removeall", h.URI(name), fmt.Errorf("refusing to remove the root: %w", fs.ErrInvalid))
	}
	return h.call(ctx, "removeall", h.URI(name), false, func(c *hdfs.Client) error {
		return c.RemoveAll(name)
	})
}

// Glob implements FileSystem.
func (h *HDFS) Glob(ctx context.Context, pattern string) ([]string, error) {
	if !strings.HasPrefix(pattern, "/") {
		pattern = "/" + pattern
	}
	return glob(ctx, h, pattern, "/")
}

// Open implements FileSystem. Opening asks the NameNode for the file's
// status; the first Read asks it for the block locations. Where the
// DataNodes sign or encrypt, opening a file with blocks also makes sure
// of a block access token to authenticate to them with.
func (h *HDFS) Open(ctx context.Context, name string) (File, error) {
	name = cleanHDFS(name)
	if h.opts.EncryptDataTransfer && !h.aesSuite {
		return nil, pathError("open", h.URI(name), ErrProtectedReads)
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, pathError("open", h.URI(name), err)
		}
		s, err := h.acquire(ctx)
		if err != nil {
			return nil, opError("open", h.URI(name), err)
		}
		var r *hdfs.FileReader
		lost, err := h.guarded(ctx, s, "open", h.URI(name), func(c *hdfs.Client) error {
			var err error
			r, err = c.Open(name)
			return err
		})
		if err == nil && h.saslQOPs != nil && r.Stat().Size() > 0 {
			if err = h.ensureBlockToken(ctx, name); err != nil {
				r.Close()
				err = pathError("open", h.URI(name), err)
			}
		}
		if err != nil {
			h.release(s)
			if lost && attempt == 0 {
				continue // once more, on a new connection
			}
			return nil, err
		}
		return &hdfsFile{stream: newStream(h, s, ctx, name), r: r, info: newHDFSInfo(r.Stat(), name)}, nil
	}
}

// Create implements FileSystem.
func (h *HDFS) Create(ctx context.Context, name string, opts CreateOptions) (Writer, error) {
	name = cleanHDFS(name)
	if opts.BlockSize < 0 || opts.Replication < 0 {
		return nil, pathError("create", h.URI(name), fmt.Errorf("negative block size %d or replication %d: %w", opts.BlockSize, opts.Replication, fs.ErrInvalid))
	}
	if err := ctx.Err(); err != nil {
		return nil, pathError("create", h.URI(name), err)
	}
	s, err := h.acquire(ctx)
	if err != nil {
		return nil, opError("create", h.URI(name), err)
	}
	var w *hdfs.FileWriter
	var bs int64
	_, err = h.guarded(ctx, s, "create", h.URI(name), func(c *hdfs.Client) error {
		var repl int
		bs, repl = opts.BlockSize, opts.Replication
		if bs == 0 || repl == 0 {
			d, err := c.ServerDefaults()
			if err != nil {
				return err
			}
			if bs == 0 {
				bs = d.BlockSize
			}
			if repl == 0 {
				repl = d.Replication
			}
		}
		if opts.Overwrite {
			st, err := c.Stat(name)
			switch {
			case err == nil && st.IsDir():
				return syscall.EISDIR
			case err == nil:
				if err := c.Remove(name); err != nil {
					return err
				}
			case !errors.Is(err, fs.ErrNotExist):
				return err
			}
		}
		var err error
		w, err = c.CreateFile(name, repl, bs, 0o644)
		return err
	})
	if err != nil {
		h.release(s)
		return nil, err
	}
	if bs <= 0 {
		w.Close()
		h.release(s)
		return nil, pathError("create", h.URI(name), fmt.Errorf("the NameNode reports block size %d", bs))
	}
	h.noteWriting(name, 1)
	return &hdfsWriter{stream: newStream(h, s, ctx, name), w: w, blockSize: bs}, nil
}
