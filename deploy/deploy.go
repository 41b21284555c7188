// Package deploy holds the Kubernetes manifests of a module deployment
// (crd/, rbac.yaml, deployment.yaml) and embeds the generated TinyModule CRD
// for programs and tests that install it.
package deploy

import _ "embed"

// TinyModuleCRD is crd/operator.tinysystems.io_tinymodules.yaml, generated
// by controller-gen from kube/types/v1alpha1.
//
//go:embed crd/operator.tinysystems.io_tinymodules.yaml
var TinyModuleCRD []byte

// RBAC is rbac.yaml: the ServiceAccount, Role and RoleBinding a module's
// pods need.
//
//go:embed rbac.yaml
var RBAC []byte
