package mem_test

import (
	"testing"

	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/psnode/transport/mem"
	"github.com/spindle-ps/spindle/psnode/transport/transporttest"
)

func TestConformance(t *testing.T) {
	net := mem.NewNetwork(1)
	transporttest.Run(t, func(t *testing.T) transport.Transport { return net.NewTransport() })
}
