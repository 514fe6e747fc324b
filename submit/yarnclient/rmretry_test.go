package yarnclient

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/yarn"
)

// TestRMRetryOf: YARN's client settings, their defaults, and an error
// that names a bad one.
func TestRMRetryOf(t *testing.T) {
	r, err := rmRetryOf(conf.HadoopConf{})
	if err != nil || r.interval != 30*time.Second || r.maxWait != 15*time.Minute {
		t.Errorf("defaults: %+v, %v; want 30s and 15m", r, err)
	}
	r, err = rmRetryOf(conf.HadoopConf{"yarn.resourcemanager.connect.retry-interval.ms": "200",
		"yarn.resourcemanager.connect.max-wait.ms": "60000"})
	if err != nil || r.interval != 200*time.Millisecond || r.maxWait != time.Minute {
		t.Errorf("set: %+v, %v; want 200ms and 1m", r, err)
	}
	for _, bad := range []string{"soon", "0", "-5"} {
		_, err := rmRetryOf(conf.HadoopConf{"yarn.resourcemanager.connect.max-wait.ms": bad})
		if err == nil || !strings.Contains(err.Error(), "yarn.resourcemanager.connect.max-wait.ms") {
			t.Errorf("max-wait %q: error %v, want one naming the setting", bad, err)
		}
	}
}

// TestLostRMError: the error names the ResourceManager, the setting, and
// the application with the commands that follow and stop it.
func TestLostRMError(t *testing.T) {
	cause := errors.New("connection refused")
	id := yarn.ApplicationID{ClusterTimestamp: 1795814866239, ID: 7}
	err := error(&lostRMError{addr: "rm.example:8032", id: id, wait: 15 * time.Minute, err: cause})
	for _, want := range []string{"rm.example:8032", "15m0s", "yarn.resourcemanager.connect.max-wait.ms",
		"connection refused", "ps-submit status " + id.String(), "ps-submit kill " + id.String()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if !errors.Is(err, cause) {
		t.Error("the error does not wrap its cause")
	}
}
