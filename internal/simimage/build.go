package simimage

import (
	"archive/tar"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/moby/client"

	"github.com/perflab/perflab/internal/engine/docker"
)

// BuildOptions says what image to build.
type BuildOptions struct {
	// Tag names the image, e.g. "perflab-sim:dev".
	Tag string
	// Binary is the perflab executable to put in the image; empty means
	// the running one. A dynamically linked binary goes in with its
	// loader and C libraries.
	Binary string
	// Client is the Docker API client; nil means one from the environment.
	Client client.APIClient
	// Progress receives the build's own output, line by line (nil: none).
	Progress io.Writer
}

// binDir is where the binary and the engines' names live in the image.
const binDir = "/usr/local/bin"

// Dockerfile of the image: nothing but the files of the context, so no
// base image and no registry is needed.
func dockerfile(libDirs []string) string {
	var b strings.Builder
	b.WriteString("FROM scratch\nCOPY rootfs/ /\n")
	fmt.Fprintf(&b, "ENV PATH=%s %s=1 HOME=/root\n", binDir, EnvMarker)
	if len(libDirs) > 0 {
		// No ld.so.cache in the image: the loader is told where it put
		// the libraries.
		fmt.Fprintf(&b, "ENV LD_LIBRARY_PATH=%s\n", strings.Join(libDirs, ":"))
	}
	fmt.Fprintf(&b, "LABEL %s=\"true\"\n", docker.LabelSimImage)
	fmt.Fprintf(&b, "CMD [\"%s/perflab\", \"--help\"]\n", binDir)
	return b.String()
}

// Build builds the simulated engine image through the Docker API (podman's
// too) and returns its id.
func Build(ctx context.Context, o BuildOptions) (string, error) {
	if o.Tag == "" {
		return "", errors.New("simimage: a tag is required")
	}
	bin := o.Binary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("simimage: find perflab binary: %w", err)
		}
		bin = exe
	}
	libs, err := Libraries(bin)
	if err != nil {
		return "", err
	}
	cli := o.Client
	if cli == nil {
		c, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return "", fmt.Errorf("simimage: docker client: %w", err)
		}
		defer c.Close()
		cli = c
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeContext(pw, bin, libs)) }()
	defer pr.Close()
	res, err := cli.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Tags: []string{o.Tag}, Remove: true, ForceRemove: true, Dockerfile: "Dockerfile",
	})
	if err != nil {
		return "", fmt.Errorf("simimage: build %s: %w", o.Tag, err)
	}
	defer res.Body.Close()
	id, err := followBuild(res.Body, o.Progress)
	if err != nil {
		return "", fmt.Errorf("simimage: build %s: %w", o.Tag, err)
	}
	return id, nil
}

// followBuild reads the build's JSON stream: its output to w, its error,
// and the image id at the end.
func followBuild(r io.Reader, w io.Writer) (string, error) {
	dec := json.NewDecoder(r)
	id := ""
	for {
		var m struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
			Aux *struct {
				ID string `json:"ID"`
			} `json:"aux"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return "", fmt.Errorf("read build output: %w", err)
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return "", errors.New(strings.TrimSpace(m.ErrorDetail.Message))
		}
		if m.Error != "" {
			return "", errors.New(strings.TrimSpace(m.Error))
		}
		if m.Aux != nil && m.Aux.ID != "" {
			id = m.Aux.ID
		}
		if w != nil && m.Stream != "" {
			io.WriteString(w, m.Stream)
		}
	}
	if id == "" {
		return "", errors.New("the build reported no image id")
	}
	return id, nil
}

// writeContext writes the build context: the Dockerfile and rootfs/ with
// the binary, the engines' names linked to it, the libraries, /tmp and
// /root.
func writeContext(w io.Writer, bin string, libs []string) error {
	tw := tar.NewWriter(w)
	var inImage []string // the libraries' directories
	for _, l := range libs {
		if d := path.Dir(l); !slices.Contains(inImage, d) {
			inImage = append(inImage, d)
		}
	}
	df := dockerfile(inImage)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := io.WriteString(tw, df); err != nil {
		return err
	}
	dirs := map[string]bool{}
	mkdir := func(dir string, mode int64) error {
		var parts []string
		for d := dir; d != "/" && d != "."; d = path.Dir(d) {
			parts = append(parts, d)
		}
		slices.Reverse(parts)
		for _, d := range parts {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			m := int64(0o755)
			if d == dir {
				m = mode
			}
			if err := tw.WriteHeader(&tar.Header{Name: "rootfs" + d + "/", Mode: m, Typeflag: tar.TypeDir}); err != nil {
				return err
			}
		}
		return nil
	}
	file := func(dst, src string) error {
		if err := mkdir(path.Dir(dst), 0o755); err != nil {
			return err
		}
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: "rootfs" + dst, Mode: 0o755, Size: st.Size(), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		return err
	}
	if err := mkdir("/tmp", 0o1777); err != nil {
		return err
	}
	if err := mkdir("/root", 0o700); err != nil {
		return err
	}
	if err := file(binDir+"/perflab", bin); err != nil {
		return fmt.Errorf("simimage: add %s: %w", bin, err)
	}
	for _, n := range entryNames {
		if err := tw.WriteHeader(&tar.Header{Name: "rootfs" + binDir + "/" + n, Linkname: "perflab", Mode: 0o777, Typeflag: tar.TypeSymlink}); err != nil {
			return err
		}
	}
	for _, l := range libs {
		if err := file(l, l); err != nil {
			return fmt.Errorf("simimage: add %s: %w", l, err)
		}
	}
	return tw.Close()
}

// libDirs are where the loader looks when the binary names no run path.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// Libraries lists what a dynamically linked binary needs at run time (its
// loader first, then each shared library, found as the loader would); nil
// for a static binary.
func Libraries(bin string) ([]string, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, fmt.Errorf("simimage: %s: %w", bin, err)
	}
	defer f.Close()
	interp := ""
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return nil, fmt.Errorf("simimage: %s: read its loader's name: %w", bin, err)
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	if interp == "" {
		return nil, nil
	}
	out := []string{interp}
	seen := map[string]bool{}
	var walk func(*elf.File, string) error
	walk = func(f *elf.File, who string) error {
		needed, err := f.ImportedLibraries()
		if err != nil {
			return fmt.Errorf("simimage: %s: %w", who, err)
		}
		for _, n := range needed {
			if seen[n] {
				continue
			}
			seen[n] = true
			p := findLib(n)
			if p == "" {
				return fmt.Errorf("simimage: %s needs %s, which is in none of %s; build a static perflab (CGO_ENABLED=0 go build ./cmd/perflab) and give it with --binary", who, n, strings.Join(libDirs, ", "))
			}
			if p != interp {
				out = append(out, p)
			}
			lf, err := elf.Open(p)
			if err != nil {
				return fmt.Errorf("simimage: %s: %w", p, err)
			}
			err = walk(lf, p)
			lf.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(f, bin); err != nil {
		return nil, err
	}
	return out, nil
}

func findLib(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	for _, d := range libDirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}
