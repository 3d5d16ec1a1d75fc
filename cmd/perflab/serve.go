package main

import (
	"fmt"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/perflab/perflab/internal/server"
	"github.com/perflab/perflab/internal/server/web"
	"github.com/perflab/perflab/internal/store"
)

func newServeCmd() *cobra.Command {
	var addr, db, tokenFile, dataRoot string
	var maxLabs int
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the lab as a service: REST API, live progress (SSE) and the dashboard",
		Long: `Serve perflab's REST API under /api/v1 (documented at /api/v1/openapi.json),
the labs' live progress as server-sent events, /healthz, /metrics and the web
dashboard, over the same store as the CLI. A lab started through the API runs
exactly as perflab lab runs it. See docs/serve.md.

By default it listens on 127.0.0.1 only, without a token. Any other address
needs a token (--token-file, or PERFLAB_TOKEN), checked on every API call. A
spec sent to the server may name files under --data-root only (relative paths
resolve against it). On SIGTERM or Ctrl-C the labs are stopped, their engines
too, and their runs marked interrupted: resumable after a restart. At most
--max-labs labs run at once; more wait their turn, listed as queued.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if maxLabs < 0 {
				return fmt.Errorf("serve: --max-labs %d: want 1 or more (0: the default, from the machine)", maxLabs)
			}
			token, err := server.ReadToken(tokenFile)
			if err != nil {
				return err
			}
			if err := server.CheckAddr(addr, token); err != nil {
				return err
			}
			st, err := store.Open(ctx, db)
			if err != nil {
				return err
			}
			defer st.Close()
			server.ShareCPU()
			srv, err := server.New(server.Config{Store: st, Token: token, DataRoot: dataRoot, MaxLabs: maxLabs,
				Dashboard: web.Handler(), Log: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			auth := "no token (loopback only)"
			if token != "" {
				auth = "token required"
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "perflab serve: http://%s/ (API /api/v1, %s; data root %s; %d labs at once)\n", ln.Addr(), auth, srv.DataRoot(), srv.MaxLabs())
			return srv.Serve(ctx, ln, time.Minute)
		},
	}
	wd, _ := os.Getwd()
	f := cmd.Flags()
	f.StringVar(&addr, "addr", server.DefaultAddr, "listen address; off loopback a token is required")
	f.StringVar(&db, "db", defaultDB, "store: sqlite:PATH, a path, or postgres://...")
	f.StringVar(&tokenFile, "token-file", "", "file holding the API token (default: $PERFLAB_TOKEN; none on loopback)")
	f.StringVar(&dataRoot, "data-root", wd, "the only directory whose files a spec sent to the server may name; relative spec paths resolve against it")
	f.IntVar(&maxLabs, "max-labs", 0, "labs run at once, more wait in a queue (default: one per CPU, at most one per 512 MiB of memory)")
	return cmd
}
