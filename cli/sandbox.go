package cli

import (
	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/runtime/sandbox/docker"
)

// sandboxCommand is `troupe sandbox`: tools for the sandbox backends.
func sandboxCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "sandbox", Short: "Sandbox tools"}
	img := &cobra.Command{Use: "image", Short: "Sandbox images for the docker backend"}
	var opts docker.BuildOptions
	var host string
	build := &cobra.Command{
		Use:   "build [--kind debian|busybox] [--name IMAGE]",
		Short: "Build the docker sandbox image locally (no registry needed)",
		Long: `Build the docker backend's sandbox image on the local Docker Engine.

  --kind debian   a debootstrap minbase rootfs with bash, coreutils, git, python3 and
                  ca-certificates, from the mirror of this machine's apt sources
                  (about a minute); tagged ` + docker.DefaultImage + `, the backend's default
  --kind busybox  Debian's busybox-static in an empty rootfs (a second); tagged
                  ` + docker.BusyboxImage + `, the image the tests use

An existing image is kept unless --force. Needs dockerd, busybox-static and
debootstrap: scripts/setup.sh installs and starts them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := docker.New(docker.Config{Host: host})
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.Ping(cmd.Context()); err != nil {
				return err
			}
			opts.Log = cmd.ErrOrStderr()
			return c.BuildImage(cmd.Context(), opts)
		},
	}
	f := build.Flags()
	f.StringVar(&opts.Kind, "kind", docker.KindDebian, "image kind: debian or busybox")
	f.StringVar(&opts.Name, "name", "", "image name (default troupe-sandbox:KIND)")
	f.BoolVar(&opts.Force, "force", false, "rebuild an existing image")
	f.StringVar(&opts.Mirror, "mirror", "", "Debian mirror for debootstrap (default: this machine's apt source)")
	f.StringVar(&opts.Suite, "suite", "bookworm", "Debian suite for debootstrap")
	f.StringVar(&host, "docker-host", "", "Docker Engine address (default DOCKER_HOST or the local socket)")
	img.AddCommand(build)
	cmd.AddCommand(img)
	return cmd
}
