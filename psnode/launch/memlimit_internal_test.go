package launch

import (
	"io"
	"math"
	"runtime/debug"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
)

// TestLimitMemory checks the Go memory limit a task sets from its
// container's size: three quarters of it on YARN, nothing without a
// size, nothing over GOMEMLIMIT, which the runtime has applied already,
// and nothing in a local job, whose sizes bound no container.
func TestLimitMemory(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(before)
	lg := logrus.New()
	lg.Out = io.Discard
	log := logrus.NewEntry(lg)
	tests := []struct {
		name    string
		cluster string
		memMB   int
		env     map[string]string
		want    int64
	}{
		{"container of 1 GB", "yarn", 1024, nil, 768 << 20},
		{"container of 8 GB", "yarn", 8192, nil, 6 << 30},
		{"no size", "yarn", 0, nil, math.MaxInt64},
		{"GOMEMLIMIT set", "yarn", 1024, map[string]string{"GOMEMLIMIT": "2GiB"}, math.MaxInt64},
		{"GOMEMLIMIT empty", "yarn", 2048, map[string]string{"GOMEMLIMIT": ""}, 1536 << 20},
		{"local job", "local", 1024, nil, math.MaxInt64},
	}
	for _, tt := range tests {
		debug.SetMemoryLimit(math.MaxInt64)
		c := conf.Default()
		c.PS.JobCluster, c.Job.TaskMemoryMB = tt.cluster, tt.memMB
		limitMemory(c, conf.MapLookup(tt.env), log)
		if got := debug.SetMemoryLimit(-1); got != tt.want {
			t.Errorf("%s: limit %d, want %d", tt.name, got, tt.want)
		}
	}
}
