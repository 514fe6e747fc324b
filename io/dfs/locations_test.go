package dfs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/io/dfs"
)

// answer is a NameNode's GETFILEBLOCKLOCATIONS answer for a file of two
// blocks.
const answer = `{"BlockLocations":{"BlockLocation":[
{"topologyPaths":["/rack1/10.0.0.5:9866","/rack2/10.0.0.6:9866"],"corrupt":false,"cachedHosts":[],"names":["10.0.0.5:9866","10.0.0.6:9866"],"offset":0,"hosts":["dn5.example","dn6.example"],"length":1048576,"storageTypes":["DISK","DISK"]},
{"topologyPaths":["/default-rack/127.0.0.1:41707"],"names":["127.0.0.1:41707"],"offset":1048576,"hosts":["127.0.0.1"],"length":902848}]}}`

func TestParseBlockLocations(t *testing.T) {
	t.Parallel()
	got, err := dfs.ParseBlockLocations([]byte(answer))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d blocks, want 2: %+v", len(got), got)
	}
	b := got[0]
	if b.Offset != 0 || b.Length != 1048576 || strings.Join(b.Hosts, ",") != "dn5.example,dn6.example,10.0.0.5,10.0.0.6" ||
		strings.Join(b.Racks, ",") != "/rack1,/rack2" {
		t.Errorf("block 0 = %+v", b)
	}
	if b := got[1]; b.Offset != 1048576 || strings.Join(b.Hosts, ",") != "127.0.0.1" || strings.Join(b.Racks, ",") != "/default-rack" {
		t.Errorf("block 1 = %+v", b)
	}
	for _, bad := range []string{"", "{", `{"BlockLocations":{"BlockLocation":[{"offset":-1}]}}`, `{"BlockLocations":7}`} {
		if _, err := dfs.ParseBlockLocations([]byte(bad)); err == nil {
			t.Errorf("ParseBlockLocations(%q) took it", bad)
		}
	}
}

func FuzzParseBlockLocations(f *testing.F) {
	f.Add([]byte(answer))
	f.Add([]byte(`{"BlockLocations":{"BlockLocation":[{"names":["nohostport"],"topologyPaths":["norack"]}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		locs, err := dfs.ParseBlockLocations(b)
		if err != nil {
			return
		}
		for _, l := range locs {
			if l.Offset < 0 || l.Length < 0 {
				t.Errorf("negative range %+v", l)
			}
			for _, h := range l.Hosts {
				if h == "" {
					t.Errorf("an empty host in %+v", l)
				}
			}
		}
	})
}

// TestHadoopBlockLocations: the NameNode tells which DataNode holds each
// block of a file written in small blocks.
func TestHadoopBlockLocations(t *testing.T) {
	c := hadooptest.Connect(t)
	dir := c.TempDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := c.FS.Create(ctx, dir+"/blocks", dfs.CreateOptions{BlockSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(strings.Repeat("x", 2500))); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	locs, err := dfs.NewLocator(c.Conf, c.User).Blocks(ctx, c.FS.URI(dir+"/blocks"))
	if err != nil {
		t.Fatal(err)
	}
	if len(locs) != 3 {
		t.Fatalf("%d blocks, want 3: %+v", len(locs), locs)
	}
	for i, l := range locs {
		if l.Offset != int64(i)*1024 || len(l.Hosts) == 0 {
			t.Errorf("block %d: %+v", i, l)
		}
	}
	if _, err := dfs.NewLocator(c.Conf, c.User).Blocks(ctx, c.FS.URI(dir+"/missing")); err == nil {
		t.Errorf("locations of a missing file")
	}
}
