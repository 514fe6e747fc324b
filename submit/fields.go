package submit

import (
	"regexp"
	"strings"
)

// fieldFlags maps the fields of job.JobSpec that library errors name onto
// ps-submit's flags.
var fieldFlags = map[string]string{
	"Command":            "command",
	"NumWorkers":         "--num-workers",
	"NumServers":         "--num-servers",
	"Collective":         "--num-servers 0",
	"Replicas":           "--replicas",
	"Env":                "--env",
	"ServerEnv":          "--server-env",
	"WorkerEnv":          "--worker-env",
	"Files":              "--files",
	"Archives":           "--archives",
	"BlacklistAfter":     "--blacklist-after",
	"MaxAttempts":        "--max-attempts",
	"Inputs":             "--input",
	"SplitSize":          "--split-size",
	"Output":             "--output",
	"Overwrite":          "--overwrite",
	"Resume":             "--resume",
	"CheckpointDir":      "--checkpoint-dir",
	"CheckpointInterval": "--checkpoint-interval",
	"CheckpointKeep":     "--checkpoint-keep",
	"WorkerMemoryMB":     "--worker-memory",
	"ServerMemoryMB":     "--server-memory",
	"WorkerCores":        "--worker-cores",
	"ServerCores":        "--server-cores",
	"AMMemoryMB":         "--am-memory",
	"AMCores":            "--am-cores",
}

// fieldWords rewrites the field names that library errors use in their
// explanations ("set Overwrite to replace it") into flags.
var fieldWords = func() *strings.Replacer {
	pairs := []string{
		"set Overwrite", "pass --overwrite",
		"set Resume", "pass --resume",
		"set CheckpointDir and CheckpointInterval", "give --checkpoint-dir and --checkpoint-interval",
		"needs CheckpointDir", "needs --checkpoint-dir",
	}
	for _, f := range []string{"CheckpointInterval", "CheckpointDir", "CheckpointKeep", "MaxAttempts"} {
		pairs = append(pairs, f, fieldFlags[f])
	}
	return strings.NewReplacer(pairs...)
}()

// fieldPrefix matches the start of a job.FieldError's message: "job:
// NumWorkers 0: need at least 1".
var fieldPrefix = regexp.MustCompile(`job: ([A-Z][A-Za-z]*)\b`)

// withFlags is err's message as ps-submit shows it: the JobSpec fields
// it names (job.FieldError, and the explanations of the job's own
// errors, which may come from the ApplicationMaster as text) are named
// by their flags.
func withFlags(err error) string {
	text := fieldPrefix.ReplaceAllStringFunc(err.Error(), func(m string) string {
		if flag, ok := fieldFlags[strings.TrimPrefix(m, "job: ")]; ok {
			return flag
		}
		return m
	})
	return fieldWords.Replace(text)
}
