package ownerauth

import (
	"crypto/sha256"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// TokenFile holds the bearer tokens of a static token file, in
// kube-apiserver's format: one CSV line per token, token,user,uid and an
// optional fourth column of groups ("group1,group2", quoted).
type TokenFile struct {
	// Keyed by the token's SHA-256, so that a lookup's timing says nothing
	// useful about how close a guess came.
	tokens map[[sha256.Size]byte]*Identity
}

// LoadTokenFile reads a static token file. Blank lines are skipped; a line
// with fewer than three columns, an empty token or user, or a token seen
// before is an error naming the line.
func LoadTokenFile(path string) (*TokenFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the token file: %w", err)
	}
	defer f.Close()
	tf, err := parseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return tf, nil
}

func parseTokens(r io.Reader) (*TokenFile, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	tf := &TokenFile{tokens: map[[sha256.Size]byte]*Identity{}}
	for {
		record, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		switch {
		case len(record) < 3:
			return nil, fmt.Errorf("line %d: got %d columns, want at least 3 (token,user,uid)", line, len(record))
		case record[0] == "":
			return nil, fmt.Errorf("line %d: empty token", line)
		case record[1] == "":
			return nil, fmt.Errorf("line %d: empty user name", line)
		}
		key := sha256.Sum256([]byte(record[0]))
		if _, dup := tf.tokens[key]; dup {
			return nil, fmt.Errorf("line %d: duplicate token", line)
		}
		id := &Identity{User: record[1], UID: record[2], Via: viaToken}
		if len(record) > 3 {
			for _, g := range strings.Split(record[3], ",") {
				if g = strings.TrimSpace(g); g != "" {
					id.Groups = append(id.Groups, g)
				}
			}
		}
		tf.tokens[key] = id
	}
	if len(tf.tokens) == 0 {
		return nil, errors.New("no tokens")
	}
	return tf, nil
}

func (tf *TokenFile) lookup(token string) (*Identity, bool) {
	id, ok := tf.tokens[sha256.Sum256([]byte(token))]
	return id, ok
}

// user returns the identity the file gives user name with uid now, the
// groups of all its tokens together: how a queued action's caller is checked
// again when it runs, without its token, which is never stored.
func (tf *TokenFile) user(name, uid string) (*Identity, bool) {
	var found *Identity
	for _, id := range tf.tokens {
		if id.User != name || id.UID != uid {
			continue
		}
		if found == nil {
			found = &Identity{User: id.User, UID: id.UID, Via: viaToken}
		}
		for _, g := range id.Groups {
			if !slices.Contains(found.Groups, g) {
				found.Groups = append(found.Groups, g)
			}
		}
	}
	return found, found != nil
}
