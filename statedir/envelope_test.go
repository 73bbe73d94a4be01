package statedir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

type sample struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func TestJSONRoundTrips(t *testing.T) {
	d := open(t)
	want := sample{Name: "a", Count: 3}
	if err := d.WriteJSON("s.json", "Sample", 1, want); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	var got sample
	if err := d.ReadJSON("s.json", "Sample", 1, &got); err != nil {
		t.Fatalf("ReadJSON: %v", err)
	}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestReadJSONSaysWhatIsWrong(t *testing.T) {
	good := []byte(`{"kind":"Sample","version":1,"data":{"name":"a","count":1}}`)
	for _, tc := range []struct {
		name    string
		content []byte
		want    error
	}{
		{"empty", nil, ErrCorrupt},
		{"truncated", good[:len(good)/2], ErrCorrupt},
		{"random bytes", []byte{0x9f, 0x00, 0xff, 0x13, 0x37, '{', 0x01}, ErrCorrupt},
		{"trailing bytes", append(append([]byte{}, good...), "xyz"...), ErrCorrupt},
		{"no data", []byte(`{"kind":"Sample","version":1}`), ErrCorrupt},
		{"null data", []byte(`{"kind":"Sample","version":1,"data":null}`), ErrCorrupt},
		{"data of the wrong shape", []byte(`{"kind":"Sample","version":1,"data":[1,2]}`), ErrCorrupt},
		{"another version", []byte(`{"kind":"Sample","version":2,"data":{}}`), ErrVersion},
		{"another kind", []byte(`{"kind":"Other","version":1,"data":{}}`), ErrVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := open(t)
			if err := d.WriteFile("s.json", tc.content); err != nil {
				t.Fatal(err)
			}
			var got sample
			if err := d.ReadJSON("s.json", "Sample", 1, &got); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		var got sample
		if err := open(t).ReadJSON("s.json", "Sample", 1, &got); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("got %v, want fs.ErrNotExist", err)
		}
	})
	t.Run("not readable", func(t *testing.T) {
		d := open(t)
		// A directory where the file should be cannot be read, even by root.
		if err := os.Mkdir(filepath.Join(d.Path(), "s.json"), 0o700); err != nil {
			t.Fatal(err)
		}
		var got sample
		err := d.ReadJSON("s.json", "Sample", 1, &got)
		if err == nil || errors.Is(err, ErrVersion) || errors.Is(err, fs.ErrNotExist) {
			t.Errorf("got %v, want a read error", err)
		}
	})
}

func FuzzDecodeNeverPanics(f *testing.F) {
	f.Add([]byte(`{"kind":"Sample","version":1,"data":{"name":"a","count":1}}`))
	f.Add([]byte(`{"kind":"Sample","version":1,"data":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var got sample
		_ = decode("s.json", data, "Sample", 1, &got)
	})
}
