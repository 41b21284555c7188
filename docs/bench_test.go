package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// A command of the performance page: `go test … -bench X … ./pkg/`.
	benchCmdRE = regexp.MustCompile("`(go test [^`]*)`")
	benchArgRE = regexp.MustCompile(`-(?:test\.)?bench[ =]('[^']*'|\S+)`)
	pkgArgRE   = regexp.MustCompile(`(?:^|\s)(\./[\w./-]*|\.)(?:\s|$)`)
	benchFunc  = regexp.MustCompile(`(?m)^func (Benchmark\w+)\(`)
)

// TestPerformanceCommandsNameBenchmarks checks that every command on the
// performance page names packages that exist and a -bench pattern that
// matches a benchmark in them, so a renamed or removed benchmark cannot
// leave a figure behind that no command reproduces.
func TestPerformanceCommandsNameBenchmarks(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "performance.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range benchCmdRE.FindAllStringSubmatch(string(b), -1) {
		cmd := m[1]
		bm := benchArgRE.FindStringSubmatch(cmd)
		if bm == nil {
			continue
		}
		pattern := strings.Trim(bm[1], "'")
		if pattern == "." {
			continue
		}
		// -bench A/B matches A against the top-level names.
		top, _, _ := strings.Cut(pattern, "/")
		re, err := regexp.Compile(top)
		if err != nil {
			t.Errorf("%s: bad -bench pattern: %v", cmd, err)
			continue
		}
		pkgs := pkgArgRE.FindAllStringSubmatch(cmd, -1)
		if len(pkgs) == 0 {
			pkgs = [][]string{{"", "./cmd/switchboard"}} // go test -c … ./cmd/switchboard
		}
		for _, p := range pkgs {
			if strings.HasSuffix(p[1], ".test") {
				continue // a test binary run by the command, not a package
			}
			dir := filepath.Join(repoRoot, filepath.FromSlash(p[1]))
			files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
			if len(files) == 0 {
				t.Errorf("%s: no test files in %s", cmd, p[1])
				continue
			}
			found := false
			for _, f := range files {
				src, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, fm := range benchFunc.FindAllStringSubmatch(string(src), -1) {
					if re.MatchString(strings.TrimPrefix(fm[1], "Benchmark")) || re.MatchString(fm[1]) {
						found = true
					}
				}
			}
			if !found {
				t.Errorf("%s: no benchmark in %s matches %q", cmd, p[1], top)
			}
			n++
		}
	}
	if n < 10 {
		t.Errorf("found only %d benchmark commands on the performance page", n)
	}
}
