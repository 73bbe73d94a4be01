// Package podcondition holds the OTA pod conditions that the controller and the
// node agent share (names compatible with OpenYurt's) and the one way both
// write them: a strategic-merge patch of a single condition type on the pod's
// status subresource, so that concurrent writers never erase each other's
// conditions and never collide on resourceVersion.
package podcondition
