package rollout

import (
	"fmt"
	"strings"
)

// UpdateMethod is how a node's pod moves to the target revision
// (UpdateMethodAnnotation), with OpenKruise's words for it.
type UpdateMethod string

const (
	// MethodRecreate deletes the pod; the native DaemonSet controller
	// creates the new one from the template. The default.
	MethodRecreate UpdateMethod = "Recreate"
	// MethodInPlaceIfPossible patches the pod's images when only images
	// changed between its revision and the target (and the template
	// carries InPlaceLabel), and recreates it otherwise.
	MethodInPlaceIfPossible UpdateMethod = "InPlaceIfPossible"
)

// ParseUpdateMethod reads an UpdateMethodAnnotation value, any case; absent
// ("") is MethodRecreate.
func ParseUpdateMethod(value string) (UpdateMethod, error) {
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "", "recreate":
		return MethodRecreate, nil
	case "inplaceifpossible":
		return MethodInPlaceIfPossible, nil
	}
	return "", fmt.Errorf("unknown update method %q: want %s or %s", value, MethodInPlaceIfPossible, MethodRecreate)
}
