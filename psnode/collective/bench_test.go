package collective_test

import (
	"context"
	"errors"

	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/collective"
)

func benchChild(ctx context.Context, n *psnode.Node, g *collective.Group) error {
	return errors.New("todo")
}
