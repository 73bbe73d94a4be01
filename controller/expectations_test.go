package controller

import (
	"maps"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestExpectations(t *testing.T) {
	now := time.Unix(1000, 0)
	e := newExpectations(func() time.Time { return now })
	const key = "ns/ds"

	if got := e.pendingDeletions(key); len(got) != 0 {
		t.Fatalf("got pending deletions %v with nothing expected, want none", got)
	}
	e.expectDeletions(key, map[types.UID]string{"a": "node-a", "b": "node-b"})
	e.deletionObserved(key, "a", true)
	if got, want := e.pendingDeletions(key), map[types.UID]string{"b": "node-b"}; !maps.Equal(got, want) {
		t.Errorf("got pending deletions %v with b unseen, want %v", got, want)
	}
	e.deletionObserved(key, "b", false) // failed: no replacement coming
	if got := e.pendingDeletions(key); len(got) != 0 {
		t.Errorf("got pending deletions %v with all observed, want none", got)
	}
	if got := e.awaitingReplacement(key); !slices.Equal(got, []string{"node-a"}) {
		t.Errorf("got nodes awaiting replacement %v, want [node-a]", got)
	}
	e.replaced(key, "node-a")
	if got := e.awaitingReplacement(key); len(got) != 0 {
		t.Errorf("got nodes awaiting replacement %v after it was replaced, want none", got)
	}
}

func TestExpectationsExpire(t *testing.T) {
	now := time.Unix(1000, 0)
	e := newExpectations(func() time.Time { return now })
	const key = "ns/ds"
	e.expectDeletions(key, map[types.UID]string{"a": "node-a", "b": "node-b"})
	e.deletionObserved(key, "a", true)
	now = now.Add(expectationsTTL + time.Second)
	if got := e.pendingDeletions(key); len(got) != 0 {
		t.Errorf("got pending deletions %v past the TTL, want none: a lost event must not hold a node forever", got)
	}
	if got := e.awaitingReplacement(key); len(got) != 0 {
		t.Errorf("got nodes awaiting replacement %v past the TTL, want none", got)
	}
	e.forget(key)
	if _, ok := e.byKey[key]; ok {
		t.Error("got the key still tracked after forget, want it dropped")
	}
}
