package server

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// maxEchoed bounds how much of a rejected value an error message repeats, so
// that a 64 KiB path segment does not come back as a 64 KiB error.
const maxEchoed = 64

// validatePodRef checks the namespace and name taken from a request before they
// reach the API server or a log line: a namespace is a DNS-1123 label, a name a
// DNS-1123 subdomain. The path segments "." and "..", and a "/" inside a
// segment (which only an encoded slash can put there), are rejected with a
// message of their own.
func validatePodRef(namespace, name string) error {
	if err := validateSegment("namespace", namespace, validation.IsDNS1123Label); err != nil {
		return err
	}
	return validateSegment("name", name, validation.IsDNS1123Subdomain)
}

func validateSegment(field, value string, check func(string) []string) error {
	switch {
	case value == "":
		return fmt.Errorf("pod %s must not be empty", field)
	case value == "." || value == "..":
		return fmt.Errorf("pod %s must not be the path segment %q", field, value)
	case strings.Contains(value, "/") || strings.Contains(strings.ToUpper(value), "%2F"):
		return fmt.Errorf("pod %s %s must not contain '/', encoded or not", field, echo(value))
	}
	if errs := check(value); len(errs) > 0 {
		return fmt.Errorf("invalid pod %s %s: %s", field, echo(value), strings.Join(errs, "; "))
	}
	return nil
}

// echo quotes a rejected value for an error message, escaping control and
// non-ASCII characters and cutting it short when it is long.
func echo(value string) string {
	if len(value) > maxEchoed {
		return fmt.Sprintf("%+q… (%d bytes)", value[:maxEchoed], len(value))
	}
	return fmt.Sprintf("%+q", value)
}
