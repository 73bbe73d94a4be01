package statedir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrVersion is returned by ReadJSON for a file written in another format
// version (or for another kind of content) than the reader knows.
var ErrVersion = errors.New("unknown format version")

// ErrCorrupt is returned by ReadJSON for a file that is not a complete,
// well-formed envelope: empty, truncated, or not JSON at all.
var ErrCorrupt = errors.New("corrupt file")

// envelope wraps every file's content with what it is and which version of
// its format it follows, so that a reader never mistakes one file for
// another, nor an older or newer format for its own.
type envelope struct {
	Kind    string          `json:"kind"`
	Version int             `json:"version"`
	Data    json.RawMessage `json:"data"`
}

// WriteJSON writes v as JSON in an envelope naming kind and version, with
// WriteFile's atomicity.
func (d *Dir) WriteJSON(name, kind string, version int, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	out, err := json.Marshal(envelope{Kind: kind, Version: version, Data: data})
	if err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	return d.WriteFile(name, out)
}

// ReadJSON decodes into v the content of the file name, which must be an
// envelope of the given kind and version. The error satisfies errors.Is with
// fs.ErrNotExist for a missing file, ErrCorrupt for a file that does not
// decode, and ErrVersion for another kind or version.
func (d *Dir) ReadJSON(name, kind string, version int, v any) error {
	data, err := d.ReadFile(name)
	if err != nil {
		return err
	}
	return decode(name, data, kind, version, v)
}

func decode(name string, data []byte, kind string, version int, v any) error {
	var env envelope
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&env); err != nil {
		return fmt.Errorf("%s: %w: %v", name, ErrCorrupt, err)
	}
	if rest := bytes.TrimSpace(data[dec.InputOffset():]); len(rest) > 0 {
		return fmt.Errorf("%s: %w: %d bytes after the envelope", name, ErrCorrupt, len(rest))
	}
	if env.Kind != kind || env.Version != version {
		return fmt.Errorf("%s: %w: holds %q version %d, this agent reads %q version %d",
			name, ErrVersion, env.Kind, env.Version, kind, version)
	}
	if len(env.Data) == 0 || bytes.Equal(env.Data, []byte("null")) {
		return fmt.Errorf("%s: %w: no data", name, ErrCorrupt)
	}
	if err := json.Unmarshal(env.Data, v); err != nil {
		return fmt.Errorf("%s: %w: %v", name, ErrCorrupt, err)
	}
	return nil
}
