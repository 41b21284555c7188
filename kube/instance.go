package kube

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/kube/types/v1alpha1"
)

// TypeModule is the instance type of a TinyModule that does not say
// otherwise.
const TypeModule = "module"

// Annotations that carry the instance fields a TinyModule has no place for,
// when a module is written through Catalog.Register.
const (
	AnnotationName         = "switchboard.io/name"
	AnnotationType         = "switchboard.io/type"
	AnnotationCapabilities = "switchboard.io/capabilities"
	AnnotationMetadata     = "switchboard.io/metadata"
	AnnotationComponents   = "switchboard.io/components"
)

// Metadata keys filled from the TinyModule and its Lease.
const (
	MetaModuleName = "module_name" // status.name, the module's own name
	MetaSDKVersion = "sdk_version" // status.sdkVersion
	MetaImage      = "image"       // spec.image
	MetaLeader     = "leader"      // the Lease's holder identity
	MetaNamespace  = "namespace"
)

// ReleaseGrace is how long a module whose leader released its Lease (a
// graceful step-down: client-go writes an empty holder and a 1 s duration)
// stays active, so that a handover to another replica, which takes the
// Lease within a retry period, does not make the module flicker out of every
// pool. If nobody takes the Lease over, the module is stale after it.
const ReleaseGrace = 2 * DefaultRetryPeriod

// leaseView is what liveness needs from a Lease.
type leaseView struct {
	holder string
	renew  time.Time
	ttl    time.Duration
}

func viewLease(l *coordinationv1.Lease) (leaseView, bool) {
	if l == nil {
		return leaseView{}, false
	}
	var v leaseView
	if l.Spec.HolderIdentity != nil {
		v.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime != nil {
		v.renew = l.Spec.RenewTime.Time
	} else if l.Spec.AcquireTime != nil {
		v.renew = l.Spec.AcquireTime.Time
	}
	if l.Spec.LeaseDurationSeconds != nil {
		v.ttl = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return v, true
}

// heldFor is how long after its renewal the Lease keeps its module active:
// its duration (dflt when it has none), and at least ReleaseGrace for a
// Lease released by a leader that stepped down (client-go writes no holder
// and a 1 s duration): its successor takes over within a retry period, and
// the module's Service address keeps answering meanwhile.
func (v leaseView) heldFor(dflt time.Duration) time.Duration {
	ttl := v.ttl
	if ttl <= 0 {
		ttl = dflt
	}
	if v.holder == "" {
		ttl = max(ttl, ReleaseGrace)
	}
	return ttl
}

// deadline is when the lease stops being held (zero when there is none).
func (v leaseView) deadline() time.Time {
	if v.renew.IsZero() {
		return time.Time{}
	}
	return v.renew.Add(v.ttl)
}

// listed reports whether a TinyModule is an instance at all: only once its
// leader has published an address (before that there is nothing to reach,
// and a module appears to watchers once, complete, instead of in steps).
func listed(tm *v1alpha1.TinyModule) bool { return tm.Status.Addr != "" }

// toInstance maps a TinyModule and its Lease (nil when there is none) to the
// instance every Switchboard interface sees. The module is active while it
// has an address and its Lease is held: LastSeen is the Lease's renew time
// and TTL its duration (ReleaseGrace for a released Lease). Without an
// address or a Lease the TTL is 0, so the instance is stale at once.
// Revision is the TinyModule's resourceVersion (revisionOf): the Lease's
// is not part of it, since every renewal writes the Lease.
func toInstance(tm *v1alpha1.TinyModule, l *coordinationv1.Lease, now time.Time) switchboard.Instance {
	ann := tm.Annotations
	in := switchboard.Instance{
		ID:           tm.Name,
		Name:         tm.Name,
		Type:         TypeModule,
		Address:      tm.Status.Addr,
		Version:      tm.Status.Version,
		RegisteredAt: tm.CreationTimestamp.Time,
		Revision:     revisionOf(tm.ResourceVersion),
		Weight:       weightOf(tm.Spec.Weight),
		Zone:         tm.Spec.Zone,
		Draining:     tm.Spec.Draining,
	}
	if n := ann[AnnotationName]; n != "" {
		in.Name = n
	} else if s, err := switchboard.SanitizeName(tm.Name); err == nil {
		in.Name = s
	}
	if t := ann[AnnotationType]; t != "" {
		in.Type = t
	}
	if c := ann[AnnotationCapabilities]; c != "" {
		_ = json.Unmarshal([]byte(c), &in.Capabilities)
	}
	md := map[string]string{}
	if m := ann[AnnotationMetadata]; m != "" {
		_ = json.Unmarshal([]byte(m), &md)
	}
	if tm.Status.Name != "" {
		md[MetaModuleName] = tm.Status.Name
	}
	if tm.Status.SDKVersion != "" {
		md[MetaSDKVersion] = tm.Status.SDKVersion
	}
	if tm.Spec.Image != "" {
		md[MetaImage] = tm.Spec.Image
	}
	md[MetaNamespace] = tm.Namespace
	lv, ok := viewLease(l)
	if ok && lv.holder != "" {
		md[MetaLeader] = lv.holder
	}
	in.Metadata = md
	if c := ann[AnnotationComponents]; c != "" {
		in.Components = json.RawMessage(c)
	} else if len(tm.Status.Components) > 0 {
		if b, err := json.Marshal(tm.Status.Components); err == nil {
			in.Components = b
		}
	}
	if ok {
		in.LastSeen = lv.renew
		in.TTL = lv.heldFor(0)
	}
	if in.Address == "" || !ok {
		in.TTL = 0
	}
	in.Stale = in.TTL == 0 || now.After(in.LastSeen.Add(in.TTL))
	return in
}

// weightOf is the instance weight of a spec.weight: absent (0) is
// switchboard.DefaultWeight, and one outside 1..MaxWeight (which the CRD's
// validation refuses, but a CRD without it would keep) is cut into it.
func weightOf(w int32) int {
	switch {
	case w <= 0:
		return switchboard.DefaultWeight
	case w > switchboard.MaxWeight:
		return switchboard.MaxWeight
	}
	return int(w)
}

// fromInstance writes the fields of a (normalised) instance onto tm: the
// address and version in its status, the metadata keys image, module_name
// and sdk_version in spec.image, status.name and status.sdkVersion, weight
// and zone in spec.weight and spec.zone (the default weight as no field, so
// that a registration that sets neither writes nothing a TinyModule CRD
// without them would refuse), the rest in annotations. Components that are
// a TinyModule component list go to status.components, anything else to an
// annotation. spec.draining is Drain's: it is left as it is.
func fromInstance(tm *v1alpha1.TinyModule, in switchboard.Instance) {
	if tm.Annotations == nil {
		tm.Annotations = map[string]string{}
	}
	ann := tm.Annotations
	set := func(k, v string) {
		if v == "" {
			delete(ann, k)
		} else {
			ann[k] = v
		}
	}
	if in.Name != tm.Name {
		set(AnnotationName, in.Name)
	} else {
		delete(ann, AnnotationName)
	}
	if in.Type != TypeModule {
		set(AnnotationType, in.Type)
	} else {
		delete(ann, AnnotationType)
	}
	caps := ""
	if len(in.Capabilities) > 0 {
		b, _ := json.Marshal(in.Capabilities)
		caps = string(b)
	}
	set(AnnotationCapabilities, caps)
	md := maps.Clone(in.Metadata)
	// The keys a TinyModule has fields for go there, so that they come
	// back from toInstance as registered; leader and namespace are the
	// Lease's and the object's, whatever the instance said.
	tm.Spec.Image = md[MetaImage]
	tm.Status.Name = md[MetaModuleName]
	tm.Status.SDKVersion = md[MetaSDKVersion]
	for _, k := range []string{MetaModuleName, MetaSDKVersion, MetaImage, MetaLeader, MetaNamespace} {
		delete(md, k)
	}
	mds := ""
	if len(md) > 0 {
		b, _ := json.Marshal(md)
		mds = string(b)
	}
	set(AnnotationMetadata, mds)
	tm.Spec.Weight = 0
	if in.Weight != switchboard.DefaultWeight {
		tm.Spec.Weight = int32(in.Weight)
	}
	tm.Spec.Zone = in.Zone
	tm.Status.Addr = in.Address
	tm.Status.Version = in.Version
	tm.Status.Components = nil
	delete(ann, AnnotationComponents)
	if len(in.Components) > 0 {
		var comps []v1alpha1.TinyModuleComponentStatus
		dec := json.NewDecoder(bytes.NewReader(in.Components))
		dec.DisallowUnknownFields()
		if trimmed := strings.TrimSpace(string(in.Components)); strings.HasPrefix(trimmed, "[") && dec.Decode(&comps) == nil {
			tm.Status.Components = comps
		} else {
			ann[AnnotationComponents] = string(in.Components)
		}
	}
}
