package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/edgeota/edgeota/rollout"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// setPaused pauses the DaemonSet's rollout (edgeota.io/paused: "true") or
// resumes it (the annotation removed), with a merge patch of that one
// annotation: nothing else of the DaemonSet is touched, and writing the state
// it is already in changes nothing. A DaemonSet edgeota does not roll out is
// refused, since the annotation would do nothing there.
func (c *cli) setPaused(ctx context.Context, name string, pause bool) error {
	daemonSets := c.client.AppsV1().DaemonSets(c.namespace)
	ds, err := daemonSets.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := optedIn(ds); err != nil {
		return err
	}
	value, done := any("true"), "paused"
	if !pause {
		value, done = nil, "resumed"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{rollout.PausedAnnotation: value}}})
	if err != nil {
		return fmt.Errorf("encoding the patch: %w", err)
	}
	if _, err := daemonSets.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "daemonset.apps/%s %s\n", name, done)
	return nil
}
