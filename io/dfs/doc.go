// Package dfs is Spindle's view of a file system: one interface,
// FileSystem, in the shapes of package os with a context on every call,
// and two implementations, Local (package os) and HDFS (Hadoop's
// protocols, through github.com/colinmarc/hdfs/v2). A Resolver turns the
// URIs users write into a FileSystem and a name within it:
//
//	hdfs://host:port/p   HDFS at that NameNode (or HA nameservice)
//	hdfs:///p            HDFS at the NameNode of fs.defaultFS
//	file:///p, /p, p     the local file system
//
// # Usage
//
//	r, err := dfs.DefaultResolver(os.LookupEnv) // conf.LoadHadoop, then NewResolver
//	defer r.Close()
//	fsys, name, err := r.Resolve(ctx, "hdfs:///data/train/part-00000")
//	f, err := fsys.Open(ctx, name)
//	defer f.Close()
//
// # Writing a file all or nothing
//
// WriteAtomic (and WriteFile, for bytes in memory) writes a file under a
// temporary name beside it and renames it into place, removing the
// temporary file on any failure: checkpoints, model parts and manifests
// are all written this way, so a reader sees a whole file or none.
//
// # Errors
//
// Every error names the full URI of the path involved and matches
// fs.ErrNotExist, fs.ErrPermission and fs.ErrExist with errors.Is, on
// both implementations. Exceptions raised by Hadoop servers are
// *RemoteError values carrying the Java class. A NameNode that cannot be
// reached fails the operation within HDFSOptions.DialTimeout (or the
// context's deadline) with an error naming its host:port.
//
// # Kerberos
//
// On a cluster whose hadoop.security.authentication is kerberos, a
// Resolver reaches HDFS with the delegation tokens of a YARN container's
// credentials file, else with a Kerberos login (LoadCredentials). When a
// container's credentials announce newer tokens (RefreshOf: the
// ApplicationMaster of a job submitted with a keytab obtains them before
// the first ones reach their maximum lifetime), the Resolver reads them
// from the file named when they are due, and NameNode connections made
// afterwards use them (OnTokens tells of each attempt). HDFS can also
// obtain, renew and cancel delegation tokens with a Kerberos login.
//
// DataNodes are reached as dfs.data.transfer.protection asks. Where they
// sign or encrypt what they send (integrity, privacy), every DataNode
// connection goes through a SASL layer of this package's own,
// authenticated with a block access token it asks the NameNode for; the
// other settings use the HDFS client's. At privacy, with
// AES/CTR/NoPadding in HDFSOptions.EncryptCipherSuites, the layer
// negotiates AES-CTR streams as Hadoop's client does, and the DataNode's
// keys replace the layer's own cipher. Where they encrypt every block
// (HDFSOptions.EncryptDataTransfer), the HDFS client authenticates with a
// data encryption key it keeps; a NameNode session then takes no new
// operation once that key is about to expire, and the next one opens a
// new session with a new key. An open file moves to the new session at
// its next Read, opened again at its offset, and a Writer at its next
// block, so that neither needs the old key after it expires.
//
// A Read or ReadAt of an HDFS file that fails with nothing read opens the
// file again at its offset and tries once more, as Hadoop's client
// fetches the block locations again when a block access token has
// expired; a read whose data ends before the file's size is an error
// wrapping io.ErrUnexpectedEOF, never io.EOF.
//
// # Contexts
//
// Methods of FileSystem return when their context ends. The context
// passed to Open or Create also governs the returned File or Writer for
// its whole life, as a net.Conn's deadline does: each Read, Write or
// Close checks it first and is bounded by its deadline. On HDFS each such
// call is in addition bounded by HDFSOptions.IOTimeout, and a context
// cancelled (rather than timed out) while a DataNode read is blocked is
// noticed when that read returns, at the latest after IOTimeout.
package dfs
