package conf

import (
	"bytes"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func writeSite(t *testing.T, dir, name string, props ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("<?xml version=\"1.0\"?>\n<configuration>\n")
	for i := 0; i+1 < len(props); i += 2 {
		final := ""
		k := props[i]
		if strings.HasSuffix(k, "!") {
			k, final = strings.TrimSuffix(k, "!"), "<final>true</final>"
		}
		b.WriteString("  <property><name>" + k + "</name><value>" + props[i+1] + "</value>" + final + "</property>\n")
	}
	b.WriteString("</configuration>\n")
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestParseHadoopXML(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    []HadoopProperty
		wantErr string
	}{
		{
			name: "typical",
			in: `<?xml version="1.0" encoding="UTF-8"?>
<?xml-stylesheet type="text/xsl" href="configuration.xsl"?>
<!-- comment -->
<configuration>
  <property>
    <name> fs.defaultFS </name>
    <value>hdfs://nn:8020</value>
    <description>the default <b>fs</b></description>
  </property>
  <property><name>a</name><value> spaced </value><final>true</final></property>
  <property><name>empty</name><value/></property>
</configuration>`,
			want: []HadoopProperty{
				{Name: "fs.defaultFS", Value: "hdfs://nn:8020"},
				{Name: "a", Value: " spaced ", Final: true},
				{Name: "empty", Value: ""},
			},
		},
		{
			name: "entities and cdata",
			in:   `<configuration><property><name>k</name><value>a&amp;b<![CDATA[<c>]]></value></property></configuration>`,
			want: []HadoopProperty{{Name: "k", Value: "a&b<c>"}},
		},
		{
			name: "property without value or name is ignored",
			in:   `<configuration><property><name>novalue</name></property><property><value>noname</value></property></configuration>`,
			want: nil,
		},
		{
			name: "nested configuration",
			in:   `<configuration><configuration><property><name>k</name><value>v</value></property></configuration></configuration>`,
			want: []HadoopProperty{{Name: "k", Value: "v"}},
		},
		{name: "empty input", in: "", wantErr: "no <configuration>"},
		{name: "wrong root", in: `<conf><property><name>k</name><value>v</value></property></conf>`, wantErr: "root element is <conf>"},
		{name: "unclosed", in: `<configuration><property><name>k</name>`, wantErr: "invalid hadoop configuration xml"},
		{name: "mismatched", in: `<configuration><property></configuration>`, wantErr: "invalid hadoop configuration xml"},
		{name: "two roots", in: `<configuration/><configuration/>`, wantErr: "more than one root"},
		{name: "xinclude", in: `<configuration xmlns:xi="http://www.w3.org/2001/XInclude"><xi:include href="x.xml"/></configuration>`, wantErr: "xinclude"},
		{name: "too deep", in: "<configuration>" + strings.Repeat("<a>", 40) + strings.Repeat("</a>", 40) + "</configuration>", wantErr: "nested deeper"},
		{name: "too large", in: "<configuration>" + strings.Repeat(" ", MaxHadoopXMLBytes) + "</configuration>", wantErr: "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseHadoopXML(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				if !errors.Is(err, ErrHadoopXML) {
					t.Errorf("err %v does not wrap ErrHadoopXML", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestLoadHadoopConfPrecedence(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	hadoopConf := filepath.Join(root, "hadoop-conf")
	yarnConf := filepath.Join(root, "yarn-conf")
	home := filepath.Join(root, "home")
	homeConf := filepath.Join(home, "etc", "hadoop")

	// core-site.xml in HADOOP_CONF_DIR hides the one in HADOOP_HOME: files
	// are not merged across directories.
	writeSite(t, hadoopConf, "core-site.xml", "fs.defaultFS", "hdfs://nn1:9000", "final.key!", "core", "over", "core")
	writeSite(t, homeConf, "core-site.xml", "fs.defaultFS", "hdfs://home:1", "only.in.home", "x")
	// hdfs-site.xml only in YARN_CONF_DIR and HADOOP_HOME: YARN_CONF_DIR wins.
	writeSite(t, yarnConf, "hdfs-site.xml", "dfs.replication", "2", "final.key", "hdfs", "over", "hdfs")
	writeSite(t, homeConf, "hdfs-site.xml", "dfs.replication", "3")
	// yarn-site.xml only in HADOOP_HOME.
	writeSite(t, homeConf, "yarn-site.xml", "yarn.resourcemanager.address", "rm:8032", "over", "yarn")

	lookup := MapLookup(map[string]string{
		EnvHadoopConfDir: hadoopConf,
		EnvYARNConfDir:   yarnConf,
		EnvHadoopHome:    home,
	})
	hc, err := LoadHadoopConf(lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := HadoopConf{
		"fs.defaultFS":                 "hdfs://nn1:9000",
		"final.key":                    "core",
		"over":                         "yarn",
		"dfs.replication":              "2",
		"yarn.resourcemanager.address": "rm:8032",
	}
	if !reflect.DeepEqual(hc, want) {
		t.Errorf("got %v\nwant %v", hc, want)
	}
	if got := HadoopConfDirs(lookup); !reflect.DeepEqual(got, []string{hadoopConf, yarnConf, homeConf}) {
		t.Errorf("HadoopConfDirs = %v", got)
	}
}

func TestLoadHadoopConfMissingAndBad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		env     func(dir string) map[string]string
		wantErr string // substring; "" means success with want
		want    HadoopConf
	}{
		{
			name:  "nothing set",
			setup: func(*testing.T, string) {},
			env:   func(string) map[string]string { return nil },
			want:  HadoopConf{},
		},
		{
			name:  "missing dirs",
			setup: func(*testing.T, string) {},
			env: func(dir string) map[string]string {
				return map[string]string{EnvHadoopConfDir: filepath.Join(dir, "nope"), EnvHadoopHome: filepath.Join(dir, "nohome")}
			},
			want: HadoopConf{},
		},
		{
			name: "unparsable file is named",
			setup: func(t *testing.T, dir string) {
				if err := os.WriteFile(filepath.Join(dir, "hdfs-site.xml"), []byte("<configuration><property>"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			env:     func(dir string) map[string]string { return map[string]string{EnvHadoopConfDir: dir} },
			wantErr: "hdfs-site.xml",
		},
		{
			name: "a directory in place of a file is named",
			setup: func(t *testing.T, dir string) {
				if err := os.Mkdir(filepath.Join(dir, "core-site.xml"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			env:     func(dir string) map[string]string { return map[string]string{EnvHadoopConfDir: dir} },
			wantErr: "core-site.xml",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tt.setup(t, dir)
			hc, err := LoadHadoopConf(MapLookup(tt.env(dir)))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "conf: ") {
					t.Fatalf("err = %v, want a conf: error naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(hc, tt.want) {
				t.Errorf("got %v, want %v", hc, tt.want)
			}
		})
	}
}

func TestHadoopConfGet(t *testing.T) {
	t.Parallel()
	hc := HadoopConf{
		"hadoop.tmp.dir": "/tmp/hadoop-${user.name}",
		"user.name":      "alice",
		"dfs.data.dir":   "${hadoop.tmp.dir}/dfs/data",
		"unknown":        "${nope}/x",
		"self":           "${self}",
		"unterminated":   "${abc",
		"n":              " 42 ",
		"bad":            "4x",
	}
	tests := []struct {
		key    string
		want   string
		wantOK bool
	}{
		{"dfs.data.dir", "/tmp/hadoop-alice/dfs/data", true},
		{"unknown", "${nope}/x", true},
		{"self", "${self}", true},
		{"unterminated", "${abc", true},
		{"absent", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			got, ok := hc.Get(tt.key)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Get(%q) = %q, %v; want %q, %v", tt.key, got, ok, tt.want, tt.wantOK)
			}
		})
	}
	if n, err := hc.GetInt64("n", 1); n != 42 || err != nil {
		t.Errorf("GetInt64(n) = %d, %v", n, err)
	}
	if n, err := hc.GetInt64("absent", 7); n != 7 || err != nil {
		t.Errorf("GetInt64(absent) = %d, %v", n, err)
	}
	if _, err := hc.GetInt64("bad", 7); err == nil || !strings.Contains(err.Error(), "bad") {
		t.Errorf("GetInt64(bad) err = %v", err)
	}
	if got := hc.GetDefault("absent", "d"); got != "d" {
		t.Errorf("GetDefault = %q", got)
	}
}

func TestHadoopConfExpansionIsBounded(t *testing.T) {
	t.Parallel()
	// Each level doubles the length: without a bound this is 2^40 bytes.
	hc := HadoopConf{"v0": strings.Repeat("x", 1024)}
	for i := 1; i <= 40; i++ {
		hc["v"+strconv.Itoa(i)] = "${v" + strconv.Itoa(i-1) + "}${v" + strconv.Itoa(i-1) + "}"
	}
	v, _ := hc.Get("v40")
	if len(v) > 2*MaxHadoopXMLBytes {
		t.Errorf("expanded to %d bytes", len(v))
	}
}

func TestDefaultFS(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		hc   HadoopConf
		want string
	}{
		{"unset", nil, "file:///"},
		{"defaultFS", HadoopConf{"fs.defaultFS": " hdfs://nn:9000 "}, "hdfs://nn:9000"},
		{"deprecated name", HadoopConf{"fs.default.name": "hdfs://old:1"}, "hdfs://old:1"},
		{"new name wins", HadoopConf{"fs.default.name": "hdfs://old:1", "fs.defaultFS": "hdfs://new:2"}, "hdfs://new:2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.hc.DefaultFS(); got != tt.want {
				t.Errorf("DefaultFS = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHadoopUser(t *testing.T) {
	t.Parallel()
	login, err := user.Current()
	if err != nil {
		t.Skipf("no current OS user: %v", err)
	}
	tests := []struct {
		name   string
		lookup Lookup
		want   string
	}{
		{"HADOOP_USER_NAME", MapLookup(map[string]string{EnvHadoopUserName: " hdfs "}), "hdfs"},
		{"empty falls back to login", MapLookup(map[string]string{EnvHadoopUserName: ""}), login.Username},
		{"unset", MapLookup(nil), login.Username},
		{"nil lookup", nil, login.Username},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := HadoopConf(nil).User(tt.lookup)
			if err != nil || got != tt.want {
				t.Errorf("User = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestNamenodes(t *testing.T) {
	t.Parallel()
	hc := HadoopConf{
		"dfs.nameservices":                    "ns1",
		"dfs.ha.namenodes.ns1":                "nn1, nn2",
		"dfs.namenode.rpc-address.ns1.nn1":    "host1:8020",
		"dfs.namenode.rpc-address.ns1.nn2":    "host2:8020",
		"dfs.namenode.rpc-address.single":     "single-host:9000",
		"dfs.ha.namenodes.empty":              "",
		"dfs.namenode.rpc-address.empty.nn1x": "unused:1",
	}
	tests := []struct {
		authority string
		want      []string
	}{
		{"nn:9000", []string{"nn:9000"}},
		{"nn", []string{"nn:8020"}},
		{"[::1]", []string{"[::1]:8020"}},
		{"[::1]:9000", []string{"[::1]:9000"}},
		{"ns1", []string{"host1:8020", "host2:8020"}},
		{"single", []string{"single-host:9000"}},
		{"empty", nil},
		{"", nil},
	}
	for _, tt := range tests {
		t.Run(tt.authority, func(t *testing.T) {
			t.Parallel()
			if got := hc.Namenodes(tt.authority); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Namenodes(%q) = %q, want %q", tt.authority, got, tt.want)
			}
		})
	}
}

// FuzzParseHadoopXML checks that the parser never panics, returns either
// properties or an error wrapping ErrHadoopXML, and that what it accepts
// survives a round trip through a freshly written document.
func FuzzParseHadoopXML(f *testing.F) {
	f.Add([]byte(`<configuration><property><name>a</name><value>b</value><final>true</final></property></configuration>`))
	f.Add([]byte(`<?xml version="1.0"?><configuration><property><name> k </name><value/></property></configuration>`))
	f.Add([]byte(`<configuration><configuration><property><name>k</name><value>&lt;v&gt;</value></property></configuration></configuration>`))
	f.Add([]byte(`<configuration><property><name>k</name>`))
	f.Add([]byte(`<x/>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		props, err := ParseHadoopXML(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrHadoopXML) {
				t.Fatalf("error %v does not wrap ErrHadoopXML", err)
			}
			return
		}
		var b bytes.Buffer
		b.WriteString("<configuration>")
		for _, p := range props {
			if p.Name == "" {
				t.Fatalf("property with an empty name: %+v", p)
			}
			b.WriteString("<property><name>")
			xmlEscape(&b, p.Name)
			b.WriteString("</name><value>")
			xmlEscape(&b, p.Value)
			b.WriteString("</value>")
			if p.Final {
				b.WriteString("<final>true</final>")
			}
			b.WriteString("</property>")
		}
		b.WriteString("</configuration>")
		again, err := ParseHadoopXML(&b)
		if err != nil {
			t.Fatalf("re-parse of %q: %v", b.String(), err)
		}
		if len(again) != len(props) {
			t.Fatalf("round trip: %d properties, then %d", len(props), len(again))
		}
		for i := range props {
			if again[i] != props[i] {
				t.Fatalf("round trip: %+v became %+v", props[i], again[i])
			}
		}
	})
}

func xmlEscape(b *bytes.Buffer, s string) {
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '\r':
			b.WriteString("&#xD;")
		default:
			b.WriteRune(r)
		}
	}
}

func TestLoadHadoop(t *testing.T) {
	t.Parallel()
	good, bad := t.TempDir(), t.TempDir()
	site := `<configuration><property><name>fs.defaultFS</name><value>hdfs://nn:9000</value></property></configuration>`
	if err := os.WriteFile(filepath.Join(good, "core-site.xml"), []byte(site), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "core-site.xml"), []byte("<configuration><property>"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		env     map[string]string
		wantFS  string
		user    string
		wantErr string
	}{
		{"configuration and user", map[string]string{EnvHadoopConfDir: good, EnvHadoopUserName: "alice"}, "hdfs://nn:9000", "alice", ""},
		{"no configuration", map[string]string{EnvHadoopUserName: "bob"}, "file:///", "bob", ""},
		{"bad file named", map[string]string{EnvHadoopConfDir: bad, EnvHadoopUserName: "alice"}, "", "", filepath.Join(bad, "core-site.xml")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, err := LoadHadoop(MapLookup(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LoadHadoop: %v, want an error naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || h.Conf.DefaultFS() != tt.wantFS || h.User != tt.user {
				t.Fatalf("LoadHadoop = %q %q, %v; want %q %q", h.Conf.DefaultFS(), h.User, err, tt.wantFS, tt.user)
			}
		})
	}
}

func TestLoadHadoopSecurity(t *testing.T) {
	env := map[string]string{EnvKrb5CCName: "FILE:/tmp/cc", EnvKrb5Config: "/etc/k.conf", EnvHadoopTokenFile: "/c/tokens"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	s := LoadHadoopSecurity(HadoopConf{"hadoop.security.authentication": " Kerberos "}, lookup)
	if s != (HadoopSecurity{Kerberos: true, TokenFile: "/c/tokens", CCache: "/tmp/cc", Krb5Conf: "/etc/k.conf"}) {
		t.Errorf("got %+v", s)
	}
	s = LoadHadoopSecurity(HadoopConf{}, nil)
	if s.Kerberos || s.TokenFile != "" || s.CCache != "/tmp/krb5cc_"+strconv.Itoa(os.Getuid()) || s.Krb5Conf != "/etc/krb5.conf" {
		t.Errorf("defaults %+v", s)
	}
	env[EnvKrb5CCName] = "KEYRING:persistent:1000"
	if s = LoadHadoopSecurity(HadoopConf{}, lookup); s.CCache != "KEYRING:persistent:1000" {
		t.Errorf("a keyring cache became %q", s.CCache)
	}
}
