package submit

import (
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/submit/yarnclient"
)

func TestParseAppCommand(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args    []string
		id      string
		help    bool
		wantErr string
		login   yarnclient.Login
	}{
		{args: []string{"application_1700000000000_0001"}, id: "application_1700000000000_0001"},
		{args: []string{" application_1700000000000_0042 "}, id: "application_1700000000000_0042"},
		{args: []string{"--help"}, help: true},
		{args: []string{"application_1700000000000_0001", "-h"}, help: true},
		{args: nil, wantErr: "missing the application id"},
		{args: []string{"app_1"}, wantErr: `"app_1" is not an application id`},
		{args: []string{"application_x_1"}, wantErr: "is not an application id"},
		{args: []string{"application_1700000000000_0001", "application_1700000000000_0002"}, wantErr: "want one application id, got 2"},
		{args: []string{"--force", "application_1700000000000_0001"}, wantErr: "unknown flag --force"},
		{args: []string{"application_1700000000000_0001", "--principal", "alice@EXAMPLE.COM", "--keytab=/k/alice.keytab"}, id: "application_1700000000000_0001",
			login: yarnclient.Login{Principal: "alice@EXAMPLE.COM", Keytab: "/k/alice.keytab"}},
		{args: []string{"application_1700000000000_0001", "--principal=alice@EXAMPLE.COM"}, wantErr: "--principal and --keytab go together"},
		{args: []string{"application_1700000000000_0001", "--keytab"}, wantErr: "flag --keytab needs a value"},
	} {
		id, login, help, err := parseAppCommand("kill", tt.args)
		if err == nil && login != tt.login {
			t.Errorf("%q: login %+v, want %+v", tt.args, login, tt.login)
		}
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "kill: ") {
				t.Errorf("%q: err %v, want one starting kill: and containing %q", tt.args, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("%q: %v", tt.args, err)
		case help != tt.help:
			t.Errorf("%q: help %v, want %v", tt.args, help, tt.help)
		case !tt.help && id.String() != tt.id:
			t.Errorf("%q: id %v, want %s", tt.args, id, tt.id)
		}
	}
}

func TestAppCommandUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"status"}, "status: missing the job"},
		{[]string{"logs"}, "logs: missing the job"},
		{[]string{"logs", "x", "--task", "mapper:1"}, `logs: --task: task "mapper:1"`},
		{[]string{"logs", "x", "--task"}, "logs: flag --task needs a value"},
		{[]string{"status", "x", "--follow"}, "status: unknown flag --follow"},
		{[]string{"kill"}, "kill: missing the job"},
		{[]string{"kill", "application_12"}, `kill: "application_12" is not an application id`},
		{[]string{"kill", "x", "--task", "worker:0"}, "kill: unknown flag --task"},
		{[]string{"status", "a", "b"}, "status: want one job, got 2"},
	} {
		code, stdout, stderr := runMain(t, nil, tt.args, noRun(t))
		if code != 2 || stdout != "" || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "--help") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", tt.args, code, stdout, stderr, tt.want)
		}
	}
}

func TestAppCommandHelp(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"status", "kill", "logs"} {
		code, stdout, stderr := runMain(t, nil, []string{cmd, "--help"}, noRun(t))
		if code != 0 || stderr != "" || !strings.Contains(stdout, "ps-submit status JOB") || !strings.Contains(stdout, "ps-submit kill JOB [--jobs-dir DIR]") ||
			!strings.Contains(stdout, "ps-submit logs JOB [--task ROLE:RANK] [--follow]") {
			t.Errorf("%s --help: exit %d, stdout %q, stderr %q", cmd, code, stdout, stderr)
		}
	}
}

func TestHelpMentionsSubcommandsAndDetach(t *testing.T) {
	t.Parallel()
	code, stdout, _ := runMain(t, nil, []string{"--help"}, noRun(t))
	for _, w := range []string{"ps-submit status JOB", "ps-submit logs JOB [--task ROLE:RANK] [--follow]", "ps-submit kill JOB", "--detach", "--jobs-dir"} {
		if code != 0 || !strings.Contains(stdout, w) {
			t.Errorf("--help: exit %d, output lacks %q", code, w)
		}
	}
}

func TestDetachFlag(t *testing.T) {
	t.Parallel()
	if o := complete(t, nil, "--cluster", "yarn", "--detach", "-n", "1", "prog"); !o.Detach || o.Validate() != nil {
		t.Errorf("--cluster yarn --detach: Detach %v, Validate %v", o.Detach, o.Validate())
	}
	if o := complete(t, nil, "--cluster", "yarn", "-n", "1", "prog"); o.Detach {
		t.Error("Detach set without --detach")
	}
	code, _, stderr := runMain(t, nil, []string{"--detach", "-n", "1", "prog"}, noRun(t))
	if code != 2 || !strings.Contains(stderr, "--detach: only with --cluster yarn") {
		t.Errorf("--detach with local: exit %d, stderr %q", code, stderr)
	}
	// A job's command named like a subcommand is given after --.
	if o := complete(t, nil, "-n", "1", "--", "status"); len(o.Command) != 1 || o.Command[0] != "status" {
		t.Errorf("-- status: command %q", o.Command)
	}
}
