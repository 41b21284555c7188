package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TinyModuleSpec is the desired state of a module.
type TinyModuleSpec struct {
	// Image is the module's container image.
	// +optional
	Image string `json:"image,omitempty"`
	// Weight is the module's share of traffic among the instances of its
	// name, from 1 to 10000; absent, 100. Switchboard's picks, gRPC
	// resolver and connection pool spread calls in proportion to it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Weight int32 `json:"weight,omitempty"`
	// Zone is the module's locality, a token such as eu-west-1a: callers
	// may prefer the modules of their own zone.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`
	// +optional
	Zone string `json:"zone,omitempty"`
	// Draining takes the module out of rotation without stopping it: it
	// stays listed, and Switchboard's lookups, picks, resolver and pool
	// send it no new calls until it is cleared.
	// +optional
	Draining bool `json:"draining,omitempty"`
}

// TinyModuleStatus is what the module's leader publishes about it.
type TinyModuleStatus struct {
	// Addr is where the module is reached: host:port of its gRPC Service,
	// or nats://tinymodule.<module>.msg on the NATS wire.
	// +optional
	Addr string `json:"addr,omitempty"`
	// Name is the module's name as given by the module (before sanitising).
	// +optional
	Name string `json:"name,omitempty"`
	// Version is the module's version.
	// +optional
	Version string `json:"version,omitempty"`
	// SDKVersion is the version of the module library the module runs.
	// +optional
	SDKVersion string `json:"sdkVersion,omitempty"`
	// Components is the module's component catalog.
	// +optional
	Components []TinyModuleComponentStatus `json:"components,omitempty"`
}

// TinyModuleComponentStatus describes one component a module offers.
type TinyModuleComponentStatus struct {
	Name string `json:"name"`
	// +optional
	Description string `json:"description,omitempty"`
	// +optional
	Info string `json:"info,omitempty"`
	// +optional
	Tags []string `json:"tags,omitempty"`
	// +optional
	Ports []TinyModuleComponentPort `json:"ports,omitempty"`
}

// TinyModuleComponentPort is one port of a component, with its schema.
type TinyModuleComponentPort struct {
	Name string `json:"name"`
	// +optional
	Label string `json:"label,omitempty"`
	// Source is true for a port that emits messages (an output).
	// +optional
	Source bool `json:"source,omitempty"`
	// Position is where the port is drawn (0 top, 1 right, 2 bottom, 3 left).
	// +optional
	Position int `json:"position,omitempty"`
	// Schema is the port's JSON schema.
	// +optional
	Schema []byte `json:"schema,omitempty"`
}

// TinyModule is one module of the TinySystems fabric, registered by every
// replica of the module and described by its leader.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name="Addr",type=string,JSONPath=`.status.addr`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Draining",type=boolean,JSONPath=`.spec.draining`
// +kubebuilder:printcolumn:name="Weight",type=integer,JSONPath=`.spec.weight`,priority=1
// +kubebuilder:printcolumn:name="Zone",type=string,JSONPath=`.spec.zone`,priority=1
type TinyModule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec TinyModuleSpec `json:"spec,omitempty"`
	// +optional
	Status TinyModuleStatus `json:"status,omitempty"`
}

// TinyModuleList is a list of TinyModules.
//
// +kubebuilder:object:root=true
type TinyModuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TinyModule `json:"items"`
}
