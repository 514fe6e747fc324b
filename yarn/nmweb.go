package yarn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
)

// ContainerLog opens the log file name ("stdout", "stderr", …) of a
// container from its NodeManager's web services, whose address
// (host:port) the container report carries (Container.NodeHTTPAddress):
// GET http://ADDR/ws/v1/node/containerlogs/CONTAINER/NAME. The
// NodeManager serves the logs of a container while it runs and, after
// it ended, for as long as its application runs on the node. user is
// passed as user.name (pseudo authentication); "" leaves it out. A log
// or container the NodeManager does not know gives an error matching
// fs.ErrNotExist. The caller closes the returned body; ctx (and client's
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
		return resp.Body, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	msg := fmt.Sprintf("yarn: log %s of container %s from node manager %s: %s: %s", name, container, addr, resp.Status, strings.TrimSpace(string(b)))
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusBadRequest {
		return nil, fmt.Errorf("%s (%w)", msg, fs.ErrNotExist)
	}
	return nil, errors.New(msg)
}
