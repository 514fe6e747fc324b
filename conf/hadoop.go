package conf

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The environment variables that locate Hadoop's client configuration,
// name the Hadoop user and locate its credentials.
const (
	EnvHadoopConfDir   = "HADOOP_CONF_DIR"
	EnvYARNConfDir     = "YARN_CONF_DIR"
	EnvHadoopHome      = "HADOOP_HOME"
	EnvHadoopUserName  = "HADOOP_USER_NAME"
	EnvHadoopTokenFile = "HADOOP_TOKEN_FILE_LOCATION"
	EnvKrb5CCName      = "KRB5CCNAME"
	EnvKrb5Config      = "KRB5_CONFIG"
)

// hadoopConfFiles are the files LoadHadoopConf reads, in the order their
// properties are applied.
var hadoopConfFiles = [...]string{"core-site.xml", "hdfs-site.xml", "yarn-site.xml"}

// Limits on Hadoop XML input. Client configuration files are a few KiB; the
// limits only stop a wrong or hostile file from exhausting memory.
const (
	// MaxHadoopXMLBytes is the largest configuration file accepted.
	MaxHadoopXMLBytes = 4 << 20
	// maxXMLDepth bounds element nesting.
	maxXMLDepth = 32
	// maxSubstDepth bounds ${var} expansion, as Hadoop's Configuration
	// does (MAX_SUBST = 20).
	maxSubstDepth = 20
)

// DefaultHDFSPort is the NameNode RPC port used when an hdfs:// URI names
// a host without a port (Hadoop's HdfsClientConfigKeys.DFS_NAMENODE_RPC_PORT_DEFAULT).
const DefaultHDFSPort = 8020

// HadoopConf is a Hadoop client configuration: property name → value, as
// read from the *-site.xml files. A nil HadoopConf is an empty one; read it
// with Get so that ${var} references are expanded.
type HadoopConf map[string]string

// LoadHadoopConf reads core-site.xml, hdfs-site.xml and yarn-site.xml the
// way Hadoop's client does, looking for each file in these directories:
//
//  1. $HADOOP_CONF_DIR
//  2. $YARN_CONF_DIR
//  3. $HADOOP_HOME/etc/hadoop
//
// Each file is taken from the first directory that has it, as a Java
// client takes it from the first classpath entry that has it: files are
// not merged across directories. The files found are then applied in the
// order core-site, hdfs-site, yarn-site; a later file overrides a property
// of an earlier one unless that property is marked <final>true</final>.
//
// An unset variable or a directory that does not exist is not an error
// (the result may be empty); a file that cannot be read or parsed is,
// and the error names the file. Hadoop's *-default.xml values are not
// included: callers supply their own defaults.
func LoadHadoopConf(lookup Lookup) (HadoopConf, error) {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	dirs := HadoopConfDirs(lookup)
	hc := HadoopConf{}
	final := map[string]bool{}
	for _, name := range hadoopConfFiles {
		for _, dir := range dirs {
			p := filepath.Join(dir, name)
			props, err := readHadoopXMLFile(p)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			for _, pr := range props {
				if final[pr.Name] {
					continue
				}
				hc[pr.Name] = pr.Value
				if pr.Final {
					final[pr.Name] = true
				}
			}
			break
		}
	}
	return hc, nil
}

// HadoopConfDirs returns the directories LoadHadoopConf searches, in order
// of precedence, without duplicates and without checking that they exist.
func HadoopConfDirs(lookup Lookup) []string {
	var dirs []string
	add := func(d string) {
		d = strings.TrimSpace(d)
		if d == "" {
			return
		}
		d = filepath.Clean(d)
		for _, x := range dirs {
			if x == d {
				return
			}
		}
		dirs = append(dirs, d)
	}
	if v, ok := lookup(EnvHadoopConfDir); ok {
		add(v)
	}
	if v, ok := lookup(EnvYARNConfDir); ok {
		add(v)
	}
	if v, ok := lookup(EnvHadoopHome); ok && strings.TrimSpace(v) != "" {
		add(filepath.Join(strings.TrimSpace(v), "etc", "hadoop"))
	}
	return dirs
}

func readHadoopXMLFile(path string) ([]HadoopProperty, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("conf: read %s: %w", path, err)
	}
	defer f.Close()
	props, err := ParseHadoopXML(f)
	if err != nil {
		return nil, fmt.Errorf("conf: %s: %w", path, err)
	}
	return props, nil
}

// HadoopProperty is one <property> of a Hadoop configuration file.
type HadoopProperty struct {
	Name  string
	Value string
	Final bool
}

// ErrHadoopXML is wrapped by every error ParseHadoopXML returns for input
// that is not a valid Hadoop configuration document.
var ErrHadoopXML = errors.New("conf: invalid hadoop configuration xml")

// ParseHadoopXML parses one Hadoop configuration document:
//
//	<configuration>
//	  <property>
//	    <name>fs.defaultFS</name>
//	    <value>hdfs://nn:8020</value>
//	    <final>true</final>            (optional)
//	    <description>…</description>   (optional, ignored)
//	  </property>
//	  …
//	</configuration>
//
// It reads at most MaxHadoopXMLBytes. As in Hadoop, property names are
// trimmed and values are not, a <property> without a <name> or without a
// <value> is ignored, and nested <configuration> elements are read too.
// XInclude (<xi:include>) is not supported and is an error rather than
// silently missing properties. Properties are returned in document order;
// a later duplicate wins unless an earlier one is final (LoadHadoopConf
// applies that rule).
func ParseHadoopXML(r io.Reader) ([]HadoopProperty, error) {
	lr := &io.LimitedReader{R: r, N: MaxHadoopXMLBytes + 1}
	d := xml.NewDecoder(lr)
	d.Strict = true
	var (
		props   []HadoopProperty
		stack   []string // open elements
		inProp  bool
		cur     HadoopProperty
		hasName bool
		hasVal  bool
		text    strings.Builder
		sawRoot bool
	)
	for {
		tok, err := d.Token()
		if lr.N <= 0 {
			return nil, fmt.Errorf("%w: larger than %d bytes", ErrHadoopXML, MaxHadoopXMLBytes)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrHadoopXML, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			if t.Name.Space != "" && name == "include" {
				return nil, fmt.Errorf("%w: xinclude is not supported", ErrHadoopXML)
			}
			if len(stack) >= maxXMLDepth {
				return nil, fmt.Errorf("%w: elements nested deeper than %d", ErrHadoopXML, maxXMLDepth)
			}
			if len(stack) == 0 {
				if sawRoot {
					return nil, fmt.Errorf("%w: more than one root element", ErrHadoopXML)
				}
				if name != "configuration" {
					return nil, fmt.Errorf("%w: root element is <%s>, want <configuration>", ErrHadoopXML, name)
				}
				sawRoot = true
			}
			parent := ""
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			switch {
			case name == "property" && parent == "configuration" && !inProp:
				inProp = true
				cur, hasName, hasVal = HadoopProperty{}, false, false
			case inProp && parent == "property":
				text.Reset()
			}
			stack = append(stack, name)
		case xml.EndElement:
			name := t.Name.Local
			stack = stack[:len(stack)-1] // the decoder has checked nesting
			parent := ""
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			switch {
			case inProp && parent == "property":
				switch name {
				case "name":
					cur.Name, hasName = strings.TrimSpace(text.String()), true
				case "value":
					cur.Value, hasVal = text.String(), true
				case "final":
					cur.Final = strings.TrimSpace(text.String()) == "true"
				}
				text.Reset()
			case inProp && name == "property" && parent == "configuration":
				inProp = false
				if hasName && hasVal && cur.Name != "" {
					props = append(props, cur)
				}
			}
		case xml.CharData:
			if inProp && len(stack) >= 2 && stack[len(stack)-2] == "property" {
				text.Write(t)
			} else if len(stack) == 0 && len(strings.TrimSpace(string(t))) > 0 {
				return nil, fmt.Errorf("%w: text outside the root element", ErrHadoopXML)
			}
		}
	}
	if !sawRoot {
		return nil, fmt.Errorf("%w: no <configuration> element", ErrHadoopXML)
	}
	return props, nil
}

// Get returns the value of a property with ${name} references to other
// properties expanded (up to 20 levels, as Hadoop does; a reference to an
// unset property is left as written). ok reports whether the property is set.
func (hc HadoopConf) Get(key string) (string, bool) {
	v, ok := hc[key]
	if !ok {
		return "", false
	}
	return hc.expand(v), true
}

// GetDefault returns Get(key), or def when the property is unset.
func (hc HadoopConf) GetDefault(key, def string) string {
	if v, ok := hc.Get(key); ok {
		return v
	}
	return def
}

// GetInt64 returns a property parsed as an integer (trimmed, as Hadoop's
// getLong does), or def when the property is unset or empty. A value that
// does not parse is an error naming the property.
func (hc HadoopConf) GetInt64(key string, def int64) (int64, error) {
	v, ok := hc.Get(key)
	if !ok || strings.TrimSpace(v) == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return def, fmt.Errorf("conf: hadoop property %s=%q: not an integer", key, v)
	}
	return n, nil
}

func (hc HadoopConf) expand(v string) string {
	for range maxSubstDepth {
		i := strings.Index(v, "${")
		if i < 0 {
			return v
		}
		changed := false
		var b strings.Builder
		rest := v
		for {
			i := strings.Index(rest, "${")
			if i < 0 {
				b.WriteString(rest)
				break
			}
			j := strings.IndexByte(rest[i+2:], '}')
			if j < 0 {
				b.WriteString(rest)
				break
			}
			name := rest[i+2 : i+2+j]
			b.WriteString(rest[:i])
			if val, ok := hc[name]; ok && name != "" {
				b.WriteString(val)
				changed = true
			} else {
				b.WriteString(rest[i : i+3+j])
			}
			rest = rest[i+3+j:]
			if b.Len() > MaxHadoopXMLBytes {
				return v // runaway expansion: give up, keep the last value
			}
		}
		if !changed {
			return v
		}
		v = b.String()
	}
	return v
}

// DefaultFS returns fs.defaultFS (or its deprecated name fs.default.name),
// trimmed, or Hadoop's default "file:///" when neither is set.
func (hc HadoopConf) DefaultFS() string {
	for _, k := range []string{"fs.defaultFS", "fs.default.name"} {
		if v, ok := hc.Get(k); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
	}
	return "file:///"
}

// User returns the Hadoop user a client acts as with simple
// authentication: $HADOOP_USER_NAME when lookup finds it non-empty,
// otherwise the login name of the current OS user. lookup may be nil.
func (hc HadoopConf) User(lookup Lookup) (string, error) {
	if lookup != nil {
		if v, ok := lookup(EnvHadoopUserName); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v), nil
		}
	}
	u, err := user.Current()
	if err != nil {
		return "", fmt.Errorf("conf: hadoop user: %s is unset and the login name is unknown: %w", EnvHadoopUserName, err)
	}
	if u.Username == "" {
		return "", fmt.Errorf("conf: hadoop user: %s is unset and the login name is empty", EnvHadoopUserName)
	}
	return u.Username, nil
}

// Namenodes returns the RPC addresses (host:port) of the NameNodes behind
// the authority of an hdfs:// URI. An authority with a port is returned
// as is; an HA nameservice listed in dfs.nameservices (or with a
// dfs.ha.namenodes.<ns> entry) maps to the dfs.namenode.rpc-address.<ns>.<nn>
// values; a bare host gets DefaultHDFSPort. The result is nil when the
// authority is empty or a nameservice has no addresses.
func (hc HadoopConf) Namenodes(authority string) []string {
	authority = strings.TrimSpace(authority)
	if authority == "" {
		return nil
	}
	if ids, ok := hc.Get("dfs.ha.namenodes." + authority); ok {
		var addrs []string
		for _, id := range strings.Split(ids, ",") {
			id = strings.TrimSpace(id)
			if id == "" {
				continue
			}
			if a, ok := hc.Get("dfs.namenode.rpc-address." + authority + "." + id); ok && strings.TrimSpace(a) != "" {
				addrs = append(addrs, strings.TrimSpace(a))
			}
		}
		return addrs
	}
	if a, ok := hc.Get("dfs.namenode.rpc-address." + authority); ok && strings.TrimSpace(a) != "" {
		return []string{strings.TrimSpace(a)}
	}
	if hasPort(authority) {
		return []string{authority}
	}
	return []string{authority + ":" + strconv.Itoa(DefaultHDFSPort)}
}

// hasPort reports whether a host[:port] authority names a port
// ("[::1]:8020" does, "[::1]" and "nn" do not).
func hasPort(a string) bool {
	i := strings.LastIndexByte(a, ':')
	return i >= 0 && i > strings.LastIndexByte(a, ']')
}

// Keys returns the property names, sorted.
func (hc HadoopConf) Keys() []string {
	keys := make([]string, 0, len(hc))
	for k := range hc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Hadoop is what a Hadoop client starts from: the configuration, the
// user it acts as and how it proves who it is.
type Hadoop struct {
	Conf HadoopConf
	// User is the simple-authentication user. With Kerberos the cluster
	// takes the user from the credentials instead.
	User     string
	Security HadoopSecurity
}

// HadoopSecurity is where a client finds its credentials for a secured
// cluster (hadoop.security.authentication=kerberos): a delegation-token
// file (inside a YARN container), a keytab named by flags, or a Kerberos
// ticket cache.
type HadoopSecurity struct {
	// Kerberos is true when hadoop.security.authentication is kerberos.
	Kerberos bool
	// TokenFile is $HADOOP_TOKEN_FILE_LOCATION: the credentials file a
	// NodeManager writes for a container ("" outside one).
	TokenFile string
	// CCache is the ticket cache: $KRB5CCNAME without its FILE: prefix,
	// else /tmp/krb5cc_<uid>. Other cache types (KEYRING:, KCM:, DIR:)
	// are kept with their prefix, for the login to refuse by name.
	CCache string
	// Krb5Conf is $KRB5_CONFIG, else /etc/krb5.conf.
	Krb5Conf string
	// Principal and Keytab log in from a keytab instead of the ticket
	// cache; flags set them (ps-submit --principal/--keytab), never the
	// environment.
	Principal, Keytab string
}

// RPCProtection is hadoop.rpc.protection as a list, in its order:
// authentication, integrity or privacy (authentication by default, as
// Hadoop's).
func (hc HadoopConf) RPCProtection() []string {
	var out []string
	for _, p := range strings.Split(hc.GetDefault("hadoop.rpc.protection", "authentication"), ",") {
		if p = strings.ToLower(strings.TrimSpace(p)); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// LoadHadoopSecurity reads the security settings of hc and the
// environment variables Hadoop and Kerberos clients read.
func LoadHadoopSecurity(hc HadoopConf, lookup Lookup) HadoopSecurity {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	env := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	s := HadoopSecurity{
		Kerberos:  strings.EqualFold(strings.TrimSpace(hc.GetDefault("hadoop.security.authentication", "simple")), "kerberos"),
		TokenFile: env(EnvHadoopTokenFile),
		CCache:    env(EnvKrb5CCName),
		Krb5Conf:  env(EnvKrb5Config),
	}
	if rest, ok := strings.CutPrefix(s.CCache, "FILE:"); ok {
		s.CCache = rest
	}
	if s.CCache == "" {
		s.CCache = fmt.Sprintf("/tmp/krb5cc_%d", os.Getuid())
	}
	if s.Krb5Conf == "" {
		s.Krb5Conf = "/etc/krb5.conf"
	}
	return s
}

// LoadHadoop finds the Hadoop configuration the Hadoop way
// (LoadHadoopConf) and the user (HadoopConf.User: $HADOOP_USER_NAME or
// the login) through lookup, which may be nil. Every client of HDFS or
// YARN starts here.
func LoadHadoop(lookup Lookup) (Hadoop, error) {
	hc, err := LoadHadoopConf(lookup)
	if err != nil {
		return Hadoop{}, err
	}
	user, err := hc.User(lookup)
	if err != nil {
		return Hadoop{}, err
	}
	return Hadoop{Conf: hc, User: user, Security: LoadHadoopSecurity(hc, lookup)}, nil
}
