package docker

// Building the sandbox images locally: no registry can be assumed, so the
// images are made from the host's own packages and imported through the
// Engine API's ImageImport.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"

	"github.com/troupe-dev/troupe/runtime/sandbox/host"
)

// Image kinds that BuildImage makes.
const (
	// KindBusybox is Debian's busybox-static in an otherwise empty rootfs:
	// a few MB, built in a second; the tests use it.
	KindBusybox = "busybox"
	// KindDebian is a debootstrap minbase rootfs with bash, coreutils,
	// git, python3 and ca-certificates: the image for real use (~400 MB,
	// about a minute to build).
	KindDebian = "debian"
)

// Default image names.
const (
	// DefaultImage is the image a Client uses when neither Config.Image
	// nor Options.Image names one.
	DefaultImage = "troupe-sandbox:debian"
	// BusyboxImage is the small image the tests use.
	BusyboxImage = "troupe-sandbox:busybox"
)

// imagePath is the PATH inside both images: the one commands get.
const imagePath = host.DefaultPATH

// BuildOptions say which image to build.
type BuildOptions struct {
	// Kind is KindBusybox or KindDebian; empty means KindDebian.
	Kind string
	// Name is the image reference to tag; empty means
	// "troupe-sandbox:<kind>".
	Name string
	// Force rebuilds an image that already exists; without it BuildImage
	// does nothing for an existing image.
	Force bool
	// Busybox is the host's static busybox binary; empty means
	// /bin/busybox (Debian's busybox-static).
	Busybox string
	// Suite is the Debian suite debootstrap installs; empty means
	// "bookworm".
	Suite string
	// Mirror is the Debian mirror debootstrap uses; empty means the one
	// the host's own apt sources use for Suite (see HostMirror).
	Mirror string
	// Log receives progress (debootstrap's output among it); nil discards.
	Log io.Writer
}

// BuildImage builds a sandbox image on the client's Docker Engine and
// tags it opts.Name. It is idempotent: an existing image is kept unless
// opts.Force.
func (c *Client) BuildImage(ctx context.Context, opts BuildOptions) error {
	if opts.Kind == "" {
		opts.Kind = KindDebian
	}
	if opts.Name == "" {
		opts.Name = "troupe-sandbox:" + opts.Kind
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if !opts.Force {
		if _, err := c.api.ImageInspect(ctx, opts.Name); err == nil {
			fmt.Fprintf(opts.Log, "image %s exists (use --force to rebuild)\n", opts.Name)
			return nil
		} else if !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("docker: inspect image %s: %w", opts.Name, err)
		}
	}
	start := time.Now()
	var err error
	switch opts.Kind {
	case KindBusybox:
		err = c.buildBusybox(ctx, opts)
	case KindDebian:
		err = c.buildDebian(ctx, opts)
	default:
		return fmt.Errorf("docker: unknown image kind %q (want %q or %q)", opts.Kind, KindBusybox, KindDebian)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.Log, "built %s (%s) in %s\n", opts.Name, opts.Kind, time.Since(start).Round(time.Millisecond))
	return nil
}

// importChanges are the Dockerfile instructions applied on import.
func importChanges(kind string) []string {
	return []string{
		"ENV PATH=" + imagePath,
		"WORKDIR /workspace",
		`CMD ["sh"]`,
		"LABEL troupe.image.kind=" + kind,
	}
}

// importImage streams a rootfs tarball into the engine as image name.
func (c *Client) importImage(ctx context.Context, rootfs io.Reader, name, kind string) error {
	rc, err := c.api.ImageImport(ctx, image.ImportSource{Source: rootfs, SourceName: "-"}, name,
		image.ImportOptions{Changes: importChanges(kind), Message: "troupe sandbox image build --kind " + kind})
	if err != nil {
		return fmt.Errorf("docker: import %s: %w", name, err)
	}
	defer rc.Close()
	// The answer is a stream of JSON messages; a failure arrives as one
	// with an error, not as an HTTP status.
	dec := json.NewDecoder(rc)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("docker: import %s: %w", name, err)
		}
		if msg.Error != "" {
			return fmt.Errorf("docker: import %s: %s", name, msg.Error)
		}
	}
}

// buildBusybox writes the busybox rootfs as a tar stream in Go and imports
// it: /bin/busybox, a symlink per applet, /etc/passwd and /etc/group, and
// the directories a sandbox mounts over (/workspace, /tmp, /proc, ...).
func (c *Client) buildBusybox(ctx context.Context, opts BuildOptions) error {
	bin := opts.Busybox
	if bin == "" {
		bin = "/bin/busybox"
	}
	if err := checkStatic(bin); err != nil {
		return err
	}
	applets, err := busyboxApplets(ctx, bin)
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeBusyboxRootfs(pw, bin, applets)) }()
	err = c.importImage(ctx, pr, opts.Name, KindBusybox)
	pr.CloseWithError(errors.New("import ended")) // unblocks the writer if the import failed early
	return err
}

// checkStatic refuses a dynamically linked busybox, which cannot run in an
// empty rootfs.
func checkStatic(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("docker: busybox %s: %w (install busybox-static: scripts/setup.sh)", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("docker: %s is dynamically linked; install busybox-static (scripts/setup.sh)", bin)
		}
	}
	return nil
}

// busyboxApplets lists the applets' install paths ("bin/sh", ...).
func busyboxApplets(ctx context.Context, bin string) ([]string, error) {
	out, err := exec.CommandContext(ctx, bin, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("docker: %s --list-full: %w", bin, err)
	}
	var applets []string
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line == "bin/busybox" || strings.Contains(line, "..") {
			continue
		}
		applets = append(applets, line)
	}
	if len(applets) == 0 {
		return nil, fmt.Errorf("docker: %s lists no applets", bin)
	}
	return applets, nil
}

func writeBusyboxRootfs(w io.Writer, bin string, applets []string) error {
	tw := tar.NewWriter(w)
	now := time.Now()
	dirs := map[string]bool{}
	dir := func(name string, mode int64) error {
		if dirs[name] {
			return nil
		}
		dirs[name] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: now})
	}
	for _, d := range []string{"bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "dev", "proc", "sys", "root", "workspace", "var"} {
		if err := dir(d, 0o755); err != nil {
			return err
		}
	}
	if err := dir("tmp", 0o1777); err != nil {
		return err
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: now}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	if err := file("bin/busybox", 0o755, data); err != nil {
		return err
	}
	if err := file("etc/passwd", 0o644, []byte("root:x:0:0:root:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")); err != nil {
		return err
	}
	if err := file("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n")); err != nil {
		return err
	}
	for _, a := range applets {
		if err := dir(path.Dir(a), 0o755); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: a, Linkname: "/bin/busybox", Mode: 0o777, ModTime: now}); err != nil {
			return err
		}
	}
	return tw.Close()
}

// buildDebian runs debootstrap into a temporary directory, then streams
// the rootfs through tar into the engine.
func (c *Client) buildDebian(ctx context.Context, opts BuildOptions) error {
	suite := opts.Suite
	if suite == "" {
		suite = "bookworm"
	}
	mirror := opts.Mirror
	if mirror == "" {
		var err error
		if mirror, err = HostMirror(suite); err != nil {
			return err
		}
	}
	debootstrap, err := exec.LookPath("debootstrap")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/debootstrap"); serr != nil {
			return errors.New("docker: debootstrap is missing; install it (scripts/setup.sh)")
		}
		debootstrap = "/usr/sbin/debootstrap"
	}
	tmp, err := os.MkdirTemp("", "troupe-debootstrap-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	rootfs := filepath.Join(tmp, "rootfs")
	fmt.Fprintf(opts.Log, "debootstrap %s from %s into %s\n", suite, mirror, rootfs)
	cmd := exec.CommandContext(ctx, debootstrap, "--variant=minbase",
		"--include=bash,coreutils,git,python3,ca-certificates", suite, rootfs, mirror)
	cmd.Stdout, cmd.Stderr = opts.Log, opts.Log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("docker: debootstrap %s %s: %w", suite, mirror, err)
	}
	// Leave out what an image does not need, and make the mount point.
	for _, p := range []string{"var/cache/apt/archives", "var/lib/apt/lists"} {
		ents, _ := os.ReadDir(filepath.Join(rootfs, p))
		for _, e := range ents {
			if e.Type().IsRegular() {
				os.Remove(filepath.Join(rootfs, p, e.Name()))
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(rootfs, "workspace"), 0o755); err != nil {
		return err
	}
	// GNU tar keeps hard links, device nodes, owners and modes exactly.
	tarCmd := exec.CommandContext(ctx, "tar", "-C", rootfs, "--numeric-owner", "-cf", "-", ".")
	var stderr bytes.Buffer
	tarCmd.Stderr = &stderr
	out, err := tarCmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := tarCmd.Start(); err != nil {
		return fmt.Errorf("docker: tar: %w", err)
	}
	fmt.Fprintf(opts.Log, "importing %s\n", opts.Name)
	ierr := c.importImage(ctx, out, opts.Name, KindDebian)
	io.Copy(io.Discard, out) // let tar finish if the import stopped early
	if err := tarCmd.Wait(); err != nil && ierr == nil {
		return fmt.Errorf("docker: tar: %w: %s", err, stderr.String())
	}
	return ierr
}

// aptSources are the files HostMirror reads; a variable for tests.
var aptSources = struct {
	dir  string // deb822 *.sources and one-line *.list files
	list string // /etc/apt/sources.list
}{"/etc/apt/sources.list.d", "/etc/apt/sources.list"}

// HostMirror returns the Debian mirror the host's own apt sources use for
// suite: the first URI of an enabled "deb" entry for exactly that suite,
// from the deb822 files under /etc/apt/sources.list.d, else from the
// one-line sources.list files. debootstrap's built-in default mirror may
// be unreachable; the host's own is the one known to work.
func HostMirror(suite string) (string, error) {
	files, _ := filepath.Glob(filepath.Join(aptSources.dir, "*.sources"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if uri := mirrorFromDeb822(string(data), suite); uri != "" {
			return uri, nil
		}
	}
	lists, _ := filepath.Glob(filepath.Join(aptSources.dir, "*.list"))
	for _, f := range append([]string{aptSources.list}, lists...) {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if uri := mirrorFromList(string(data), suite); uri != "" {
			return uri, nil
		}
	}
	return "", fmt.Errorf("docker: no apt source for Debian %s on this host; pass a mirror (--mirror URL)", suite)
}

// mirrorFromDeb822 reads deb822 stanzas (RFC822-style fields, stanzas
// separated by blank lines, "#" comments).
func mirrorFromDeb822(data, suite string) string {
	for _, stanza := range strings.Split(strings.ReplaceAll(data, "\r\n", "\n"), "\n\n") {
		fields := map[string]string{}
		var last string
		sc := bufio.NewScanner(strings.NewReader(stanza))
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "#"):
			case strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t"):
				if last != "" {
					fields[last] += " " + strings.TrimSpace(line)
				}
			default:
				k, v, ok := strings.Cut(line, ":")
				if !ok {
					continue
				}
				last = strings.ToLower(strings.TrimSpace(k))
				fields[last] = strings.TrimSpace(v)
			}
		}
		if strings.EqualFold(fields["enabled"], "no") ||
			!slices.Contains(strings.Fields(fields["types"]), "deb") ||
			!slices.Contains(strings.Fields(fields["suites"]), suite) {
			continue
		}
		for _, uri := range strings.Fields(fields["uris"]) {
			if strings.HasPrefix(uri, "http://") || strings.HasPrefix(uri, "https://") || strings.HasPrefix(uri, "file:") {
				return uri
			}
		}
	}
	return ""
}

// mirrorFromList reads one-line sources: "deb [options] URI SUITE COMPONENTS...".
func mirrorFromList(data, suite string) string {
	for _, line := range strings.Split(data, "\n") {
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) == 0 {
				continue
			}
			f = f[1:]
		}
		if len(f) >= 2 && f[1] == suite && (strings.HasPrefix(f[0], "http://") || strings.HasPrefix(f[0], "https://") || strings.HasPrefix(f[0], "file:")) {
			return f[0]
		}
	}
	return ""
}
