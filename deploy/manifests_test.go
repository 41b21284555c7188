package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/switchboard-io/switchboard/kube/kubetestenv"
)

// manifests are the Kubernetes manifests of deploy/, in the order they
// are applied (the CRD first).
func manifests(t *testing.T) []string {
	t.Helper()
	crds, err := filepath.Glob("crd/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rest, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return append(crds, rest...)
}

// TestManifestsApply creates every object of deploy/'s manifests on a real
// kube-apiserver with strict field validation, so a misspelt or misplaced
// field, or an object of a kind the server does not know, fails here.
func TestManifestsApply(t *testing.T) {
	srv := kubetestenv.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(srv.Config)
	dyn := dynamic.NewForConfigOrDie(srv.Config)
	dc := memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(srv.Config))
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(dc)

	applied := map[string]*unstructured.Unstructured{}
	for _, file := range manifests(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var obj unstructured.Unstructured
			if err := dec.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", file, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			gvk := obj.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				// A kind registered by an earlier manifest (the CRD) is
				// learnt once discovery is read again.
				dc.Invalidate()
				m, err = waitMapping(ctx, mapper, dc, gvk)
			}
			if err != nil {
				t.Fatalf("%s: %s %s: %v", file, gvk, obj.GetName(), err)
			}
			var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
			if ns := obj.GetNamespace(); ns != "" {
				ensureNamespace(ctx, t, cs, ns)
				ri = dyn.Resource(m.Resource).Namespace(ns)
			}
			if _, err := ri.Create(ctx, &obj, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
				t.Fatalf("%s: creating %s %s: %v", file, gvk.Kind, obj.GetName(), err)
			}
			applied[file+" "+gvk.Kind+" "+obj.GetName()] = &obj
		}
	}
	for _, want := range []string{
		"serve.yaml Deployment switchboard", "serve.yaml Service switchboard",
		"deployment.yaml Deployment example-module", "rbac.yaml Role switchboard-module",
	} {
		if applied[want] == nil {
			t.Errorf("no %s among the objects applied", want)
		}
	}

	// What the server stored is what the server guide says it runs.
	d, err := cs.AppsV1().Deployments("switchboard").Get(ctx, "switchboard", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if got := strings.Join(c.Args, " "); got != "serve --listen :7400" {
		t.Errorf("serve's args = %q", got)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("serve's readiness probe = %+v, want GET /healthz", c.ReadinessProbe)
	}
	svc, err := cs.CoreV1().Services("switchboard").Get(ctx, "switchboard", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 7400 || svc.Spec.Selector["app"] != "switchboard" {
		t.Errorf("serve's Service = %+v", svc.Spec)
	}
}

func waitMapping(ctx context.Context, mapper *restmapper.DeferredDiscoveryRESTMapper, dc discovery.CachedDiscoveryInterface, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	for {
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err == nil {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
		dc.Invalidate()
		mapper.Reset()
	}
}

func ensureNamespace(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TestSystemdUnit runs the unit's command as systemd would (its working
// directory, its environment, an environment file that moves the server to
// a free port), checks that the server answers /healthz, and stops it with
// the unit's KillSignal: it must exit 0 within TimeoutStopSec.
func TestSystemdUnit(t *testing.T) {
	unit := parseUnit(t, "switchboard.service")
	svc := unit["Service"]
	if svc == nil {
		t.Fatal("no [Service] section")
	}
	start := strings.Fields(svc["ExecStart"])
	if len(start) < 2 || start[0] != "/usr/local/bin/switchboard" || start[1] != "serve" {
		t.Fatalf("ExecStart = %q, want /usr/local/bin/switchboard serve …", svc["ExecStart"])
	}
	if svc["WorkingDirectory"] != "/var/lib/"+svc["StateDirectory"] {
		t.Errorf("WorkingDirectory %q is not the StateDirectory %q: the default SQLite file would land elsewhere",
			svc["WorkingDirectory"], svc["StateDirectory"])
	}
	if svc["KillSignal"] != "SIGTERM" {
		t.Errorf("KillSignal = %q", svc["KillSignal"])
	}
	stop, err := time.ParseDuration(svc["TimeoutStopSec"])
	if err != nil {
		t.Fatalf("TimeoutStopSec: %v", err)
	}

	bin := filepath.Join(t.TempDir(), "switchboard")
	build := exec.Command("go", "build", "-o", bin, "../cmd/switchboard")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the CLI: %v\n%s", err, out)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	env = append(env, strings.Fields(svc["Environment"])...)
	// The environment file, read after Environment=, moves the server.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	env = append(env, "SWITCHBOARD_HTTP_LISTEN="+addr)

	cmd := exec.Command(bin, start[1:]...)
	cmd.Dir = t.TempDir()
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "listening on http://"+addr) {
				said = true
				listening <- true
			}
		}
		if !said {
			listening <- false
		}
		done <- cmd.Wait()
	}()
	if !<-listening {
		t.Fatalf("serve exited without listening on %s: %v\n%s", addr, <-done, stderr.String())
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %s", resp.Status)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(stop):
		cmd.Process.Kill()
		t.Fatalf("serve did not stop within TimeoutStopSec (%s) of SIGTERM", stop)
	}
	if _, err := os.Stat(filepath.Join(cmd.Dir, ".data", "switchboard.db")); err != nil {
		t.Errorf("the default catalog is not in the working directory: %v", err)
	}
}

// parseUnit reads a systemd unit: section → key → value (repeated keys
// joined by spaces, as Environment= lines add up).
func parseUnit(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	var sec map[string]string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			sec = map[string]string{}
			out[strings.Trim(line, "[]")] = sec
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || sec == nil {
				t.Fatalf("%s:%d: not key=value in a section: %q", path, i+1, line)
			}
			if old := sec[k]; old != "" {
				v = old + " " + v
			}
			sec[k] = v
		}
	}
	return out
}
