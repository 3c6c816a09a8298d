/*
Copyright The capo-sharednet Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package shipping

import (
	"debug/elf"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/capo-sharednet/capo-sharednet/test/testenv"
)

// dockerBuild is the manager's `go build` as the Dockerfile runs it.
type dockerBuild struct {
	env     map[string]string // CGO_ENABLED=0 GOOS=... before `go build`
	flags   []string          // between `go build` and `-o`
	output  string            // -o
	pkg     string            // the package built
	builder string            // the builder stage's image
	final   string            // the last stage's image
	user    string            // the last USER
	entry   string            // ENTRYPOINT
}

// parseDockerfile reads the instructions this test relies on; a Dockerfile it
// cannot read this way fails the test rather than being skipped.
func parseDockerfile(t *testing.T, text string) dockerBuild {
	t.Helper()
	// Join continuation lines, drop comments.
	var instructions []string
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`) + " ")
			continue
		}
		cur.WriteString(trimmed)
		instructions = append(instructions, cur.String())
		cur.Reset()
	}
	var b dockerBuild
	for _, ins := range instructions {
		keyword, rest, _ := strings.Cut(ins, " ")
		switch strings.ToUpper(keyword) {
		case "FROM":
			fields := strings.Fields(rest)
			img := ""
			for _, f := range fields {
				if !strings.HasPrefix(f, "--") {
					img = f
					break
				}
			}
			if b.builder == "" {
				b.builder = img
			}
			b.final = img
		case "USER":
			b.user = strings.TrimSpace(rest)
		case "ENTRYPOINT":
			b.entry = strings.Trim(strings.TrimSpace(rest), `[]" `)
		case "RUN":
			if !strings.Contains(rest, "go build") {
				continue
			}
			words := shellWords(t, rest)
			i := slices.Index(words, "go")
			if i < 0 || i+1 >= len(words) || words[i+1] != "build" {
				t.Fatalf("cannot read the go build of: %s", ins)
			}
			b.env = map[string]string{}
			for _, w := range words[:i] {
				if k, v, ok := strings.Cut(w, "="); ok && !strings.HasPrefix(w, "-") && regexp.MustCompile(`^[A-Z_]+$`).MatchString(k) {
					b.env[k] = v
				}
			}
			args := words[i+2:]
			o := slices.Index(args, "-o")
			if o < 0 || o+2 >= len(args)+1 {
				t.Fatalf("no -o in: %s", ins)
			}
			b.flags, b.output = args[:o], args[o+1]
			if o+2 < len(args) {
				b.pkg = args[o+2]
			}
		}
	}
	if b.env == nil {
		t.Fatal("the Dockerfile has no RUN ... go build")
	}
	return b
}

// shellWords splits like sh for the plain words and "double quotes" a Dockerfile uses here.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case !quoted && (r == ' ' || r == '\t'):
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quotes in: %s", s)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// makefileBuildFlags is GO_BUILD_FLAGS of the Makefile, split like make hands it to the shell.
func makefileBuildFlags(t *testing.T) []string {
	t.Helper()
	for _, line := range strings.Split(string(mustRead(t, path("Makefile"))), "\n") {
		if k, v, ok := strings.Cut(line, ":="); ok && strings.TrimSpace(k) == "GO_BUILD_FLAGS" {
			return shellWords(t, strings.TrimSpace(v))
		}
	}
	t.Fatal("no GO_BUILD_FLAGS in the Makefile")
	return nil
}

// TestDockerfileBuildsTheManager builds the manager exactly as the Dockerfile
// does (its go build line, its environment, `make build`'s GO_BUILD_FLAGS)
// from exactly what `COPY . .` sends (the context minus .dockerignore), and
// checks the binary is static and the image runs it as the non-root user the
// Deployment expects. `make docker-build` builds the image itself where a
// Docker engine exists.
func TestDockerfileBuildsTheManager(t *testing.T) {
	testenv.SkipIfShort(t, "builds the manager as the Dockerfile does")
	b := parseDockerfile(t, string(mustRead(t, path("Dockerfile"))))

	if want := makefileBuildFlags(t); !slices.Equal(b.flags, want) {
		t.Errorf("Dockerfile builds with %q, the Makefile's GO_BUILD_FLAGS (make build) are %q", b.flags, want)
	}
	if b.env["CGO_ENABLED"] != "0" {
		t.Errorf("CGO_ENABLED=%q: the distroless/static image has no libc", b.env["CGO_ENABLED"])
	}
	if b.output != b.entry {
		t.Errorf("built to %s but the ENTRYPOINT is %s", b.output, b.entry)
	}
	if !strings.HasPrefix(b.final, "gcr.io/distroless/static") || !strings.HasSuffix(b.final, ":nonroot") {
		t.Errorf("final image %s, want gcr.io/distroless/static:nonroot", b.final)
	}
	// config/manager runs the container as 65532 with runAsNonRoot: the kubelet
	// can only verify a numeric user.
	if b.user != "65532:65532" {
		t.Errorf("USER %q, want 65532:65532 (numeric, as config/manager/manager.yaml runs it)", b.user)
	}
	manifest := string(mustRead(t, path("config", "manager", "manager.yaml")))
	if !strings.Contains(manifest, "runAsUser: 65532") || !strings.Contains(manifest, "- "+b.entry) {
		t.Errorf("config/manager/manager.yaml does not run %s as user 65532", b.entry)
	}
	// The builder's Go must be at least go.mod's.
	goMod := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindStringSubmatch(string(mustRead(t, path("go.mod"))))
	img := regexp.MustCompile(`^golang:(\d+)\.(\d+)`).FindStringSubmatch(b.builder)
	if goMod == nil || img == nil {
		t.Fatalf("cannot compare the builder %s with go.mod", b.builder)
	}
	if atoi(img[1])*100+atoi(img[2]) < atoi(goMod[1])*100+atoi(goMod[2]) {
		t.Errorf("builder %s is older than go.mod's go %s.%s", b.builder, goMod[1], goMod[2])
	}

	// The build context as docker sends it.
	ctxDir := t.TempDir()
	copyContext(t, repoRoot, ctxDir, dockerignore(t))
	out := filepath.Join(t.TempDir(), "manager")
	env := []string{"GOOS=linux", "GOARCH=" + runtime.GOARCH, "GOFLAGS=-mod=readonly"}
	for k, v := range b.env {
		if v != "${TARGETOS}" && v != "${TARGETARCH}" {
			env = append(env, k+"="+v)
		}
	}
	// The build argument VERSION as docker passes it: the manager reports it.
	const release = "v9.8.7-test"
	flags := make([]string, len(b.flags))
	for i, f := range b.flags {
		flags[i] = strings.ReplaceAll(f, "${VERSION}", release)
	}
	args := append(append([]string{"build"}, flags...), "-o", out, b.pkg)
	run(t, ctxDir, env, "go", args...)
	if got := strings.TrimSpace(string(run(t, ctxDir, nil, out, "--version"))); got != release {
		t.Errorf("built with VERSION=%s, the manager's --version says %q", release, got)
	}

	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the manager is dynamically linked (has an ELF interpreter)")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the manager needs shared libraries %q", libs)
	}
	if i := slices.Index(b.flags, "-ldflags"); i >= 0 && i+1 < len(b.flags) && slices.Contains(strings.Fields(b.flags[i+1]), "-s") {
		if f.Section(".symtab") != nil {
			t.Error("linked with -s but the binary has a symbol table")
		}
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// dockerignore reads .dockerignore; only the patterns docker and this test
// agree on (root-relative globs, no ** nor ! exceptions) are accepted.
func dockerignore(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(path(".dockerignore"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.Contains(line, "**") || strings.HasPrefix(line, "!") {
			t.Fatalf(".dockerignore pattern %q: this test reads only plain root-relative globs", line)
		}
		patterns = append(patterns, strings.Trim(filepath.Clean(line), "/"))
	}
	return patterns
}

// copyContext copies src to dst, leaving out what the patterns match (a
// matched folder is left out with everything in it, as docker does).
func copyContext(t *testing.T, src, dst string, patterns []string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		for _, pat := range patterns {
			if ok, _ := filepath.Match(pat, rel); ok {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		o, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(o, in); err != nil {
			o.Close()
			return err
		}
		return o.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}
