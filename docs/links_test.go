package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository's root, seen from this package's directory.
const repoRoot = ".."

// guides returns README.md and every Markdown file under docs/, relative to
// the repository's root.
func guides(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(repoRoot, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	linkRE  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fenceRE = regexp.MustCompile("^\\s*(```|~~~)")
)

// TestLinksResolve checks every relative link of README.md and docs/: the
// file or directory exists and, for a link into a Markdown file with a
// fragment, the heading does.
func TestLinksResolve(t *testing.T) {
	anchors := map[string]map[string]bool{}
	for _, file := range guides(t) {
		b, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range proseLines(string(b)) {
			if line == "" {
				continue
			}
			// Code spans may hold brackets and parentheses that are no link.
			line = regexp.MustCompile("`[^`]*`").ReplaceAllString(line, "")
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.ToSlash(filepath.Join(filepath.Dir(file), path))
					if _, err := os.Stat(filepath.Join(repoRoot, dest)); err != nil {
						t.Errorf("%s:%d: link %s: %s does not exist", file, i+1, target, dest)
						continue
					}
				}
				if frag == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				if anchors[dest] == nil {
					anchors[dest] = headingAnchors(t, dest)
				}
				if !anchors[dest][frag] {
					t.Errorf("%s:%d: link %s: %s has no heading #%s", file, i+1, target, dest, frag)
				}
			}
		}
	}
}

// proseLines returns the lines of a Markdown text with those inside fenced
// code blocks blanked, so line numbers stay.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if fenceRE.MatchString(l) {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return lines
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown file: lower case, spaces as hyphens, punctuation dropped, a
// repeated anchor numbered.
func headingAnchors(t *testing.T, file string) map[string]bool {
	b, err := os.ReadFile(filepath.Join(repoRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(string(b)) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := anchor(title)
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func TestAnchor(t *testing.T) {
	for title, want := range map[string]string{
		"Five-minute tour":                     "five-minute-tour",
		"The server: `switchboard serve`":      "the-server-switchboard-serve",
		"100,000 instances":                    "100000-instances",
		"Not in scope, not yet":                "not-in-scope-not-yet",
		"`discovery.ttl`":                      "discoveryttl",
		"Kubernetes: TinyModules, `kube://`":   "kubernetes-tinymodules-kube",
		"Register → watcher (another process)": "register--watcher-another-process",
	} {
		if got := anchor(title); got != want {
			t.Errorf("anchor(%q) = %q, want %q", title, got, want)
		}
	}
}

// TestREADMEShape keeps the front page short: at most 400 lines of at most
// 100 characters.
func TestREADMEShape(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) > 400 {
		t.Errorf("README.md has %d lines, want at most 400", len(lines))
	}
	for i, l := range lines {
		if n := len([]rune(l)); n > 100 {
			t.Errorf("README.md:%d is %d characters, want at most 100", i+1, n)
		}
	}
}
