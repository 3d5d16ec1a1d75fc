package web_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/server/web"
	"github.com/perflab/perflab/internal/shareddata"
)

// TestHandlerServesAssets fetches the page and every asset it references
// through the handler: each is there, with the type a browser needs to run
// it (a script served as text/plain does not run).
func TestHandlerServesAssets(t *testing.T) {
	srv := httptest.NewServer(web.Handler())
	defer srv.Close()
	body, ctype := get(t, srv.URL+"/")
	if !strings.HasPrefix(ctype, "text/html") {
		t.Fatalf("/ is %q", ctype)
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"#:]+)"`).FindAllStringSubmatch(body, -1)
	if len(refs) < 3 {
		t.Fatalf("index.html references %d assets: %v", len(refs), refs)
	}
	want := map[string]string{".js": "text/javascript", ".css": "text/css"}
	for _, m := range refs {
		_, ct := get(t, srv.URL+"/"+m[1])
		if w := want[filepath.Ext(m[1])]; w != "" && !strings.HasPrefix(ct, w) {
			t.Errorf("%s is served as %q, want %s", m[1], ct, w)
		}
	}
	// The New-lab page fetches its example by name.
	if y, _ := get(t, srv.URL+"/example-lab.yaml"); !strings.Contains(y, "runtime: sim-predict") {
		t.Errorf("example-lab.yaml does not run on the simulator:\n%s", y)
	}
	resp, err := http.Get(srv.URL + "/nothing-here.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a missing asset answered %d", resp.StatusCode)
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("no nosniff header")
	}
}

// TestNothingFetchedFromElsewhere: no file of the dashboard names another
// host (a CDN, a font service); the only absolute URL allowed is the SVG
// namespace, which is a name, not a fetch.
func TestNothingFetchedFromElsewhere(t *testing.T) {
	url := regexp.MustCompile(`(?i)(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}[^\s"'<>)]*`)
	n := 0
	err := fs.WalkDir(web.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, err := fs.ReadFile(web.FS(), path)
		if err != nil {
			return err
		}
		for _, u := range url.FindAllString(string(b), -1) {
			if u != "http://www.w3.org/2000/svg" {
				t.Errorf("%s names %s: the dashboard must fetch nothing from elsewhere", path, u)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("only %d files embedded", n)
	}
}

// TestExampleIsTheRepositoryExample: the spec the New-lab page starts from
// is examples/qwen3-14b-h100.yaml with its paths relative to the data root
// (shared/data) instead of the examples directory: the same lab, key for
// key, so the two cannot drift apart unnoticed.
func TestExampleIsTheRepositoryExample(t *testing.T) {
	data := shareddata.Path(t, "data")
	root := shareddata.RepoRoot(t)
	b, err := fs.ReadFile(web.FS(), "example-lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ours, err := labspec.ParseSpecIn("example-lab.yaml", b, data)
	if err != nil {
		t.Fatalf("the dashboard's example does not validate against the data root: %v", err)
	}
	path := filepath.Join(root, "examples", "qwen3-14b-h100.yaml")
	theirs, err := labspec.LoadSpec(path)
	if err != nil {
		t.Fatal(err)
	}
	if ours.Key() != theirs.Key() {
		t.Errorf("the dashboard's example is another lab than %s:\n%s\nvs\n%s", path, ours.YAML(), theirs.YAML())
	}
}

func get(t *testing.T, url string) (body, ctype string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	return string(b), resp.Header.Get("Content-Type")
}
