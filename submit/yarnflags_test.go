package submit

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestYARNApplicationFlags(t *testing.T) {
	t.Parallel()
	o := complete(t, nil, "--cluster", "yarn", "-n", "1")
	if o.AMMemoryMB != 512 || o.AMCores != 1 || o.MaxAppAttempts != 1 || o.Priority != 0 || o.TagList != nil ||
		o.AllocationTimeoutDuration != 10*time.Minute {
		t.Errorf("defaults: am %d MB %d cores, attempts %d, priority %d, tags %q, allocation timeout %v",
			o.AMMemoryMB, o.AMCores, o.MaxAppAttempts, o.Priority, o.TagList, o.AllocationTimeoutDuration)
	}
	o = complete(t, nil, "--cluster", "yarn", "-n", "1", "--am-memory", "1g", "--am-cores", "2", "--max-app-attempts", "3",
		"--priority", "5", "--tags", " nightly, ctr ,,", "--allocation-timeout", "90s", "prog")
	if o.AMMemoryMB != 1024 || o.AMCores != 2 || o.MaxAppAttempts != 3 || o.Priority != 5 ||
		!reflect.DeepEqual(o.TagList, []string{"nightly", "ctr"}) || o.AllocationTimeoutDuration != 90*time.Second {
		t.Errorf("parsed: am %d MB %d cores, attempts %d, priority %d, tags %q, allocation timeout %v",
			o.AMMemoryMB, o.AMCores, o.MaxAppAttempts, o.Priority, o.TagList, o.AllocationTimeoutDuration)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestYARNApplicationFlagErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"zero app attempts", []string{"--max-app-attempts", "0"}, "--max-app-attempts 0: need at least 1"},
		{"app attempts not a number", []string{"--max-app-attempts", "x"}, `--max-app-attempts "x": not a whole number`},
		{"negative priority", []string{"--priority", "-1"}, "--priority -1: must not be negative"},
		{"zero am cores", []string{"--am-cores", "0"}, "--am-cores 0: need at least 1"},
		{"bad am memory", []string{"--am-memory", "lots"}, `--am-memory "lots": want a size such as 512m`},
		{"bad allocation timeout", []string{"--allocation-timeout", "10"}, `--allocation-timeout "10": want a duration such as 30s or 10m`},
		{"zero allocation timeout", []string{"--allocation-timeout", "0s"}, `--allocation-timeout "0s": must be positive`},
		{"long tag", []string{"--tags", "a," + strings.Repeat("x", 101)}, "--tags \"a,x"},
		{"too many tags", []string{"--tags", "a,b,c,d,e,f,g,h,i,j,k"}, `--tags "a,b,c,d,e,f,g,h,i,j,k": 11 tags: at most 10`},
		{"non-ASCII tag", []string{"--tags", "café"}, `--tags "café": tag "café": only printable ASCII`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--cluster", "yarn", "-n", "1"}, append(tt.args, "prog")...)
			code, _, stderr := runMain(t, nil, args, noRun(t))
			if code != 2 || !strings.Contains(stderr, "ps-submit: "+tt.want) {
				t.Errorf("exit status %d, stderr %q; want 2 and %q", code, stderr, tt.want)
			}
		})
	}
	code, _, stderr := runMain(t, nil, []string{"--cluster", "yarn", "-n", "1", "--tags"}, noRun(t))
	if code != 2 || !strings.Contains(stderr, "--tags needs a value") {
		t.Errorf("--tags without a value: exit %d, stderr %q", code, stderr)
	}
}

func TestYARNApplicationFlagsDryRun(t *testing.T) {
	t.Parallel()
	_, stdout, _ := runMain(t, nil, []string{"--cluster", "yarn", "--dry-run", "-n", "1", "--am-memory", "768", "--am-cores", "2",
		"--max-app-attempts", "2", "--priority", "3", "--tags", "a,b", "--allocation-timeout", "2m", "prog"}, noRun(t))
	for _, want := range []string{"am-memory            768 MB", "am-cores             2", "max-app-attempts     2",
		"priority             3", "tags                 a,b", "allocation-timeout   2m0s"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, stdout)
		}
	}
}
