package main

// The container and cluster runtimes register themselves with package
// runtimes when imported, as database/sql drivers do. Only the program
// imports them: the lab, the reports and the server look runtimes up by
// name and link neither the Docker client nor client-go.
import (
	_ "github.com/perflab/perflab/internal/runtimes/dockerrt"
	_ "github.com/perflab/perflab/internal/runtimes/kubert"
)
