package yarn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// unwrapLog returns the content of a log as the NodeManager's web
// services serve it. Hadoop 3 puts the file between a header and a
// trailer:
//
//	Container: container_… on host:port
//	LogAggregationType: LOCAL
//	====================
//	LogType:stdout
//	LogLastModifiedTime:…
//	LogLength:17783
//	LogContents:
//	<LogLength bytes>End of LogType:stdout…
//	********************
//
// so the content is the LogLength bytes after the header; a body without
// the header is the content itself.
func unwrapLog(body io.ReadCloser) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(body, 4096)
	head, err := br.Peek(len("Container: "))
	if err != nil || string(head) != "Container: " {
		return readCloser{br, body}, nil
	}
	length := int64(-1)
	for i := 0; i < maxLogHeaderLines; i++ {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return nil, fmt.Errorf("log header: %w", err)
		}
		l := strings.TrimRight(string(line), "\r\n")
		if v, ok := strings.CutPrefix(l, "LogLength:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("log header: bad %q", l)
			}
			length = n
		}
		if l == "LogContents:" {
			if length < 0 {
				return nil, errors.New("log header: no LogLength")
			}
			return readCloser{io.LimitReader(br, length), body}, nil
		}
	}
	return nil, fmt.Errorf("log header: no LogContents within %d lines", maxLogHeaderLines)
}

// maxLogHeaderLines bounds the header unwrapLog reads.
const maxLogHeaderLines = 32

type readCloser struct {
	io.Reader
	io.Closer
}

// ContainerLog opens the log file name ("stdout", "stderr", …) of a
// container from its NodeManager's web services, whose address
// (host:port) the container report carries (Container.NodeHTTPAddress):
// GET http://ADDR/ws/v1/node/containerlogs/CONTAINER/NAME. The
// NodeManager serves the logs of a container while it runs and, after
// it ended, for as long as its application runs on the node. user is
// passed as user.name (pseudo authentication); "" leaves it out. A log
// or container the NodeManager does not know gives an error matching
// fs.ErrNotExist. The reader yields the file's content only (see
// unwrapLog). The caller closes the returned body; ctx (and client's
// timeout) bound the whole read.
func ContainerLog(ctx context.Context, client *http.Client, addr, container, name, user string) (io.ReadCloser, error) {
	if client == nil {
		client = http.DefaultClient
	}
	if addr == "" || container == "" || name == "" || strings.ContainsAny(container+name, "/?#") {
		return nil, fmt.Errorf("yarn: log %q of container %q on %q: missing or malformed", name, container, addr)
	}
	u := url.URL{Scheme: "http", Host: addr, Path: "/ws/v1/node/containerlogs/" + container + "/" + name}
	if user != "" {
		u.RawQuery = url.Values{"user.name": {user}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("yarn: log %s of container %s: %w", name, container, err)
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("yarn: log %s of container %s from node manager %s: %w", name, container, addr, err)
	}
	if resp.StatusCode == http.StatusOK {
		rc, err := unwrapLog(resp.Body)
		if err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("yarn: log %s of container %s from node manager %s: %w", name, container, addr, err)
		}
		return rc, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	msg := fmt.Sprintf("yarn: log %s of container %s from node manager %s: %s: %s", name, container, addr, resp.Status, firstLine(b))
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusBadRequest {
		return nil, fmt.Errorf("%s (%w)", msg, fs.ErrNotExist)
	}
	return nil, errors.New(msg)
}

// maxErrorLine bounds what an error quotes of a NodeManager's answer.
const maxErrorLine = 300

// firstLine is the first non-blank line of an error answer, at most
// maxErrorLine bytes: Jetty's error pages go on with the request's URI, the
// servlet and every cause of a Java exception, which would fill the
// user's screen.
func firstLine(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > maxErrorLine {
				l = strings.ToValidUTF8(l[:maxErrorLine], "") + "…"
			}
			return l
		}
	}
	return ""
}
