package upgradetest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// oldRelease is the commit of the release users run today, the "old" side
// of every test here. Each release moves it forward to the previous
// release's commit, and updates the assertions that pin what that release
// cannot do (see oldRefusesMigratedCatalog).
const oldRelease = "76effdb"

// leaserSrc is the helper program (see its doc) built from both releases'
// sources: the working tree's, and a copy of it in the old release's.
const leaserSrc = "upgradetest/testdata/leaser"

var (
	buildOnce sync.Once
	binDir    string
	oldBin    string
	newBin    string
	oldLeaser string
	newLeaser string
	skipWhy   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// repoRoot is the directory of the working tree's go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// binaries builds, once per test binary run, the old release from the
// repository's history (git archive of oldRelease into a temporary
// directory, built with the module cache the tests use) and the working
// tree's switchboard, and the leaser of each. A checkout without git or
// without that commit (a shallow clone, a source tarball) skips the tests,
// saying so; any other failure fails them.
func binaries(t *testing.T) (old, cur string) {
	t.Helper()
	buildOnce.Do(build)
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return oldBin, newBin
}

// leasers returns the leaser programs of the old release and the working
// tree (see binaries).
func leasers(t *testing.T) (old, cur string) {
	t.Helper()
	binaries(t)
	return oldLeaser, newLeaser
}

func build() {
	root, err := repoRoot()
	if err != nil {
		buildErr = err
		return
	}
	if _, err := exec.LookPath("git"); err != nil {
		skipWhy = "cannot build the old release " + oldRelease + ": git is not installed"
		return
	}
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", oldRelease+"^{commit}").CombinedOutput(); err != nil {
		skipWhy = fmt.Sprintf("cannot build the old release %s: this checkout has no such commit (a shallow clone or a source archive?): %v: %s",
			oldRelease, err, strings.TrimSpace(string(out)))
		return
	}
	if binDir, err = os.MkdirTemp("", "switchboard-upgradetest-"); err != nil {
		buildErr = err
		return
	}
	src := filepath.Join(binDir, "old-src")
	if err := os.Mkdir(src, 0o755); err != nil {
		buildErr = err
		return
	}
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", oldRelease)
	untar := exec.Command("tar", "-x", "-C", src)
	var aerr, terr bytes.Buffer
	archive.Stderr, untar.Stderr = &aerr, &terr
	pipe, err := archive.StdoutPipe()
	if err != nil {
		buildErr = err
		return
	}
	untar.Stdin = pipe
	if err := untar.Start(); err != nil {
		buildErr = fmt.Errorf("tar: %w", err)
		return
	}
	if err := archive.Run(); err != nil {
		untar.Wait()
		buildErr = fmt.Errorf("git archive %s: %w: %s", oldRelease, err, aerr.String())
		return
	}
	if err := untar.Wait(); err != nil {
		buildErr = fmt.Errorf("extract %s: %w: %s", oldRelease, err, terr.String())
		return
	}
	// The leaser's source, copied into the old release's tree, is built
	// there against that release's packages.
	leaser, err := os.ReadFile(filepath.Join(root, leaserSrc, "main.go"))
	if err != nil {
		buildErr = err
		return
	}
	if err := os.MkdirAll(filepath.Join(src, leaserSrc), 0o755); err != nil {
		buildErr = err
		return
	}
	if err := os.WriteFile(filepath.Join(src, leaserSrc, "main.go"), leaser, 0o644); err != nil {
		buildErr = err
		return
	}
	oldBin = filepath.Join(binDir, "switchboard-"+oldRelease)
	newBin = filepath.Join(binDir, "switchboard-new")
	oldLeaser = filepath.Join(binDir, "leaser-"+oldRelease)
	newLeaser = filepath.Join(binDir, "leaser-new")
	for _, b := range []struct{ dir, pkg, out string }{
		{src, "./cmd/switchboard", oldBin}, {root, "./cmd/switchboard", newBin},
		{src, "./" + leaserSrc, oldLeaser}, {root, "./" + leaserSrc, newLeaser},
	} {
		if buildErr = goBuild(b.dir, b.pkg, b.out); buildErr != nil {
			return
		}
	}
}

func goBuild(dir, pkg, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = dir
	// -trimpath: the old source is extracted to a new directory on each run,
	// and without it every package of it would miss the build cache.
	// -mod=mod: the old release's go.sum is complete for its go.mod, and
	// its modules come from the shared cache (or the module proxy).
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s in %s: %w\n%s", pkg, dir, err, stderr.String())
	}
	return nil
}
