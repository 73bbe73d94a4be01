package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// modulePath identifies the checkout's go.mod, so that Root finds the project
// root from any directory inside it (tests run in their package's directory).
const modulePath = "github.com/edgeota/edgeota"

// Root returns the root of the edgeota checkout containing the working
// directory: the nearest ancestor whose go.mod declares the edgeota module.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the checkout root: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(data), []byte("module "+modulePath+"\n")) {
			return dir, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("finding the checkout root: %w", err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("finding the checkout root: no go.mod of module %s above the working directory", modulePath)
		}
		dir = parent
	}
}
