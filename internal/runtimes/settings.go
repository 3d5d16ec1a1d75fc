package runtimes

// Settings are what a spec may say about the runtime it runs on: the
// fields of Env the spec fills. A spec writes them either at its top level
// (images:, volumes:, kubernetes:), the form it is stored and keyed in,
// or under its runtime, `runtime: {kind: NAME, settings: {...}}`, where
// the runtime named decodes them itself (SettingsDecoder) and refuses any
// that is not its own.
type Settings struct {
	// Images overrides the container image per engine.
	Images map[string]string
	// Volumes are extra bind mounts "HOST:CONTAINER[:ro]".
	Volumes []string
	// Kubernetes are the cluster settings.
	Kubernetes *KubeSettings
}

// SettingsDecoder is a Kind with settings of its own, as a database/sql
// driver parses its own data source name: the spec's settings under
// `runtime: {kind, settings}` reach only the runtime they name.
type SettingsDecoder interface {
	// DecodeSettings decodes the spec's settings with decode, which
	// fills a value of the runtime's own settings type and refuses a
	// field that type lacks, and returns what they set.
	DecodeSettings(decode func(v any) error) (Settings, error)
}
