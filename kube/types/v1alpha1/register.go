package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group, Version and Resource of TinyModules.
const (
	Group    = "operator.tinysystems.io"
	Version  = "v1alpha1"
	Resource = "tinymodules"
	Kind     = "TinyModule"
)

// GroupVersion is operator.tinysystems.io/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// GroupVersionResource names the tinymodules resource.
var GroupVersionResource = GroupVersion.WithResource(Resource)

var (
	// SchemeBuilder registers the types of this package.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds TinyModule and TinyModuleList to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &TinyModule{}, &TinyModuleList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
