package controller

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestExpectations(t *testing.T) {
	now := time.Unix(1000, 0)
	e := newExpectations(func() time.Time { return now })
	const key = "ns/ds"

	if !e.satisfied(key) {
		t.Fatal("got unsatisfied with nothing expected, want satisfied")
	}
	e.expectDeletions(key, map[types.UID]string{"a": "node-a", "b": "node-b"})
	if e.deletionObserved(key, "a", true) {
		t.Error("got the last deletion observed with b pending, want not")
	}
	if e.satisfied(key) {
		t.Error("got satisfied with b pending, want unsatisfied")
	}
	if !e.deletionObserved(key, "b", false) { // failed: no replacement coming
		t.Error("got b not the last deletion observed, want it to be")
	}
	if e.deletionObserved(key, "b", false) {
		t.Error("got b observed twice as the last deletion, want once")
	}
	if !e.satisfied(key) {
		t.Error("got unsatisfied with all observed, want satisfied")
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
	if !e.satisfied(key) {
		t.Error("got unsatisfied past the TTL, want satisfied: a lost event must not block forever")
	}
	if got := e.awaitingReplacement(key); len(got) != 0 {
		t.Errorf("got nodes awaiting replacement %v past the TTL, want none", got)
	}
	e.forget(key)
	if _, ok := e.byKey[key]; ok {
		t.Error("got the key still tracked after forget, want it dropped")
	}
}
