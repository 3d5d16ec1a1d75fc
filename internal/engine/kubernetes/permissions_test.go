package kubernetes

import (
	"errors"
	"io"
	"os"
	"slices"
	"testing"

	"github.com/goccy/go-yaml"
)

// TestPermissionsGrantedByDeployRBAC holds deploy/kubernetes/rbac.yaml's
// Role to Permissions: a call the runtime starts making without its rule
// fails there (and perflab doctor would not ask for it).
func TestPermissionsGrantedByDeployRBAC(t *testing.T) {
	f, err := os.Open("../../../deploy/kubernetes/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type rule struct {
		APIGroups []string `yaml:"apiGroups"`
		Resources []string `yaml:"resources"`
		Verbs     []string `yaml:"verbs"`
	}
	var rules []rule
	dec := yaml.NewDecoder(f)
	for {
		var doc struct {
			Kind  string `yaml:"kind"`
			Rules []rule `yaml:"rules"`
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if doc.Kind == "Role" {
			rules = append(rules, doc.Rules...)
		}
	}
	if len(rules) == 0 {
		t.Fatal("rbac.yaml has no Role rules")
	}
	for _, p := range Permissions {
		res := p.Resource
		if p.Subresource != "" {
			res += "/" + p.Subresource
		}
		if !slices.ContainsFunc(rules, func(r rule) bool {
			return slices.Contains(r.APIGroups, "") && slices.Contains(r.Resources, res) && slices.Contains(r.Verbs, p.Verb)
		}) {
			t.Errorf("rbac.yaml's Role does not grant %s", p)
		}
	}
}
