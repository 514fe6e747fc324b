package yarnam

import (
	"strings"
	"testing"
)

// TestTidyDiagnostics: what a NodeManager reports of a completed
// container keeps what it says beyond the exit status, once.
func TestTidyDiagnostics(t *testing.T) {
	t.Parallel()
	exited := "[2026-11-28 20:38:19.935]Container exited with a non-zero exit code 65. Error file: prelaunch.err.\n" +
		"Last 4096 bytes of prelaunch.err :\n" +
		"Last 4096 bytes of stderr :\n" +
		"ps-lr train: epoch 0: records: line 1500 (byte 223532): malformed record\n\n\n"
	for _, tc := range []struct {
		name, in, want string
	}{
		{
			// Hadoop 3.4's report of a process that exited 65: the part
			// about the exit twice, and the launch's part that restates
			// the container and the code.
			name: "an exit",
			in: "[2026-11-28 20:38:19.918]Exception from container-launch.\n" +
				"Container id: container_1795898290479_0001_01_000004\nExit code: 65\n\n" + exited + exited,
			want: "Container exited with a non-zero exit code 65. Error file: prelaunch.err.\n" +
				"Last 4096 bytes of stderr :\n" +
				"ps-lr train: epoch 0: records: line 1500 (byte 223532): malformed record",
		},
		{
			name: "a launch that failed with more to say",
			in: "[2026-11-28 20:38:19.918]Exception from container-launch.\nContainer id: c_1\nExit code: 1\n" +
				"Exception message: Launch container failed\nShell output: main : command provided 1\n",
			want: "Exception message: Launch container failed\nShell output: main : command provided 1",
		},
		{
			// The monitor's kill: its parts follow each other on a line.
			name: "over its memory",
			in: "[2026-11-28 21:00:00.001]Container [pid=42,containerID=c_2] is running 1MB beyond the 'PHYSICAL' memory limit. Killing container.\n" +
				"Dump of the process-tree for c_2 :\n\t|- 42 lr\n" +
				"[2026-11-28 21:00:00.002]Container killed on request. Exit code is 143[2026-11-28 21:00:00.003]Container exited with a non-zero exit code 143. \n" +
				"Last 4096 bytes of stdout :\n\nLast 4096 bytes of stderr :\n",
			want: "Container [pid=42,containerID=c_2] is running 1MB beyond the 'PHYSICAL' memory limit. Killing container.\n" +
				"Dump of the process-tree for c_2 :\n\t|- 42 lr\n" +
				"Container killed on request. Exit code is 143\n" +
				"Container exited with a non-zero exit code 143.",
		},
		{
			// The task's own lines stay whatever they say.
			name: "output like the launch's part",
			in:   "[2026-11-28 21:00:00.003]Container exited with a non-zero exit code 1.\nLast 4096 bytes of stderr :\nExit code: 1\nContainer id: mine\n",
			want: "Container exited with a non-zero exit code 1.\nLast 4096 bytes of stderr :\nExit code: 1\nContainer id: mine",
		},
		{name: "none", in: " \n", want: ""},
		{name: "plain text", in: "Container preempted by scheduler", want: "Container preempted by scheduler"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tidyDiagnostics(tc.in); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
	// A long report keeps its end, from a line's start.
	long := strings.Repeat("a line of the task's output\n", 200) + "the last line"
	got := tidyDiagnostics(long)
	if len(got) > maxDiagnostics+len("…\n") || !strings.HasPrefix(got, "…\na line") || !strings.HasSuffix(got, "\nthe last line") {
		t.Errorf("a long report became %d bytes: %.60q…%q", len(got), got, got[max(0, len(got)-30):])
	}
}
