package local

import (
	"slices"
	"testing"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/job"
)

func TestBindCPUs(t *testing.T) {
	two := []int{0, 1}
	tests := []struct {
		name             string
		bind             CPUBind
		servers, workers int
		cpus             []int
		want             []int
	}{
		{"2 x 2 on 2 CPUs", CPUBindAuto, 2, 2, two, two},
		{"4 servers, 2 workers on 2 CPUs", CPUBindAuto, 4, 2, two, two},
		{"1 x 1 on 2 CPUs: one CPU would take both", CPUBindAuto, 1, 1, two, nil},
		{"1 server, 2 workers on 2 CPUs", CPUBindAuto, 1, 2, two, nil},
		{"3 x 3 on 2 CPUs: one CPU would take two pairs", CPUBindAuto, 3, 3, two, nil},
		{"2 x 2 on 4 CPUs", CPUBindAuto, 2, 2, []int{0, 1, 2, 3}, nil},
		{"no servers", CPUBindAuto, 0, 2, two, nil},
		{"1 x 1 on one CPU", CPUBindAuto, 1, 1, []int{3}, []int{3}},
		{"cores: always", CPUBindCores, 1, 1, two, two},
		{"none: never", CPUBindNone, 2, 2, two, nil},
		{"no CPUs known", CPUBindCores, 2, 2, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bindCPUs(tt.bind, job.JobSpec{NumServers: tt.servers, NumWorkers: tt.workers}, tt.cpus)
			if !slices.Equal(got, tt.want) {
				t.Errorf("bindCPUs(%v, %d servers, %d workers, %v) = %v, want %v", tt.bind, tt.servers, tt.workers, tt.cpus, got, tt.want)
			}
		})
	}
}

func TestCPUOfPairsServerAndWorkerOfARank(t *testing.T) {
	cpus := []int{2, 5}
	for _, tt := range []struct {
		task  job.Task
		cpu   int
		bound bool
	}{
		{job.Task{Role: conf.RoleServer, Rank: 0}, 2, true},
		{job.Task{Role: conf.RoleWorker, Rank: 0}, 2, true},
		{job.Task{Role: conf.RoleServer, Rank: 1}, 5, true},
		{job.Task{Role: conf.RoleWorker, Rank: 3}, 5, true},
		{job.Task{Role: conf.RoleScheduler}, 0, false},
	} {
		if cpu, bound := cpuOf(cpus, tt.task); cpu != tt.cpu || bound != tt.bound {
			t.Errorf("cpuOf(%v, %s) = %d, %v, want %d, %v", cpus, tt.task, cpu, bound, tt.cpu, tt.bound)
		}
	}
	if _, bound := cpuOf(nil, job.Task{Role: conf.RoleWorker}); bound {
		t.Error("a worker bound with no CPUs to bind to")
	}
}

func TestParseCPUBind(t *testing.T) {
	for _, b := range []CPUBind{CPUBindAuto, CPUBindNone, CPUBindCores} {
		if got, err := ParseCPUBind(b.String()); err != nil || got != b {
			t.Errorf("ParseCPUBind(%q) = %v, %v", b.String(), got, err)
		}
	}
	if _, err := ParseCPUBind("all"); err == nil {
		t.Error(`ParseCPUBind("all") did not fail`)
	}
}
