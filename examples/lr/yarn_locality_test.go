package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/tracker"
)

// TestHadoopYARNLocality: on the mini cluster, whose two nodes are two
// hosts (each with a DataNode and a NodeManager), a job whose input is one
// HDFS block, stored on one host, reads more of its shards node-locally
// than placing the workers at random would: the workers' asks name the
// host that stores the input, and the tracker hands each worker the shards
// stored on its host. It runs once with the input on each host, as the
// scheduler, left to itself, may well favour one of them.
func TestHadoopYARNLocality(t *testing.T) {
	c := hadooptest.Connect(t)
	data, err := os.ReadFile(filepath.Join(dataDir, "train.libsvm"))
	if err != nil {
		t.Fatal(err)
	}
	nms := strings.Split(c.Conf.GetDefault("spindle.minicluster.nodemanagers", ""), ",")
	var hosts []string
	for _, nm := range nms {
		if h, _, _ := strings.Cut(nm, ":"); h != "" && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) < 2 {
		t.Fatalf("the mini cluster's NodeManagers %q are on %d host(s); this test needs two", nms, len(hosts))
	}
	dir := c.TempDir(t)
	for i, host := range hosts {
		t.Run(host, func(t *testing.T) {
			in := uploadOnto(t, c, fmt.Sprintf("%s/train-%d.libsvm", dir, i), data, host)
			// What random placement would give: the share of
			// NodeManagers on the host that stores the input.
			random := 0.0
			for _, nm := range nms {
				if h, _, _ := strings.Cut(nm, ":"); h == host {
					random += 1 / float64(len(nms))
				}
			}
			out := fmt.Sprintf("hdfs://%s/model-%d", dir, i)
			r := runYARN(t, job.JobSpec{
				Name:        "lr-yarn-locality",
				Command:     []string{psLR, "--epochs", "1", "--async"},
				NumWorkers:  4,
				NumServers:  1,
				MaxAttempts: 1,
				Inputs:      []string{"hdfs://" + in},
				SplitSize:   256 << 10,
				Output:      out,
			}, nil)
			if r.err != nil || r.res.State != tracker.Succeeded {
				t.Fatalf("YARN job: %v %v", r.res.State, r.err)
			}
			tr := manifest(t, c, out)
			if tr.LocatedShards == 0 {
				t.Fatalf("manifest: no shard handed out with its hosts known (input on %s)", host)
			}
			share := float64(tr.NodeLocalShards) / float64(tr.LocatedShards)
			t.Logf("input on %s; NodeManagers %v; %d of %d shards node-local (%.2f), random placement %.2f",
				host, nms, tr.NodeLocalShards, tr.LocatedShards, share, random)
			// Clearly above: random placement's share varies from run to
			// run, so at least halfway from it to every shard.
			if want := (random + 1) / 2; share < want {
				t.Errorf("%d of %d shards node-local (%.2f): not clearly above random placement's %.2f, want %.2f or more (input on %s, NodeManagers %v)",
					tr.NodeLocalShards, tr.LocatedShards, share, random, want, host, nms)
			}
			if got, ok := r.res.Status.NodeLocalShare(); !ok || got != share {
				t.Errorf("ps-submit's summary gives a node-local share of %v (%v), the manifest %v", got, ok, share)
			}
		})
	}
}

// uploadOnto writes data to path as one HDFS block stored on host: the
// NameNode places each new block on one of the DataNodes of the writer's
// address (all of them here) at random, so it writes until one lands
// there, at most 20 times.
func uploadOnto(t *testing.T, c *hadooptest.Cluster, path string, data []byte, host string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var seen [][]string
	for try := 0; try < 20; try++ {
		c.WriteFile(t, path, data, dfs.CreateOptions{BlockSize: 256 << 20, Overwrite: true})
		blocks, err := dfs.NewLocator(c.Conf, c.User).Blocks(ctx, "hdfs://"+path)
		if err != nil || len(blocks) != 1 {
			t.Fatalf("blocks of %s: %v %v, want one", path, blocks, err)
		}
		if slices.Contains(blocks[0].Hosts, host) {
			return path
		}
		seen = append(seen, blocks[0].Hosts)
	}
	t.Fatalf("%s: 20 writes, none stored on %s (stored on %v)", path, host, seen)
	return ""
}
