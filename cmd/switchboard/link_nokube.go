//go:build nokube

package main

import (
	"context"
	"fmt"

	"github.com/switchboard-io/switchboard"
)

// Built with -tags nokube, the binary has no Kubernetes backend: kube://
// says so and how to get it, rather than that no such backend exists.
func init() {
	switchboard.RegisterBackend("kube", func(context.Context, switchboard.DSN, switchboard.Options) (switchboard.Catalog, error) {
		return nil, fmt.Errorf("%w: kube:// is left out of this switchboard (built with -tags nokube); build it without that tag", switchboard.ErrUnknownBackend)
	})
}
