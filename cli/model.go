package cli

import (
	"github.com/spf13/cobra"

	"github.com/troupe-dev/troupe/runtime/model/scripted"
)

func modelCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "model", Short: "Model tools"}
	var scenario, addr string
	serve := &cobra.Command{
		Use:   "serve --scenario FILE",
		Short: "Serve the scripted OpenAI-wire model for a scenario file",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return scripted.Serve(cmd.Context(), scenario, addr, cmd.ErrOrStderr())
		},
	}
	serve.Flags().StringVar(&scenario, "scenario", "", "scenario file (YAML or JSON)")
	serve.Flags().StringVar(&addr, "addr", "127.0.0.1:8089", "listen address")
	_ = serve.MarkFlagRequired("scenario")
	cmd.AddCommand(serve)
	return cmd
}
