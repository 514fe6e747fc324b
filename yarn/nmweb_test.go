package yarn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestContainerLogUnwrapsTheNodeManagersFormat(t *testing.T) {
	t.Parallel()
	content := "line 1\nline 2\n"
	wrapped := fmt.Sprintf("Container: container_1_0001_01_000002 on localhost:1234\nLogAggregationType: LOCAL\n====\nLogType:stdout\nLogLastModifiedTime:Mon Nov 23 22:24:45 +0000 2026\nLogLength:%d\nLogContents:\n%sEnd of LogType:stdout.\n****\n\n", len(content), content)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("user.name") != "alice" {
			http.Error(w, "no user", http.StatusForbidden)
			return
		}
		switch r.URL.Path {
		case "/ws/v1/node/containerlogs/container_1_0001_01_000002/stdout":
			io.WriteString(w, wrapped)
		case "/ws/v1/node/containerlogs/container_1_0001_01_000002/raw":
			io.WriteString(w, content)
		case "/ws/v1/node/containerlogs/container_1_0001_01_000002/bad":
			io.WriteString(w, "Container: c\nLogLength:x\nLogContents:\n")
		case "/ws/v1/node/containerlogs/container_1_0001_01_000002/broken":
			http.Error(w, "HTTP ERROR 500 javax.servlet.ServletException: no native code\nURI: /ws/v1/node/containerlogs\nSTATUS: 500\nCAUSED BY java.lang.RuntimeException", http.StatusInternalServerError)
		default:
			http.Error(w, "Cannot find this log on the local disk.", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	read := func(name string) (string, error) {
		rc, err := ContainerLog(context.Background(), srv.Client(), addr, "container_1_0001_01_000002", name, "alice")
		if err != nil {
			return "", err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return string(b), err
	}
	for _, name := range []string{"stdout", "raw"} {
		if got, err := read(name); err != nil || got != content {
			t.Errorf("%s: %q, %v; want %q", name, got, err, content)
		}
	}
	if _, err := read("bad"); err == nil || !strings.Contains(err.Error(), "LogLength:x") {
		t.Errorf("bad header: %v", err)
	}
	if _, err := read("stderr"); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "Cannot find this log") {
		t.Errorf("missing log: %v", err)
	}
	// A server's error page is quoted by its first line.
	if _, err := read("broken"); err == nil || !strings.HasSuffix(err.Error(), ": 500 Internal Server Error: HTTP ERROR 500 javax.servlet.ServletException: no native code") {
		t.Errorf("a failed answer: %v; want its first line only", err)
	}
	if _, err := ContainerLog(context.Background(), nil, addr, "../x", "stdout", ""); err == nil {
		t.Error("a malformed container id was accepted")
	}
}
