package yarnam

import (
	"net/http"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/job/webauth"
)

// webFilter is the status page's guard: webauth.Proxy with o, or none
// (logged) when o is nil.
func webFilter(o *webauth.ProxyOptions, log *logrus.Entry) func(http.Handler) http.Handler {
	if o == nil {
		log.Warn("the status page is served to anyone who reaches it: no web proxy configured")
		return nil
	}
	return func(h http.Handler) http.Handler {
		p := webauth.Proxy(*o, h)
		log.WithFields(logrus.Fields{"proxy_hosts": o.Hosts, "proxy_addresses": webauth.Addrs(p),
			"proxy_base": o.URIBase}).Info("status page served through the ResourceManager's web proxy only")
		return p
	}
}
