//go:build unix

package docs

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The guides whose `sh` blocks are run, each with the part of it that
// holds them ("" for the whole file).
var runnable = []struct{ file, section string }{
	{"README.md", "## Five-minute tour"},
	{"docs/getting-started.md", ""},
}

// TestGuideCommandsRun runs every command of the `sh` blocks of the
// README's tour and of getting-started.md, in order, as one bash script per
// guide in a scratch copy of the repository (its entries linked, so
// `go build ./cmd/switchboard` works and .data/ is the scratch's own).
// Commands that run until interrupted (register, watch, serve, echo, nats,
// curl -N) start in the background; register and echo are waited for until
// they print their first line, serve until it says it is listening. At the
// end each is stopped as a user would stop it (SIGINT for switchboard,
// SIGTERM otherwise), and every switchboard command must exit 0. Every other command must exit 0, or the
// code its comment gives ("# exits 1"). The server's documented address,
// 127.0.0.1:7400, becomes a free port, so that a server already on 7400
// does not answer instead.
func TestGuideCommandsRun(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the guides' commands use it", tool)
		}
	}
	for _, g := range runnable {
		t.Run(filepath.Base(g.file), func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(repoRoot, g.file))
			if err != nil {
				t.Fatal(err)
			}
			cmds := shCommands(string(b), g.section)
			if len(cmds) == 0 {
				t.Fatalf("%s has no sh commands", g.file)
			}
			port := freePort(t)
			script := shellScript(cmds, t.TempDir())
			script = strings.ReplaceAll(script, "127.0.0.1:7400", "127.0.0.1:"+port)
			dir := scratchRepo(t)
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-c", script)
			cmd.Dir = dir
			cmd.Env = hermeticEnv()
			// The script's background commands die with it, should the
			// test time out: it runs in a process group of its own.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			cmd.WaitDelay = 10 * time.Second
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", g.file, err, out)
			}
			t.Logf("%s", out)
		})
	}
}

// command is one command line of a guide.
type command struct {
	line string // continuation lines joined
	want int    // the exit code its comment gives, else 0
}

var exitsRE = regexp.MustCompile(`#\s*exits (\d+)\s*$`)

// shCommands returns the commands of the `sh` blocks of text, or of its
// section when section is a heading line (up to the next heading of that
// level).
func shCommands(text, section string) []command {
	lines := strings.Split(text, "\n")
	if section != "" {
		level := strings.SplitN(section, " ", 2)[0] + " "
		start, end := -1, len(lines)
		for i, l := range lines {
			if start < 0 {
				if strings.TrimSpace(l) == section {
					start = i + 1
				}
				continue
			}
			if strings.HasPrefix(l, level) {
				end = i
				break
			}
		}
		if start < 0 {
			return nil
		}
		lines = lines[start:end]
	}
	var out []command
	in, cont := false, ""
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case !in && t == "```sh":
			in = true
			continue
		case in && t == "```":
			in = false
			continue
		case !in:
			continue
		}
		if cont != "" {
			t = cont + " " + t
			cont = ""
		}
		if strings.HasSuffix(t, `\`) {
			cont = strings.TrimSpace(strings.TrimSuffix(t, `\`))
			continue
		}
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		c := command{line: t}
		if m := exitsRE.FindStringSubmatch(t); m != nil {
			c.want, _ = strconv.Atoi(m[1])
		}
		out = append(out, c)
	}
	return out
}

// background says whether c runs until interrupted, whether it is a
// switchboard command, and whether to wait for its first line.
func background(c string) (bg, sb, wait bool) {
	f := strings.Fields(c)
	if len(f) == 0 {
		return false, false, false
	}
	if f[0] == "curl" {
		for _, a := range f[1:] {
			if a == "-N" || a == "--no-buffer" || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "N")) {
				return true, false, false
			}
		}
		return false, false, false
	}
	if f[0] != "./sb" && f[0] != "switchboard" {
		return false, false, false
	}
	for i := 1; i < len(f); i++ {
		a := f[i]
		if strings.HasPrefix(a, "-") {
			if !strings.Contains(a, "=") && (a == "--dsn" || a == "--config" || a == "--log-level" || a == "--request-timeout") {
				i++
			}
			continue
		}
		switch a {
		case "register", "serve", "echo", "nats":
			return true, true, true
		case "watch":
			return true, true, false // prints nothing until there is something to print
		}
		return false, true, false
	}
	return false, true, false
}

// shellScript makes one bash script of cmds; logs is where the background
// commands' output goes.
func shellScript(cmds []command, logs string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `set -uo pipefail
logs=%q
bg=(); kind=(); what=()
stop() {
  local rc=0 i c
  for i in "${!bg[@]}"; do
    if [[ ${kind[$i]} == sb ]]; then kill -INT "${bg[$i]}" 2>/dev/null; else kill -TERM "${bg[$i]}" 2>/dev/null; fi
  done
  for i in "${!bg[@]}"; do
    wait "${bg[$i]}"; c=$?
    echo "--- stopped (exit $c): ${what[$i]}"; cat "$logs/$i.out" "$logs/$i.err"
    if [[ ${kind[$i]} == sb && $c != 0 ]]; then echo "FAIL: exit $c after Ctrl-C: ${what[$i]}"; rc=1; fi
  done
  return $rc
}
ready() {
  local n
  for n in $(seq 1 1200); do
    if [[ -n ${2:-} ]]; then
      grep -qs -- "$2" "$logs/$1.out" "$logs/$1.err" && return 0
    else
      [[ -s "$logs/$1.out" ]] && return 0
    fi
    kill -0 "${bg[$1]}" 2>/dev/null || { echo "FAIL: exited before it printed anything: ${what[$1]}"; cat "$logs/$1.err"; return 1; }
    sleep 0.1
  done
  echo "FAIL: printed nothing in 120s: ${what[$1]}"; return 1
}
`, logs)
	n := 0
	for _, c := range cmds {
		bg, sb, wait := background(c.line)
		fmt.Fprintf(&b, "echo %s\n", shellQuote("$ "+c.line))
		if bg {
			k := "other"
			if sb {
				k = "sb"
			}
			fmt.Fprintf(&b, "%s >\"$logs/%d.out\" 2>\"$logs/%d.err\" &\nbg+=($!); kind+=(%s); what+=(%s)\n", c.line, n, n, k, shellQuote(c.line))
			if wait {
				// A server is ready once it says it listens; the others
				// once they print their first line.
				pattern := ""
				if strings.Contains(" "+c.line+" ", " serve ") {
					pattern = "listening"
				}
				fmt.Fprintf(&b, "ready %d %s || { stop; exit 1; }\n", n, shellQuote(pattern))
			}
			n++
			continue
		}
		fmt.Fprintf(&b, "%s\nrc=$?\nif [[ $rc != %d ]]; then echo \"FAIL: exit $rc, want %d: \"%s; stop; exit 1; fi\n",
			c.line, c.want, c.want, shellQuote(c.line))
	}
	b.WriteString("stop\n")
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// scratchRepo returns a directory whose entries link to the repository's,
// less its own state (.data/, the ./sb binary, .git).
func scratchRepo(t *testing.T) string {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, e := range entries {
		switch e.Name() {
		case ".data", "sb", ".git", "switchboard":
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// hermeticEnv is this process's environment without the settings that
// would change what the guides' commands do.
func hermeticEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SWITCHBOARD_") || strings.HasPrefix(k, "TINY_") || strings.HasPrefix(k, "OTEL_") || k == "KUBECONFIG" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func TestShCommands(t *testing.T) {
	text := "# T\n\n## A\n\n```sh\n./sb x \\\n    --y 1   # note\n# comment\n\n./sb z  # exits 1\n```\n\n## B\n\n```sh\nno\n```\n```console\nno\n```\n"
	got := shCommands(text, "## A")
	if len(got) != 2 || got[0].line != "./sb x --y 1   # note" || got[1].want != 1 {
		t.Errorf("shCommands = %+v", got)
	}
	if got := shCommands(text, ""); len(got) != 3 {
		t.Errorf("whole text: %+v", got)
	}
	for c, want := range map[string][3]bool{
		"./sb register --name a":           {true, true, true},
		"./sb --dsn x watch":               {true, true, false},
		"./sb --dsn http://h:1 ls --all":   {false, true, false},
		"curl -sN 127.0.0.1:7400/v1/watch": {true, false, false},
		"curl -s 127.0.0.1:7400/v1/now":    {false, false, false},
		"./sb ls --name register":          {false, true, false},
	} {
		bg, sb, wait := background(c)
		if [3]bool{bg, sb, wait} != want {
			t.Errorf("background(%q) = %v %v %v, want %v", c, bg, sb, wait, want)
		}
	}
}
