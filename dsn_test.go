package switchboard_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/switchboard-io/switchboard"
)

func TestParseDSN(t *testing.T) {
	tests := []struct {
		in   string
		want switchboard.DSN
	}{
		{"sqlite://.data/switchboard.db", switchboard.DSN{Scheme: "sqlite", Path: ".data/switchboard.db"}},
		{switchboard.DefaultDSN, switchboard.DSN{Scheme: "sqlite", Path: ".data/switchboard.db"}},
		{"sqlite://catalog.db", switchboard.DSN{Scheme: "sqlite", Path: "catalog.db"}},
		{"sqlite:///var/lib/switchboard/catalog.db", switchboard.DSN{Scheme: "sqlite", Path: "/var/lib/switchboard/catalog.db"}},
		{"sqlite::memory:", switchboard.DSN{Scheme: "sqlite", Memory: true}},
		{"sqlite://:memory:", switchboard.DSN{Scheme: "sqlite", Memory: true}},
		{"postgres://user:pw@127.0.0.1:5432/switchboard?sslmode=disable", switchboard.DSN{Scheme: "postgres"}},
		{"postgresql://db.internal/switchboard", switchboard.DSN{Scheme: "postgres"}},
		{"postgres://[::1]:5432/db", switchboard.DSN{Scheme: "postgres"}},
		{"kube://default", switchboard.DSN{Scheme: "kube", Path: "default"}},
		{"kube://tiny-systems", switchboard.DSN{Scheme: "kube", Path: "tiny-systems"}},
		// A namespace is a 63-character label, longer than a module name may be.
		{"kube://" + strings.Repeat("n", 63), switchboard.DSN{Scheme: "kube", Path: strings.Repeat("n", 63)}},
		{"kube://", switchboard.DSN{Scheme: "kube"}},
		{"http://127.0.0.1:7400", switchboard.DSN{Scheme: "http"}},
		{"https://registry.internal", switchboard.DSN{Scheme: "https"}},
		{"http://[::1]:7400/switchboard", switchboard.DSN{Scheme: "http"}},
		{"http://127.0.0.1:65535", switchboard.DSN{Scheme: "http"}},
		{"https://h:/p", switchboard.DSN{Scheme: "https"}}, // empty port: the scheme's
		{"postgres://u@127.0.0.1:1/db", switchboard.DSN{Scheme: "postgres"}},
		{"sqlite://my dir/catalog.db", switchboard.DSN{Scheme: "sqlite", Path: "my dir/catalog.db"}},
		// The scheme is case-insensitive (RFC 3986 §3.1): Scheme is lower
		// case, Raw as written, and nothing after the scheme changes case.
		{"SQLITE:///X.db", switchboard.DSN{Scheme: "sqlite", Path: "/X.db"}},
		{"SQLite://Data/C.db", switchboard.DSN{Scheme: "sqlite", Path: "Data/C.db"}},
		{"SQLITE::memory:", switchboard.DSN{Scheme: "sqlite", Memory: true}},
		{"Sqlite://:memory:", switchboard.DSN{Scheme: "sqlite", Memory: true}},
		{"Postgres://U@DB.internal/Switchboard", switchboard.DSN{Scheme: "postgres"}},
		{"POSTGRESQL://h/db", switchboard.DSN{Scheme: "postgres"}},
		{"HTTP://127.0.0.1:7400", switchboard.DSN{Scheme: "http"}},
		{"Https://registry.internal/P", switchboard.DSN{Scheme: "https"}},
		{"KUBE://default", switchboard.DSN{Scheme: "kube", Path: "default"}},
	}
	for _, tt := range tests {
		got, err := switchboard.ParseDSN(tt.in)
		if err != nil {
			t.Errorf("ParseDSN(%q): %v", tt.in, err)
			continue
		}
		tt.want.Raw = tt.in
		if got != tt.want {
			t.Errorf("ParseDSN(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestParseDSNErrors(t *testing.T) {
	tests := []struct{ in, reason string }{
		{"", "must not be empty"},
		{"mysql://localhost/db", `unknown scheme "mysql"`},
		{"redis://x", `unknown scheme "redis"`},
		{"MySQL://x", `unknown scheme "MySQL"`}, // quoted as written
		// Only the scheme is case-insensitive: a namespace is still a label.
		{"KUBE://Default", "RFC 1123"},
		{"SQLITE:catalog.db", "want sqlite://PATH"},
		{"Sqlite://", "needs a file path"},
		{"POSTGRES://:5432/db", "needs a host"},
		{"catalog.db", "want sqlite://PATH"},
		{"sqlite:catalog.db", "want sqlite://PATH"},
		{"sqlite:memory:", "want sqlite://PATH"},
		{"sqlite://", "needs a file path"},
		{"sqlite://.data/", "needs a file path"},
		{"sqlite:///", "needs a file path"},
		{"sqlite://x.db?_busy_timeout=5000", "no query parameters"},
		{"sqlite://?x=1", "no query parameters"},
		{"sqlite://x\x00.db", "NUL"},
		{"postgres://", "needs a host"},
		{"postgres:///switchboard", "needs a host"},
		{"postgres://user@/switchboard", "needs a host"},
		{"postgres://:5432/switchboard", "needs a host"},
		{"postgresql://user:pw@:5432/db", "needs a host"},
		{"postgres://host:port/db", "not a valid URL"},
		{"postgres://[::1/db", "not a valid URL"},
		{"kube://Default", "RFC 1123"},
		{"kube://ns/extra", "RFC 1123"},
		{"kube://-ns", "RFC 1123"},
		{"http://", "needs a host"},
		{"https://:7400", "needs a host"},
		{"http://tok@127.0.0.1:7400", "no user"},
		{"http://127.0.0.1:7400?token=x", "no user, query"},
		{"http://[::1:7400", "not a valid URL"},
		{"kube://" + strings.Repeat("n", 64), "RFC 1123"},
		// The scheme is quoted: a stray space before it shows.
		{"mysql ://x", `unknown scheme "mysql "`},
		// A stray newline or space (a secret file, a quoted variable) is
		// not part of a file name, a host or a namespace.
		{"sqlite://x.db\n", "begins or ends with whitespace"},
		{"sqlite://x.db ", "begins or ends with whitespace"},
		{" sqlite://x.db", "begins or ends with whitespace"},
		{"postgres://h/db\n", "begins or ends with whitespace"},
		{"kube://default\n", "begins or ends with whitespace"},
		{"sqlite://a\nb.db", "control character"},
		{"sqlite://a\tb.db", "control character"},
		{"sqlite://a\u0085b.db", "control character"},
		// A port no dialer can use, refused now rather than at the first
		// request ("connection refused" for port 0).
		{"http://127.0.0.1:0", "port must be a number from 1 to 65535"},
		{"https://h:99999/p", "port must be a number from 1 to 65535"},
		{"postgres://u@127.0.0.1:0/db", "port must be a number from 1 to 65535"},
		{"postgresql://u@127.0.0.1:65536/db", "port must be a number from 1 to 65535"},
	}
	for _, tt := range tests {
		got, err := switchboard.ParseDSN(tt.in)
		if err == nil {
			t.Errorf("ParseDSN(%q) = %+v, want an error", tt.in, got)
			continue
		}
		if !errors.Is(err, switchboard.ErrInvalidDSN) || !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("ParseDSN(%q) error %v is not ErrInvalidDSN", tt.in, err)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "dsn") || !strings.Contains(msg, tt.reason) {
			t.Errorf("ParseDSN(%q) error %q: want it to name dsn and say %q", tt.in, msg, tt.reason)
		}
		if got != (switchboard.DSN{}) {
			t.Errorf("ParseDSN(%q) returned %+v with an error", tt.in, got)
		}
	}
}

func TestOpenUnknownBackend(t *testing.T) {
	// kube is parsed by the root package but no test here links a kube backend.
	_, err := switchboard.Open(context.Background(), "kube://default", switchboard.Options{})
	if !errors.Is(err, switchboard.ErrUnknownBackend) || !strings.Contains(err.Error(), "kube") {
		t.Fatalf("Open(kube://default) = %v, want ErrUnknownBackend naming kube", err)
	}
	_, err = switchboard.Open(context.Background(), "nope://x", switchboard.Options{})
	if !errors.Is(err, switchboard.ErrInvalidDSN) {
		t.Fatalf("Open(nope://x) = %v, want ErrInvalidDSN", err)
	}
}

// A DSN's scheme is case-insensitive end to end: "SQLITE://…" opens the
// catalog "sqlite://…" names.
func TestOpenSchemeAnyCase(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/c.db"
	opts := switchboard.Options{Logger: slog.New(slog.DiscardHandler)}
	cat, err := switchboard.Open(ctx, "sqlite://"+path, opts)
	if err != nil {
		t.Fatal(err)
	}
	in := service("cased")
	in.TTL = time.Hour
	stored, err := cat.Register(ctx, in)
	cat.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, scheme := range []string{"SQLITE", "SQLite"} {
		cat, err := switchboard.Open(ctx, scheme+"://"+path, opts)
		if err != nil {
			t.Fatalf("Open(%s://…): %v", scheme, err)
		}
		got, err := cat.Get(ctx, stored.ID)
		cat.Close()
		if err != nil || got.Name != "cased" {
			t.Fatalf("%s://…: Get = %+v, %v", scheme, got, err)
		}
	}
}

// TestOpenDefaultTTLOverMax: a default TTL above the maximum is refused at
// Open, before any file is created, not at every registration without a
// TTL of its own.
func TestOpenDefaultTTLOverMax(t *testing.T) {
	dir := t.TempDir()
	for _, o := range []switchboard.Options{
		{DefaultTTL: 2 * time.Hour},                         // over the default max (1 h)
		{DefaultTTL: time.Minute, MaxTTL: 30 * time.Second}, // over a configured max
	} {
		_, err := switchboard.Open(context.Background(), "sqlite://"+dir+"/c.db", o)
		var fe *switchboard.FieldError
		if !errors.As(err, &fe) || fe.Field != "DefaultTTL" || !errors.Is(err, switchboard.ErrInvalid) {
			t.Fatalf("Open with %+v: %v, want an invalid DefaultTTL", o, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused Open created %v", entries)
	}
}

func TestOptionsWithDefaults(t *testing.T) {
	o := switchboard.Options{}.WithDefaults()
	if o.DefaultTTL != switchboard.DefaultTTL || o.PollInterval != switchboard.DefaultPollInterval || o.Logger == nil {
		t.Errorf("Options{}.WithDefaults() = %+v", o)
	}
	if switchboard.DefaultTTL.String() != "10s" || switchboard.DefaultPollInterval.String() != "30s" ||
		switchboard.DefaultHeartbeatInterval.String() != "3s" || switchboard.DefaultDSN != "sqlite://.data/switchboard.db" {
		t.Errorf("defaults differ from the documented ones")
	}
	o = switchboard.Options{DefaultTTL: 7, PollInterval: 9}.WithDefaults()
	if o.DefaultTTL != 7 || o.PollInterval != 9 {
		t.Errorf("WithDefaults overwrote set fields: %+v", o)
	}
}

func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{
		"", "sqlite://.data/switchboard.db", "sqlite:///abs/x.db", "sqlite::memory:", "sqlite://:memory:",
		"sqlite://", "sqlite://dir/", "sqlite://x?y", "postgres://u:p@h:5432/db?sslmode=disable",
		"postgresql://h/db", "postgres://:5432/db", "postgres://", "kube://default", "kube://", "kube://A",
		"mysql://x", "x", "sqlite://\x00", "http://127.0.0.1:7400", "https://h/p", "http://", "http://u@h",
		"SQLITE:///X.db", "SQLite::memory:", "Postgres://h/db", "HTTPS://h:1/p", "Kube://ns", "KUBE://NS", "MySQL://x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := switchboard.ParseDSN(s)
		if err != nil {
			if !errors.Is(err, switchboard.ErrInvalidDSN) {
				t.Fatalf("ParseDSN(%q) error %v is not ErrInvalidDSN", s, err)
			}
			return
		}
		if d.Raw != s {
			t.Fatalf("ParseDSN(%q).Raw = %q", s, d.Raw)
		}
		// The scheme is case-insensitive: written in lower or upper case,
		// the DSN parses the same (but for Raw), and Scheme is lower case.
		if d.Scheme != strings.ToLower(d.Scheme) {
			t.Fatalf("ParseDSN(%q).Scheme = %q, not lower case", s, d.Scheme)
		}
		if scheme, rest, ok := strings.Cut(s, ":"); ok {
			for _, other := range []string{strings.ToLower(scheme), strings.ToUpper(scheme)} {
				o, err := switchboard.ParseDSN(other + ":" + rest)
				o.Raw = s
				if err != nil || o != d {
					t.Fatalf("ParseDSN(%q) = %+v, %v; ParseDSN(%q) = %+v", other+":"+rest, o, err, s, d)
				}
			}
		}
		if strings.TrimSpace(s) != s {
			t.Fatalf("ParseDSN(%q) accepted surrounding whitespace", s)
		}
		if u, err := url.Parse(s); err == nil && d.Scheme != "sqlite" && d.Scheme != "kube" && u.Port() != "" {
			if p, err := strconv.Atoi(u.Port()); err != nil || p < 1 || p > 65535 {
				t.Fatalf("ParseDSN(%q) accepted port %q", s, u.Port())
			}
		}
		switch d.Scheme {
		case "sqlite":
			if d.Memory == (d.Path != "") {
				t.Fatalf("ParseDSN(%q) = %+v: want exactly one of Memory and Path", s, d)
			}
			if strings.ContainsAny(d.Path, "?\x00") || strings.HasSuffix(d.Path, "/") || strings.IndexFunc(d.Path, unicode.IsControl) >= 0 {
				t.Fatalf("ParseDSN(%q) = %+v: bad sqlite path", s, d)
			}
		case "postgres":
			if d.Path != "" || d.Memory {
				t.Fatalf("ParseDSN(%q) = %+v", s, d)
			}
		case "http", "https":
			if d.Path != "" || d.Memory || !strings.HasPrefix(strings.ToLower(s), d.Scheme+"://") {
				t.Fatalf("ParseDSN(%q) = %+v", s, d)
			}
		case "kube":
			if d.Memory || (d.Path != "" && !isLabel(d.Path)) {
				t.Fatalf("ParseDSN(%q) = %+v: bad namespace", s, d)
			}
		default:
			t.Fatalf("ParseDSN(%q) accepted unknown scheme %q", s, d.Scheme)
		}
	})
}

var labelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

func isLabel(s string) bool { return labelRE.MatchString(s) }

func TestRedactDSN(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:s3cr3t@h:5432/db", "postgres://u:xxxxx@h:5432/db"},
		{"postgresql://u:s3cr3t@h/db?sslmode=disable", "postgresql://u:xxxxx@h/db?sslmode=disable"},
		{"postgres://u@h/db?password=s3cr3t&sslmode=disable", "postgres://u@h/db?password=xxxxx&sslmode=disable"},
		{"postgres://u@h/db?sslmode=disable&sslpassword=s3cr3t", "postgres://u@h/db?sslmode=disable&sslpassword=xxxxx"},
		{"postgres://u:p%40ss@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u:s3cr3t@:5432/db", "postgres://u:xxxxx@:5432/db"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"sqlite://.data/x.db", "sqlite://.data/x.db"},
		{"host=h user=u password=s3cr3t dbname=d", "host=h user=u password=xxxxx dbname=d"},
	} {
		if got := switchboard.RedactDSN(tc.in); got != tc.want {
			t.Errorf("switchboard.RedactDSN(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// No error about a DSN shows its password.
func TestDSNErrorsHidePasswords(t *testing.T) {
	for _, dsn := range []string{
		"postgres://u:s3cr3t@:5432/db",            // no host
		"postgres://u:s3cr3t%zz@h/db",             // bad escape in the password
		"postgres://u:s3cr3t@h:5432/db\x7f",       // control character
		"http://u:s3cr3t@127.0.0.1:7400",          // user information on a server DSN
		"postgres://u@h/db?password=s3cr3t&x=%zz", // bad query
		"mysql://u:s3cr3t@h/db",                   // unknown scheme
	} {
		_, err := switchboard.ParseDSN(dsn)
		if err == nil {
			_, err = switchboard.Open(context.Background(), dsn, switchboard.Options{})
		}
		if err == nil {
			t.Fatalf("%q: no error", dsn)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%q: error shows the password: %v", dsn, err)
		}
		if !errors.Is(err, switchboard.ErrInvalid) && !errors.Is(err, switchboard.ErrUnknownBackend) {
			t.Errorf("%q: %v is neither switchboard.ErrInvalid nor switchboard.ErrUnknownBackend", dsn, err)
		}
	}
}

func TestRedactError(t *testing.T) {
	base := fmt.Errorf("connect to postgres://u:p%%40ss@h/db: %w", switchboard.ErrNotFound)
	err := switchboard.RedactError(base, "postgres://u:p%40ss@h/db")
	if strings.Contains(err.Error(), "p%40ss") || !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("%v", err)
	}
	decoded := switchboard.RedactError(errors.New("auth failed for password p@ss"), "postgres://u:p%40ss@h/db")
	if strings.Contains(decoded.Error(), "p@ss") {
		t.Fatalf("decoded password shown: %v", decoded)
	}
	plain := errors.New("nothing secret")
	if switchboard.RedactError(plain, "postgres://u:p@h/db") != plain {
		t.Fatal("an error without a password must come back unchanged")
	}
}

// A password with a '/', '?' or '#' that is not percent-encoded ends the
// URL's authority early: its user information is then no longer where a
// URL parser looks, and neither RedactDSN nor ParseDSN's error may show it.
func TestDSNPasswordWithURLDelimiters(t *testing.T) {
	for _, dsn := range []string{
		"postgres://u:s3/cr3t@h/db",
		"postgres://u:s3#cr3t@h/db",
		"postgres://u:s3?cr3t@h:5432/db?sslmode=disable",
		"postgresql://u:s3cr3t/@h/db",
		"postgres://u:s3/c@r3t@h/db",
		"postgres://u@h/db?password=s3#cr3t",
	} {
		err := parseHidingPassword(t, dsn)
		if err != nil && !errors.Is(err, switchboard.ErrInvalidDSN) {
			t.Errorf("ParseDSN(%q): %v is not ErrInvalidDSN", dsn, err)
		}
	}
	// What is no password stays as it was.
	for _, dsn := range []string{
		"postgres://h:5432/db?application_name=a@b",
		"postgres://u@h:5432/db?application_name=a@b",
		"postgres://[::1]:5432/db?application_name=a@b",
	} {
		if got := switchboard.RedactDSN(dsn); got != dsn {
			t.Errorf("RedactDSN(%q) = %q, want it unchanged", dsn, got)
		}
	}
}

// A keyword/value DSN (libpq's "host=h password=…") is no DSN ParseDSN
// takes, but its error shows the DSN redacted: every way libpq reads a
// password there must be redacted, first keyword, spaces around '=' and
// quoted values with spaces or escaped quotes included.
func TestDSNKeywordPasswords(t *testing.T) {
	for _, dsn := range []string{
		"host=h password='my s3cr3t' dbname=d",
		"host=h password = s3cr3t dbname=d",
		"host=h password='it\\'s s3cr3t' dbname=d",
		"host=h\tpassword=s3cr3t\tdbname=d",
		"password=s3cr3t host=h",
		"PASSWORD=s3cr3t host=h",
		"host=h sslpassword = 's3 cr3t'",
		"host=h password='s3cr3t",
	} {
		if err := parseHidingPassword(t, dsn); err == nil {
			t.Errorf("ParseDSN(%q) took a keyword/value DSN", dsn)
		}
	}
	if got, want := switchboard.RedactDSN("host=h password='a b' dbname=d"), "host=h password='xxxxx' dbname=d"; got != want {
		t.Errorf("RedactDSN = %q, want %q", got, want)
	}
}

// parseHidingPassword checks that neither RedactDSN(dsn) nor ParseDSN's
// error shows a piece ("s3", "cr3t") of the password dsn holds, and returns
// ParseDSN's error.
func parseHidingPassword(t *testing.T, dsn string) error {
	t.Helper()
	if got := switchboard.RedactDSN(dsn); strings.Contains(got, "s3") || strings.Contains(got, "cr3t") {
		t.Errorf("RedactDSN(%q) = %q shows (part of) the password", dsn, got)
	}
	_, err := switchboard.ParseDSN(dsn)
	if err != nil && (strings.Contains(err.Error(), "s3") || strings.Contains(err.Error(), "cr3t")) {
		t.Errorf("ParseDSN(%q): error shows (part of) the password: %v", dsn, err)
	}
	return err
}
