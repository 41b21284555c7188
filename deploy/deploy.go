// Package deploy holds what runs Switchboard outside a developer's shell:
// the Kubernetes manifests of a module deployment (crd/, rbac.yaml,
// deployment.yaml), of `switchboard serve` in a cluster (serve.yaml), and a
// systemd unit for serve (switchboard.service). It embeds the generated
// TinyModule CRD and the RBAC for programs and tests that install them. Its
// tests apply every manifest to a real API server and run the unit's
// command.
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
