package server

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/edgeota/edgeota/internal/untrusted"
)

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
		return fmt.Errorf("pod %s %s must not contain '/', encoded or not", field, untrusted.Quote(value))
	}
	if errs := check(value); len(errs) > 0 {
		return fmt.Errorf("invalid pod %s %s: %s", field, untrusted.Quote(value), strings.Join(errs, "; "))
	}
	return nil
}
