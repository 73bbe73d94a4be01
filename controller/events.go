package controller

import (
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgeota/edgeota/decision"
	"github.com/edgeota/edgeota/rollout"
)

// eventMemo remembers, per DaemonSet and reason, the message of the last
// event recorded, so that a condition that holds (a deprecated key, an
// invalid value) is reported when it appears or changes, not on every sync:
// a rollout syncs its DaemonSet several times a second. A restarted
// controller reports each once more.
type eventMemo struct {
	mu   sync.Mutex
	last map[eventMemoKey]string
}

type eventMemoKey struct{ key, reason string }

func newEventMemo() *eventMemo {
	return &eventMemo{last: map[eventMemoKey]string{}}
}

// changed records message as the last one of key and reason, and reports
// whether it differs from the one before.
func (m *eventMemo) changed(key, reason, message string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := eventMemoKey{key, reason}
	if last, ok := m.last[k]; ok && last == message {
		return false
	}
	m.last[k] = message
	return true
}

// clear forgets the reasons of key, so that they are reported again should
// they come back.
func (m *eventMemo) clear(key string, reasons ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range reasons {
		delete(m.last, eventMemoKey{key, r})
	}
}

// forget drops everything about key, when its DaemonSet is deleted.
func (m *eventMemo) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.last {
		if k.key == key {
			delete(m.last, k)
		}
	}
}

// nodeEventOnChange records a Warning on the node unless the last one with
// this reason said the same.
func (c *Controller) nodeEventOnChange(node *nodeRecord, reason, message string) {
	if c.eventMemo.changed("node/"+node.Name, reason, message) {
		c.recorder.Event(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name, UID: node.UID}}, corev1.EventTypeWarning, reason, message)
	}
}

// eventOnChange records the event unless the last one of the DaemonSet with
// this reason said the same.
func (c *Controller) eventOnChange(ds *appsv1.DaemonSet, key, eventType, reason, message string) {
	if c.eventMemo.changed(key, reason, message) {
		c.recorder.Event(ds, eventType, reason, message)
	}
}

// strategyFor returns the DaemonSet's strategy and whether the controller
// should act on it, recording why not on the DaemonSet. Configuration errors
// are not returned as errors: retrying cannot fix them, the next change to the
// DaemonSet brings it back to the queue.
// Each event is recorded when its cause appears or changes, not on every sync.
func (c *Controller) strategyFor(ds *appsv1.DaemonSet, key string) (rollout.Strategy, bool) {
	s, legacy, ok, err := rollout.StrategyOf(ds)
	if !ok {
		c.eventMemo.forget(key)
		return "", false
	}
	if legacy {
		c.eventOnChange(ds, key, corev1.EventTypeNormal, rollout.ReasonDeprecatedAnnotation,
			fmt.Sprintf("annotation %s is accepted for compatibility; use %s", rollout.LegacyStrategyAnnotation, rollout.StrategyAnnotation))
	} else {
		c.eventMemo.clear(key, rollout.ReasonDeprecatedAnnotation)
	}
	if err != nil {
		reason := rollout.ReasonInvalidStrategy
		if s != "" {
			reason = rollout.ReasonUnsupportedUpdateStrategy
		}
		c.eventOnChange(ds, key, corev1.EventTypeWarning, reason, err.Error())
		return "", false
	}
	c.eventMemo.clear(key, rollout.ReasonInvalidStrategy, rollout.ReasonUnsupportedUpdateStrategy)
	return s, true
}

// settingsValid records a Warning event when the DaemonSet's controls do not
// parse (once per distinct error, not on every sync) and reports whether
// they did.
func (c *Controller) settingsValid(ds *appsv1.DaemonSet, key string, err error) bool {
	if err == nil {
		c.eventMemo.clear(key, rollout.ReasonInvalidMaxUnavailable, rollout.ReasonInvalidAnnotation)
		return true
	}
	reason := rollout.ReasonInvalidAnnotation
	if decision.IsMaxUnavailable(err) {
		reason = rollout.ReasonInvalidMaxUnavailable
	}
	c.eventOnChange(ds, key, corev1.EventTypeWarning, reason, err.Error()+"; nothing is deleted or newly offered until it is fixed")
	return false
}
