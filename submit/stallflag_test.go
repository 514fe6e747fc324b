package submit

import (
	"strings"
	"testing"
	"time"
)

// TestStallTimeoutFlag: --stall-timeout reaches the job and every task's
// environment (SPINDLE_STALL_TIMEOUT, seconds) when it is not the
// default; 0 waits for ever, and a value that is not a duration or is
// negative is a usage error naming the flag.
func TestStallTimeoutFlag(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		spec time.Duration
		env  string // in the dry run's tasks; "" for none
	}{
		{nil, 10 * time.Minute, ""},
		{[]string{"--stall-timeout", "90s"}, 90 * time.Second, "SPINDLE_STALL_TIMEOUT=90"},
		{[]string{"--stall-timeout", "0"}, -1, "SPINDLE_STALL_TIMEOUT=0"},
	} {
		args := append(append([]string{"-n", "1", "-s", "1"}, tt.args...), "prog")
		if got := complete(t, nil, args...).JobSpec().StallTimeout; got != tt.spec {
			t.Errorf("%q: JobSpec.StallTimeout %v, want %v", tt.args, got, tt.spec)
		}
		_, stdout, _ := runMain(t, nil, append([]string{"--dry-run"}, args...), noRun(t))
		if n := strings.Count(stdout, "SPINDLE_STALL_TIMEOUT"); tt.env == "" && n != 0 || tt.env != "" && strings.Count(stdout, tt.env) != 3 {
			t.Errorf("%q: the dry run's tasks have %d SPINDLE_STALL_TIMEOUT, want %q in each of the 3:\n%s", tt.args, n, tt.env, stdout)
		}
	}
	for value, want := range map[string]string{
		"-5m": `--stall-timeout "-5m": must not be negative (0 waits for ever)`,
		"x":   `--stall-timeout "x": want a duration such as 10m or 1h, or 0 to wait for ever`,
	} {
		code, _, stderr := runMain(t, nil, []string{"-n", "1", "-s", "1", "--stall-timeout", value, "prog"}, noRun(t))
		if code != 2 || !strings.Contains(stderr, "ps-submit: "+want) {
			t.Errorf("--stall-timeout %s: exit status %d, stderr %q; want 2 and %q", value, code, stderr, want)
		}
	}
}
