package kube

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/switchboard-io/switchboard"
)

// The traffic state of a module lives in its TinyModule's spec: weight,
// zone and draining (see v1alpha1.TinyModuleSpec). The kubelet's probes
// judge a pod's health, so kube:// stores no active checks and is no
// switchboard.HealthSetter: a registration with a check is refused.

var _ switchboard.Drainer = (*Catalog)(nil)

// refuseCheck is the error of a registration that carries a check.
func refuseCheck(c *switchboard.Check) error {
	return switchboard.NewFieldError(switchboard.ErrInvalid, "check", c.Target,
		"kube:// stores no checks: the kubelet's liveness and readiness probes judge a module's pods")
}

// errOldCRD says the cluster's TinyModule CRD has no traffic fields.
var errOldCRD = errors.New("the cluster's TinyModule CRD (tinymodules.operator.tinysystems.io) has no such field: " +
	"it is older than this Switchboard (or another program's); kubectl apply -f deploy/crd/")

var unknownField = regexp.MustCompile(`unknown field "([^"]*)"`)

// crdErr turns the refusal of a strict write by a CRD that lacks a field
// (400 for a create or an update, 422 for a patch, both saying "strict
// decoding error: unknown field") into errOldCRD naming the field; other
// errors are returned as they are.
func crdErr(err error) error {
	if err == nil || !apierrors.IsBadRequest(err) && !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "strict decoding error") || !strings.Contains(err.Error(), "unknown field") {
		return err
	}
	field := "a field"
	if m := unknownField.FindStringSubmatch(err.Error()); m != nil {
		field = m[1]
	}
	return fmt.Errorf("%s: %w", field, errOldCRD)
}

// Drain sets (draining true) or clears spec.draining of the TinyModule id
// with a merge patch, and returns the module as Get does. Setting the
// state it already has writes nothing (the same revision, no event). A
// change is one update of the TinyModule, so every watcher sees one
// EventUpdated at its new resourceVersion. ErrNotFound when there is no
// such TinyModule (an id that cannot name one included), or it has
// published no address yet. A cluster whose CRD has no spec.draining
// fails with an error that says to apply deploy/crd, and nothing is
// written.
func (k *Catalog) Drain(ctx context.Context, id string, draining bool) (switchboard.Instance, error) {
	if err := k.check(); err != nil {
		return switchboard.Instance{}, err
	}
	notFound := func() (switchboard.Instance, error) {
		return switchboard.Instance{}, fmt.Errorf("kube: drain %q: %w", id, switchboard.ErrNotFound)
	}
	if validID(id) != nil {
		return notFound()
	}
	tm, err := k.c.getModule(ctx, id)
	if objectMissing(err) {
		return notFound()
	} else if err != nil {
		return switchboard.Instance{}, apiErr("drain "+id, err)
	}
	if !listed(tm) {
		return notFound()
	}
	if tm.Spec.Draining != draining {
		// A merge patch of the one field: it neither needs nor disturbs
		// the rest of the object, and one that finds the field already so
		// (a concurrent drain) is a no-op for the API server too.
		patch := `{"spec":{"draining":null}}`
		if draining {
			patch = `{"spec":{"draining":true}}`
		}
		tm, err = k.c.patchModule(ctx, id, []byte(patch))
		if isNotFound(err) {
			return notFound()
		}
		if err != nil {
			return switchboard.Instance{}, apiErr("drain "+id, crdErr(err))
		}
		if tm.Spec.Draining != draining {
			// Only a CRD that prunes unknown fields without telling could
			// do this; a strict write of such a CRD fails above.
			return switchboard.Instance{}, fmt.Errorf("kube: drain %s: spec.draining: %w", id, errOldCRD)
		}
	}
	return k.withLease(ctx, "drain", tm)
}
