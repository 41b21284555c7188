package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"

	"github.com/switchboard-io/switchboard/config"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/cli/ and docs/configuration.md (go generate ./cmd/switchboard)")

// The generated reference pages, relative to the repository's root.
const (
	cliDocsDir    = "docs/cli"
	configDocPath = "docs/configuration.md"
)

// TestGeneratedDocs checks that the committed reference pages are what the
// commands and the config package produce; with -update it writes them.
func TestGeneratedDocs(t *testing.T) {
	root := filepath.Join("..", "..")
	want, err := generatedDocs(root)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string][]byte{}
	old, _ := filepath.Glob(filepath.Join(root, cliDocsDir, "*.md"))
	for _, p := range append(old, filepath.Join(root, configDocPath)) {
		if b, err := os.ReadFile(p); err == nil {
			rel, _ := filepath.Rel(root, p)
			have[filepath.ToSlash(rel)] = b
		}
	}
	var stale []string
	for p, b := range want {
		if !bytes.Equal(have[p], b) {
			stale = append(stale, p)
		}
	}
	for p := range have {
		if _, ok := want[p]; !ok {
			stale = append(stale, p+" (no such command now)")
		}
	}
	slices.Sort(stale)
	if len(stale) == 0 {
		return
	}
	if !*updateDocs {
		t.Fatalf("the reference pages differ from what the commands produce; run `go generate ./cmd/switchboard` and commit: %s",
			strings.Join(stale, ", "))
	}
	for p := range have {
		if _, ok := want[p]; !ok {
			if err := os.Remove(filepath.Join(root, p)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(root, cliDocsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, b := range want {
		if err := os.WriteFile(filepath.Join(root, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("rewrote %s", strings.Join(stale, ", "))
}

// generatedDocs returns the reference pages by their path relative to the
// repository's root, whose directory is root.
func generatedDocs(root string) (map[string][]byte, error) {
	cmd := newRoot(io.Discard, io.Discard)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.DisableAutoGenTag = true
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd)
	dir, err := os.MkdirTemp("", "switchboard-docs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := doc.GenMarkdownTree(cmd, dir); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	pages, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		out[cliDocsDir+"/"+filepath.Base(p)] = b
	}
	// The environment and exit codes `--help` shows, which cobra's pages
	// leave out, go before each page's links.
	walk = func(c *cobra.Command) {
		page := cliDocsDir + "/" + strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
		if b, ok := out[page]; ok {
			extra := "### Environment\n\n```\n" + helpEnv(c) + "\n```\n\n### Exit codes\n\n```\n" + helpExit(c) + "\n```\n\n"
			if i := bytes.Index(b, []byte("### SEE ALSO")); i >= 0 {
				out[page] = slices.Concat(b[:i], []byte(extra), b[i:])
			} else {
				out[page] = append(b, "\n"+extra...)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd)
	secs, err := config.Reference(filepath.Join(root, "config"))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := config.WriteReference(&b, secs, keyFlags(cmd)); err != nil {
		return nil, err
	}
	out[configDocPath] = b.Bytes()
	return out, nil
}

// keyFlags maps each configuration key to the flags bound to it (bindKey),
// each with the commands that take it, linked to their pages.
func keyFlags(root *cobra.Command) map[string][]string {
	type use struct {
		flag string
		cmds []*cobra.Command
	}
	byKey := map[string][]*use{}
	add := func(key, name string, c *cobra.Command) {
		for _, u := range byKey[key] {
			if u.flag == name {
				u.cmds = append(u.cmds, c)
				return
			}
		}
		byKey[key] = append(byKey[key], &use{flag: name, cmds: []*cobra.Command{c}})
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if k := f.Annotations[annKey]; len(k) == 1 {
				add(k[0], f.Name, c)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if k := f.Annotations[annKey]; len(k) == 1 {
			add(k[0], f.Name, root)
		}
	})
	out := map[string][]string{}
	for key, uses := range byKey {
		for _, u := range uses {
			var names []string
			for _, c := range u.cmds {
				page := strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
				name := c.Name()
				if c == root {
					name = "every command"
				}
				names = append(names, fmt.Sprintf("[%s](cli/%s)", name, page))
			}
			out[key] = append(out[key], fmt.Sprintf("`--%s` (%s)", u.flag, strings.Join(names, ", ")))
		}
	}
	return out
}
