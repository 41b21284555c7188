package kube

import (
	"fmt"
	"os"

	"github.com/switchboard-io/switchboard"
)

// LeaseSuffix ends the name of every module's Lease: "<module>-lock".
const LeaseSuffix = "-lock"

// ResourceName returns the TinyModule name of a module: the name sanitised
// as the module SDK does (48 characters, keeping the tail).
func ResourceName(module string) (string, error) {
	return switchboard.SanitizeName(module)
}

// LeaseName returns the name of a module's election Lease,
// "<sanitised module>-lock", as the SDK names it.
func LeaseName(module string) (string, error) {
	n, err := ResourceName(module)
	if err != nil {
		return "", err
	}
	return n + LeaseSuffix, nil
}

// Identity returns this pod's leader-election identity: POD_NAME, else
// HOSTNAME, else the host name — used whole, never truncated or rewritten,
// so two pods whose names differ only at the end never share an identity.
// (The kernel host name of a pod is its name cut at 63 characters: the
// Deployment in deploy/ sets HOSTNAME from metadata.name for that reason.)
func Identity() (string, error) {
	for _, k := range []string{"POD_NAME", "HOSTNAME"} {
		if v := os.Getenv(k); v != "" {
			return v, nil
		}
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "", fmt.Errorf("kube: no identity: set POD_NAME or HOSTNAME to the pod name (%v)", err)
	}
	return h, nil
}
