package ownerauth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseTokens(t *testing.T) {
	cases := []struct {
		name    string
		csv     string
		token   string
		want    *Identity
		wantErr string
	}{
		{name: "three columns", csv: "abc,alice,1001\n", token: "abc", want: &Identity{User: "alice", UID: "1001", Via: viaToken}},
		{name: "quoted groups", csv: `abc,alice,1001,"edgeota:viewers,edgeota:upgraders"` + "\n", token: "abc",
			want: &Identity{User: "alice", UID: "1001", Groups: []string{GroupViewers, GroupUpgraders}, Via: viaToken}},
		{name: "one group unquoted", csv: "abc,alice,1001,edgeota:viewers\n", token: "abc",
			want: &Identity{User: "alice", UID: "1001", Groups: []string{GroupViewers}, Via: viaToken}},
		{name: "spaces around groups", csv: `abc, alice, 1001, " edgeota:viewers , "` + "\n", token: "abc",
			want: &Identity{User: "alice", UID: "1001", Groups: []string{GroupViewers}, Via: viaToken}},
		{name: "blank lines", csv: "\n\nabc,alice,1001\n\n", token: "abc", want: &Identity{User: "alice", UID: "1001", Via: viaToken}},
		{name: "empty uid", csv: "abc,alice,\n", token: "abc", want: &Identity{User: "alice", Via: viaToken}},
		{name: "too few columns", csv: "abc,alice,1\n\nxyz,bob\n", wantErr: "line 3: got 2 columns, want at least 3"},
		{name: "empty token", csv: ",alice,1\n", wantErr: "line 1: empty token"},
		{name: "empty user", csv: "abc,,1\n", wantErr: "line 1: empty user name"},
		{name: "duplicate token", csv: "abc,alice,1\nabc,bob,2\n", wantErr: "line 2: duplicate token"},
		{name: "unterminated quote", csv: "abc,alice,1,\"g\n", wantErr: "line 1"},
		{name: "empty file", csv: "\n", wantErr: "no tokens"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tf, err := parseTokens(strings.NewReader(tc.csv))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want nil", err)
			}
			got, ok := tf.lookup(tc.token)
			if !ok {
				t.Fatalf("token %q not found", tc.token)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("identity (-want +got):\n%s", diff)
			}
			if _, ok := tf.lookup(tc.token + "x"); ok {
				t.Errorf("got a match for %q, want none", tc.token+"x")
			}
		})
	}
}

func TestLoadTokenFileNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(path, []byte("abc,alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTokenFile(path); err == nil || !strings.Contains(err.Error(), path+": line 1") {
		t.Errorf("got %v, want an error naming %s and the line", err, path)
	}
	if _, err := LoadTokenFile(path + ".missing"); err == nil {
		t.Errorf("got nil, want an error for a missing file")
	}
}
