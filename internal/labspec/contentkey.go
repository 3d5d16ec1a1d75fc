package labspec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Keys say what is measured, and a file measures the same wherever its
// clone lies: a spec's paths are absolute once loaded, so hashing them made
// the same lab from another directory a different run, with other trial
// keys and (on the simulator) other noise draws. Keys therefore name a
// spec's files by content. Until this, results depended on where the
// repository was checked out (the 14B example: 38 trials from one clone,
// 42 from another).

// contentID stands for path in a key: a file by the hash of its bytes, a
// directory by the names and sizes of the files directly in it (a model or
// tokenizer folder is told apart by those without reading gigabytes of
// weights). A path that cannot be read is kept as written: the key still
// differs from any other file's, and the run fails at its own line later.
func contentID(path string) string {
	if path == "" || !filepath.IsAbs(path) {
		return path // empty, or a Hugging Face id
	}
	fi, err := os.Stat(path)
	if err != nil {
		return path
	}
	stamp := contentStamp{size: fi.Size(), mod: fi.ModTime(), dir: fi.IsDir()}
	if v, ok := contentIDs.Load(path); ok {
		if c := v.(contentCached); c.stamp == stamp {
			return c.id
		}
	}
	var id string
	if fi.IsDir() {
		id, err = dirID(path)
	} else {
		id, err = fileID(path)
	}
	if err != nil {
		return path
	}
	contentIDs.Store(path, contentCached{stamp: stamp, id: id})
	return id
}

type contentStamp struct {
	size int64
	mod  time.Time
	dir  bool
}

type contentCached struct {
	stamp contentStamp
	id    string
}

// contentIDs caches contentID per path while the file is unchanged: a
// trial key is built many times per lab, and the ShareGPT sample is 7 MB.
var contentIDs sync.Map

func fileID(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)[:12]), nil
}

func dirID(path string) (string, error) {
	ents, err := os.ReadDir(path)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return "", err
		}
		parts = append(parts, fmt.Sprintf("%s=%d", e.Name(), fi.Size()))
	}
	slices.Sort(parts)
	h := sha256.Sum256([]byte(strings.Join(parts, "\n")))
	return "dir:" + filepath.Base(path) + ":" + hex.EncodeToString(h[:12]), nil
}

// keyed is the spec as its key sees it: every path it names replaced by
// contentID. It copies what it changes, so s is left as it was.
func (s Spec) keyed() Spec {
	s.Tokenizer = contentID(s.Tokenizer)
	s.Model = contentID(s.Model)
	s.FP8Model = contentID(s.FP8Model)
	if s.Tuning != nil {
		w := s.Tuning.keyed()
		s.Tuning = &w
	}
	if s.Generalization != nil {
		g := make([]Workload, len(s.Generalization))
		for i, w := range s.Generalization {
			g[i] = w.keyed()
		}
		s.Generalization = g
	}
	if s.Volumes != nil {
		v := make([]string, len(s.Volumes))
		for i, m := range s.Volumes {
			host, rest, _ := strings.Cut(m, ":")
			v[i] = contentID(host) + ":" + rest
		}
		s.Volumes = v
	}
	return s
}

func (w Workload) keyed() Workload {
	w.Path = contentID(w.Path)
	return w
}

// KeyName is the workload's name plus a short hash of its definition, so two
// workloads that share a name but differ never share a measurement. The
// dataset counts by content (see contentID).
func (w Workload) KeyName() string { return w.keyed().PathKeyName() }

// PathKeyName is KeyName as it was before datasets counted by content: the
// absolute path hashed. Trials stored under it are renamed when their run is
// adopted (see Lab.adoptLegacy).
func (w Workload) PathKeyName() string {
	b, _ := json.Marshal(w)
	h := fnv.New32a()
	h.Write(b)
	return fmt.Sprintf("%s~%08x", strings.ReplaceAll(w.Name, "/", "_"), h.Sum32())
}
