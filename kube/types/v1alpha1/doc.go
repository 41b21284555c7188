// Package v1alpha1 holds the TinyModule custom resource of the module SDK
// (group operator.tinysystems.io, version v1alpha1): the Go types, their
// generated deep copies, and the scheme they register in.
//
// The CRD manifest in deploy/crd is generated from these types:
//
//	go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 \
//	    object paths=./kube/types/... crd:crdVersions=v1 output:crd:dir=./deploy/crd
//
// +kubebuilder:object:generate=true
// +groupName=operator.tinysystems.io
package v1alpha1
