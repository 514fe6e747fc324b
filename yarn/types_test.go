package yarn

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/spindle-ps/spindle/internal/hadoop/hrpc"
)

func TestApplicationIDString(t *testing.T) {
	tests := []struct {
		name string
		id   ApplicationID
		s    string
	}{
		{"padded", ApplicationID{1700000000000, 7}, "application_1700000000000_0007"},
		{"wide", ApplicationID{1, 123456}, "application_1_123456"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.id.String(); got != tt.s {
				t.Errorf("String() = %q, want %q", got, tt.s)
			}
			got, err := ParseApplicationID(tt.s)
			if err != nil || got != tt.id {
				t.Errorf("ParseApplicationID(%q) = %v, %v", tt.s, got, err)
			}
		})
	}
	for _, bad := range []string{"", "application_", "application_1", "app_1_2", "application_x_1", "application_1_-2"} {
		if _, err := ParseApplicationID(bad); err == nil {
			t.Errorf("ParseApplicationID(%q) succeeded", bad)
		}
	}
}

func TestRemoteErrorIs(t *testing.T) {
	err := wrapErr("getApplicationReport", &hrpc.RemoteError{Class: "org.apache.hadoop.yarn.exceptions.ApplicationNotFoundException", Message: "no"})
	if !errors.Is(err, ErrApplicationNotFound) || !errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		t.Errorf("%v: wrong Is mapping", err)
	}
	err = wrapErr("submitApplication", &hrpc.RemoteError{Class: "org.apache.hadoop.security.AccessControlException"})
	if !errors.Is(err, fs.ErrPermission) || errors.Is(err, ErrApplicationNotFound) {
		t.Errorf("%v: wrong Is mapping", err)
	}
}
