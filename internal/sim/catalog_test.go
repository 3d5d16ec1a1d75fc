package sim

import (
	"io/fs"
	"strings"
	"testing"
)

// TestCatalogConfigs: every embedded config.json parses, and the catalog
// serves each one under its file name, so no model is left out silently.
func TestCatalogConfigs(t *testing.T) {
	ents, err := fs.ReadDir(modelConfigs, "models")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) == 0 {
		t.Fatal("no embedded model configs")
	}
	for _, e := range ents {
		b, err := fs.ReadFile(modelConfigs, "models/"+e.Name())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parseModelConfig(b); err != nil {
			t.Errorf("models/%s: %v", e.Name(), err)
		}
		name := strings.TrimSuffix(e.Name(), ".json")
		if _, err := LookupModel("Qwen/" + name); err != nil {
			t.Errorf("LookupModel(%q): %v", name, err)
		}
	}
	if len(archCatalog) != len(ents) {
		t.Errorf("catalog holds %d models, %d configs embedded", len(archCatalog), len(ents))
	}
}
